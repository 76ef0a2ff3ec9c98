"""Catalogue of server types, with explicit units.

Capacities are in the package's resource units (``RESOURCE_UNITS``): GPUs and vCPUs as counts,
memory and storage in GB, NIC bandwidth in Gbps. The EC2 types follow the reference's ambiguity
A1 (approximate public specs, not confirmed by a primary source; EC2 lists memory in GiB and we
use the number as GB). Storage is unspecified by the paper: about 1000 GB per server (A1).
Bandwidth is not part of a type: the paper draws each server's NIC bandwidth from U[20, 50] Gbps
(section 10), so a type turns into a capacity only once a bandwidth is given.

The paper's section III-A puts workers on GPU servers and PSs on high-bandwidth non-GPU servers;
its evaluation text swaps them (A1). ``GPU_TYPES`` (P2/G3) and ``CPU_TYPES`` (C4) are the two
pools of our default choice; the workload generators expose the swap as a switch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# Resource name -> unit, in the order of ``oasis_opt.model.DEFAULT_RESOURCES``.
RESOURCE_UNITS = {"gpu": "GPUs", "cpu": "vCPUs", "mem": "GB", "storage": "GB", "bw": "Gbps"}

DEFAULT_STORAGE_GB = 1000.0  # A1: the paper gives no storage capacity
PAPER_SERVER_BW_GBPS = (20.0, 50.0)  # section 10: server bandwidth uniform in [20, 50] Gbps


@dataclass(frozen=True)
class ServerType:
    """A server model: ``gpus`` (count), ``vcpus`` (count), ``memory_gb`` (GB), ``storage_gb`` (GB).

    ``capacity(bandwidth_gbps)`` gives the capacity map of one server of this type; ``accelerator``
names its accelerator type (``costmodel.accelerators``) where the catalogue has one.
    """

    name: str
    gpus: int
    vcpus: int
    memory_gb: float
    storage_gb: float = DEFAULT_STORAGE_GB
    description: str = ""
    accelerator: str | None = None  # its accelerator type in ``costmodel.accelerators``

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name: must be a non-empty string")
        for field in ("gpus", "vcpus", "memory_gb", "storage_gb"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{field}: must be a finite number >= 0, got {v!r}")

    def capacity(self, bandwidth_gbps: float) -> dict[str, float]:
        """Capacity ``{resource: amount}`` in ``RESOURCE_UNITS``, with a NIC of ``bandwidth_gbps``."""
        bw = float(bandwidth_gbps)
        if not math.isfinite(bw) or bw <= 0:
            raise ValueError(f"bandwidth_gbps: must be a finite number > 0, got {bandwidth_gbps!r}")
        return {"gpu": float(self.gpus), "cpu": float(self.vcpus), "mem": float(self.memory_gb),
                "storage": float(self.storage_gb), "bw": bw}


def _types(*types: ServerType) -> dict[str, ServerType]:
    return {t.name: t for t in types}


CATALOGUE: dict[str, ServerType] = _types(
    # EC2 types of the paper's simulations (A1)
    ServerType("c4.8xlarge", 0, 36, 60.0, description="EC2 C4, compute optimised, no GPU (PS pool)"),
    ServerType("p2.8xlarge", 8, 32, 488.0, description="EC2 P2, 8 NVIDIA K80 GPUs",
               accelerator="k80"),
    ServerType("p2.16xlarge", 16, 64, 732.0, description="EC2 P2, 16 NVIDIA K80 GPUs",
               accelerator="k80"),
    ServerType("g3.8xlarge", 2, 32, 244.0, description="EC2 G3, 2 NVIDIA M60 GPUs"),
    ServerType("g3.16xlarge", 4, 64, 488.0, description="EC2 G3, 4 NVIDIA M60 GPUs"),
    # the paper's 9-server testbed (section 14): worker hosts with and without a GPU, PS hosts
    ServerType("testbed-worker-gpu", 1, 32, 80.0, 600.0,
               description="testbed worker host, 32 cores, 80 GB, 600 GB, one GPU"),
    ServerType("testbed-worker", 0, 32, 80.0, 600.0,
               description="testbed worker host, 32 cores, 80 GB, 600 GB, no GPU"),
    ServerType("testbed-ps", 0, 8, 32.0, 1500.0,
               description="testbed PS host, 8 cores, 32 GB, 1.5 TB"),
    # hosts of the other accelerator generations and of CPU-mode workers, for mixed clusters
    # (approximate public EC2 specs, as A1; no EC2 type has P100s: a P3-shaped host [choice])
    ServerType("p3.8xlarge", 4, 32, 244.0, description="EC2 P3, 4 NVIDIA V100 GPUs",
               accelerator="v100"),
    ServerType("p3.16xlarge", 8, 64, 488.0, description="EC2 P3, 8 NVIDIA V100 GPUs",
               accelerator="v100"),
    ServerType("p100x4", 4, 32, 244.0, description="a P3-shaped host with 4 NVIDIA P100 GPUs",
               accelerator="p100"),
    ServerType("p4d.24xlarge", 8, 96, 1152.0, description="EC2 P4d, 8 NVIDIA A100 GPUs",
               accelerator="a100"),
    ServerType("p5.48xlarge", 8, 192, 2048.0, description="EC2 P5, 8 NVIDIA H100 GPUs",
               accelerator="h100"),
    ServerType("c5.18xlarge", 0, 72, 144.0, description="EC2 C5, 72 vCPUs: CPU-mode workers",
               accelerator="cpu"),
)

# Server types of each accelerator for mixed clusters (``workloads.paper``'s ``cluster_mix``).
ACCELERATOR_SERVERS: dict[str, tuple[str, ...]] = {
    "v100": ("p3.8xlarge", "p3.16xlarge"), "p100": ("p100x4",),
    "k80": ("p2.8xlarge", "p2.16xlarge"), "a100": ("p4d.24xlarge",), "h100": ("p5.48xlarge",),
    "cpu": ("c5.18xlarge",),
}

GPU_TYPES: tuple[str, ...] = ("p2.8xlarge", "p2.16xlarge", "g3.8xlarge", "g3.16xlarge")
CPU_TYPES: tuple[str, ...] = ("c4.8xlarge",)

# Testbed NIC: every server has a dual-port 10GbE NIC (and a dual-port 1GbE one, which we take
# as management): 2 x 10 Gbps.
TESTBED_BW_GBPS = 20.0


def get_server_type(name: str) -> ServerType:
    """The catalogue entry ``name``; ValueError listing the known ones otherwise."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise ValueError(f"unknown server type {name!r} (known: {', '.join(CATALOGUE)})") from None
