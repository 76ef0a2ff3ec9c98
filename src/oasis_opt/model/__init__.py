"""The problem model: instances, jobs, servers, topology, utilities, schedules and the validator."""
from .checks import FormatError
from .instance import (BANDWIDTH, DEFAULT_RESOURCES, JOB_CLASSES, Instance, Job, JobType, Server,
                       UnsupportedInstance, required_work)
from .schedule import PS, ROLES, WORKER, Allocations, Schedule, ScheduleBuilder, derive_outcome
from .topology import Topology
from .utility import Utility
from .validate import (RULES, InvalidSchedule, ValidationReport, Violation, assert_valid,
                       validate)

__all__ = [
    "FormatError", "BANDWIDTH", "DEFAULT_RESOURCES", "JOB_CLASSES", "Instance", "Job", "JobType", "Server",
    "UnsupportedInstance", "required_work",
    "PS", "ROLES", "WORKER", "Allocations", "Schedule", "ScheduleBuilder", "derive_outcome",
    "Topology", "Utility", "RULES", "InvalidSchedule", "ValidationReport", "Violation",
    "assert_valid", "validate",
]
