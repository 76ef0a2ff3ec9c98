"""Real GPU-cluster traces as instances: Philly, the Pollux workloads, Tiresias, PAI, Helios.

One module per trace (``philly``, ``pai``, ``pollux``, ``tiresias``, ``helios``; Gavel's is
``gavel``), what they share in ``trace_common`` (the shipped trace folder, strict CSV reading,
the mapping of a rigid trace job to the paper's model). This module gathers their names where
they have always been importable from; ``trace_registry`` names the traces ``generate --trace``
builds instances from.

The trace files ship with the package (``oasis_opt/data/traces``, 1.8 MB, each folder with its
licence; see its README for sources and citations); every loader also takes ``root``, a folder
laid out the same way (e.g. ``../shared/traces``). Malformed files raise ``FormatError`` whose
field names the file, the row (1 = header) and the column.
"""
from __future__ import annotations

from .helios import HELIOS_COLUMNS, load_helios_utilisation
from .pai import PAI_COLUMNS, _stratified, pai_cluster, read_pai_machines
from .philly import (PHILLY_COLUMNS, PHILLY_FULL_SIZE, PHILLY_SOURCES, PhillyCluster, PhillyFilter,
                     PhillyJob, philly_cluster, philly_instance, philly_jobs, read_philly)
from .pollux import POLLUX_COLUMNS, POLLUX_GPU_HOURS, pollux_instance
from .tiresias import CLUSTER_SPEC_COLUMNS, TIRESIAS_COLUMNS, read_cluster_spec, tiresias_instance
from .trace_common import (PS_DEMAND, TIME_FORMAT, WORKER_DEMAND, WORKERS_PER_PS, TraceJob,
                           TraceMapping, parse_float, parse_int, parse_str, parse_time, _window,
                           read_csv, trace_instance, trace_root)

__all__ = ["CLUSTER_SPEC_COLUMNS", "HELIOS_COLUMNS", "PAI_COLUMNS", "PHILLY_COLUMNS",
           "PHILLY_FULL_SIZE", "PHILLY_SOURCES", "POLLUX_COLUMNS", "POLLUX_GPU_HOURS", "PS_DEMAND",
           "TIME_FORMAT", "TIRESIAS_COLUMNS", "WORKERS_PER_PS", "WORKER_DEMAND", "PhillyCluster",
           "PhillyFilter", "PhillyJob", "TraceJob", "TraceMapping", "load_helios_utilisation",
           "pai_cluster", "philly_cluster", "philly_instance", "philly_jobs", "pollux_instance",
           "read_cluster_spec", "read_csv", "read_pai_machines", "read_philly", "tiresias_instance",
           "trace_instance", "trace_root"]
