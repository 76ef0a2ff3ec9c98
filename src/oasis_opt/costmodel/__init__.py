"""Hardware cost model: the server and accelerator catalogues and the speed model (chunk time,
speed by model family and accelerator) with explicit units."""
from .accelerators import (ACCELERATORS, CPU_SLOWDOWN, CPU_WORKER_VCPUS, FAMILIES, MODEL_FAMILY,
                           REFERENCE_ACCELERATOR, RELATIVE_SPEED, SPEED_TOLERANCE, Accelerator,
                           chunk_time_on, cpu_mode_worker, get_accelerator, integer_speeds,
                           model_family, relative_speed)
from .catalogue import (ACCELERATOR_SERVERS, CATALOGUE, CPU_TYPES, DEFAULT_STORAGE_GB, GPU_TYPES,
                        PAPER_SERVER_BW_GBPS, RESOURCE_UNITS, TESTBED_BW_GBPS, ServerType,
                        get_server_type)
from .chunktime import (MBIT_PER_MB, MBPS_PER_GBPS, PROVENANCE_KEYS, chunk_time,
                        chunk_time_from_provenance, comm_time_s, gbps_to_mbps,
                        megabytes_to_megabits, provenance)

__all__ = [
    "ACCELERATORS", "CPU_SLOWDOWN", "CPU_WORKER_VCPUS", "FAMILIES", "MODEL_FAMILY",
    "REFERENCE_ACCELERATOR", "RELATIVE_SPEED", "SPEED_TOLERANCE", "Accelerator", "chunk_time_on",
    "cpu_mode_worker", "get_accelerator", "integer_speeds", "model_family", "relative_speed",
    "ACCELERATOR_SERVERS", "CATALOGUE", "CPU_TYPES", "DEFAULT_STORAGE_GB", "GPU_TYPES", "PAPER_SERVER_BW_GBPS",
    "RESOURCE_UNITS", "TESTBED_BW_GBPS", "ServerType", "get_server_type",
    "MBIT_PER_MB", "MBPS_PER_GBPS", "PROVENANCE_KEYS", "chunk_time", "chunk_time_from_provenance",
    "comm_time_s", "gbps_to_mbps", "megabytes_to_megabits", "provenance",
]
