"""Hardware cost model: the server catalogue and the speed model (chunk time) with explicit units."""
from .catalogue import (CATALOGUE, CPU_TYPES, DEFAULT_STORAGE_GB, GPU_TYPES, PAPER_SERVER_BW_GBPS,
                        RESOURCE_UNITS, TESTBED_BW_GBPS, ServerType, get_server_type)
from .chunktime import (MBIT_PER_MB, MBPS_PER_GBPS, PROVENANCE_KEYS, chunk_time,
                        chunk_time_from_provenance, comm_time_s, gbps_to_mbps,
                        megabytes_to_megabits, provenance)

__all__ = [
    "CATALOGUE", "CPU_TYPES", "DEFAULT_STORAGE_GB", "GPU_TYPES", "PAPER_SERVER_BW_GBPS",
    "RESOURCE_UNITS", "TESTBED_BW_GBPS", "ServerType", "get_server_type",
    "MBIT_PER_MB", "MBPS_PER_GBPS", "PROVENANCE_KEYS", "chunk_time", "chunk_time_from_provenance",
    "comm_time_s", "gbps_to_mbps", "megabytes_to_megabits", "provenance",
]
