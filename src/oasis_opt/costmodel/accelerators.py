"""Accelerator catalogue and training speed by model family and accelerator, with explicit units.

A heterogeneous instance (``model.instance``) gives each job an integer speed per accelerator
type; this module is where those speeds come from.

**Speed** (``relative_speed(family, accelerator)``): training throughput of one worker on the
accelerator divided by that of the same job (same per-worker batch) on one V100, a
dimensionless ratio (steps/s on g) / (steps/s on V100); V100 = 1 by definition. A CPU-mode
worker is ``CPU_WORKER_VCPUS`` vCPUs of a CPU server doing the work of one GPU worker. Sources
(tags as in the package's reference on cluster schedulers, section 3):

* ``p100``, ``k80`` [source, derived]: Gavel's throughput table (Narayanan et al., OSDI 2020;
  ``stanford-futuredata/gavel`` ``simulation_throughputs.json``, MIT licence): the geometric mean,
  over the table's batch sizes of a model family, of the single-GPU throughput on the type
  divided by that on the V100. (Gavel's recommendation model runs faster on P100 and K80 than on
  V100 in that table; we keep its numbers.)
* ``a100`` [secondary]: Lambda Labs' A100 estimates: language-model training 1.95-2.5x a V100
  with FP16 Tensor Cores (we take 2.2 for the language families); about 2x for the others
  [choice, same source's range].
* ``h100`` [secondary]: an H100 over an A100 in MLPerf Training v3.0 pairs of equal systems (Dell
  submissions, analysed by Silverton Consulting): ResNet-50 1.8x, 3D-UNet segmentation 1.4x,
  DLRM recommendation 2.0x; we apply 1.8 to the image classifiers, 1.4 to the image-to-image
  and reinforcement-learning families, 2.0 to recommendation and the language families [choice
  for the last two].
* ``cpu`` [choice, within the documented range]: 10-50x slower than a V100 (the reference's
  cost model, section 3.7: CPU-"degraded" execution 10-50x slower; AlloX, EuroSys 2020, runs
  jobs on CPU or GPU at such different speeds). Deep convolutional families take the slow end
  (50x ResNet-50 and CycleGAN, 40x ResNet-18), the transformer 20x, and the recurrent language
  model, the embedding-bound recommendation model and the shallow A3C network 10x: GPUs gain
  most on deep CNNs and less on RNNs [secondary: Nishanth et al., "Performance of CPUs and GPUs
  on Deep Learning Models For Heterogeneous Datasets", 2022: GPU 8.8x on deeper CNNs vs 4.9x on
  RNNs; the TBD suite (Zhu et al.): V100s gain little on A3C's shallow CNN].

**Chunk time on a type.** Only computation speeds up: with a chunk time x (worker-slots on the
reference accelerator) of which the share c is computation (the rest is the push and pull of
gradients, paper p.3-4), the chunk time on g is x_g = x (c / q_g + 1 - c), q_g the compute speed
of g relative to the reference (``chunk_time_on``).

**Integer speeds** (``integer_speeds``, the rule the generators use). The model counts whole
work units: u_i units per reference worker-slot, s_ig units per worker-slot on type g. Given the
exact speed ratios r_g = x / x_g, the unit is the smallest u >= 1 for which every
s_g = floor(u r_g) is >= 1 and loses less than ``tolerance`` (default 1%) of u r_g; then
W_i = ceil(E_i N_i x_i u_i). Rounding speeds down and work up never shortens a job: on type g it
needs W_i / s_g >= E_i N_i x_g worker-slots, under 1 / (1 - tolerance) times the exact number
(plus the one unit of the ceiling).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..model.numerics import INTEGER_RTOL

REFERENCE_ACCELERATOR = "v100"
CPU_WORKER_VCPUS = 16  # vCPUs of one CPU-mode worker [choice]
SPEED_TOLERANCE = 0.01  # largest share of a speed lost by rounding it to whole units


@dataclass(frozen=True)
class Accelerator:
    """One accelerator type: ``kind`` "gpu" or "cpu"; ``memory_gb`` device memory (GB; for
    "cpu" the memory a CPU-mode worker gets is its container's); ``fp32_tflops`` peak FP32
    throughput (TFLOPS, vendor datasheet [secondary]; None for "cpu")."""

    name: str
    kind: str
    memory_gb: float | None
    fp32_tflops: float | None
    description: str = ""


ACCELERATORS: dict[str, Accelerator] = {a.name: a for a in (
    Accelerator("k80", "gpu", 12.0, 4.4, "NVIDIA Tesla K80 (Kepler, 2014), one GK210 of the card"),
    Accelerator("p100", "gpu", 16.0, 9.3, "NVIDIA Tesla P100 (Pascal, 2016), PCIe"),
    Accelerator("v100", "gpu", 16.0, 15.7, "NVIDIA Tesla V100 (Volta, 2017), SXM2"),
    Accelerator("a100", "gpu", 40.0, 19.5, "NVIDIA A100 (Ampere, 2020), SXM4"),
    Accelerator("h100", "gpu", 80.0, 67.0, "NVIDIA H100 (Hopper, 2022), SXM5"),
    Accelerator("cpu", "cpu", None, None,
                f"CPU mode: {CPU_WORKER_VCPUS} vCPUs of a CPU server per worker"),
)}

# Model families (Gavel's job types) and the package's model names that belong to each.
FAMILIES = ("resnet18", "resnet50", "transformer", "lm", "recommendation", "a3c", "cyclegan")
MODEL_FAMILY: dict[str, str] = {
    "cifar10": "resnet18",  # Pollux's cifar10 trains ResNet-18
    **{m: "resnet50" for m in ("resnet50", "resnet101", "resnet152", "imagenet", "vgg11",
                                "vgg16", "vgg19", "alexnet", "inception3", "inception4",
                                "googlenet", "yolov3")},  # image CNNs [choice for non-ResNets]
    "bert": "transformer",
    "deepspeech2": "lm",  # recurrent [choice]
    "ncf": "recommendation",
}

# throughput of one worker relative to one V100 (dimensionless; sources in the module docstring)
_GAVEL = {  # (p100, k80): geometric means over Gavel's batch sizes [source, derived]
    "resnet18": (0.902, 0.155), "resnet50": (0.659, 0.158), "transformer": (0.741, 0.280),
    "lm": (0.840, 0.250), "recommendation": (2.168, 1.308), "a3c": (0.792, 0.479),
    "cyclegan": (0.543, 0.114),
}
_A100 = {f: 2.2 if f in ("transformer", "lm") else 2.0 for f in FAMILIES}
_H100_OVER_A100 = {"resnet18": 1.8, "resnet50": 1.8, "transformer": 2.0, "lm": 2.0,
                   "recommendation": 2.0, "a3c": 1.4, "cyclegan": 1.4}
CPU_SLOWDOWN = {"resnet18": 40.0, "resnet50": 50.0, "transformer": 20.0, "lm": 10.0,
                "recommendation": 10.0, "a3c": 10.0, "cyclegan": 50.0}
"""V100 throughput / CPU-mode throughput per family (10-50x, module docstring)."""

RELATIVE_SPEED: dict[str, dict[str, float]] = {
    f: {"v100": 1.0, "p100": _GAVEL[f][0], "k80": _GAVEL[f][1], "a100": _A100[f],
        "h100": round(_A100[f] * _H100_OVER_A100[f], 6), "cpu": 1.0 / CPU_SLOWDOWN[f]}
    for f in FAMILIES
}
"""``[family][accelerator]``: throughput of one worker relative to one V100."""


def get_accelerator(name: str) -> Accelerator:
    """The catalogue entry ``name``; ValueError listing the known ones otherwise."""
    try:
        return ACCELERATORS[name]
    except KeyError:
        raise ValueError(f"unknown accelerator {name!r} (known: {', '.join(ACCELERATORS)})"
                         ) from None


def model_family(model: str) -> str:
    """The family of a model name (a family name is its own family); ValueError otherwise."""
    if model in RELATIVE_SPEED:
        return model
    try:
        return MODEL_FAMILY[model]
    except KeyError:
        raise ValueError(f"unknown model or family {model!r} (families: {', '.join(FAMILIES)}; "
                         f"models: {', '.join(MODEL_FAMILY)})") from None


def relative_speed(family: str, accelerator: str, reference: str = REFERENCE_ACCELERATOR
                   ) -> float:
    """Throughput of one worker of ``family`` on ``accelerator`` over that on ``reference``
    (dimensionless; V100 by default). ``family`` may be a model name (``model_family``)."""
    table = RELATIVE_SPEED[model_family(family)]
    get_accelerator(accelerator), get_accelerator(reference)
    return table[accelerator] / table[reference]


def chunk_time_on(chunk_time: float, compute_share: float, speed: float) -> float:
    """x_g = x (c / q + 1 - c): a chunk time (worker-slots) on a type whose compute speed is
    ``speed`` = q times the reference's, when ``compute_share`` = c of it is computation."""
    if not 0.0 <= compute_share <= 1.0:
        raise ValueError(f"compute_share: must be in [0, 1], got {compute_share!r}")
    if not (math.isfinite(speed) and speed > 0):
        raise ValueError(f"speed: must be a finite number > 0, got {speed!r}")
    return chunk_time * (compute_share / speed + 1.0 - compute_share)


def integer_speeds(ratios: Mapping[str, float], tolerance: float = SPEED_TOLERANCE,
                   max_unit: int = 1_000_000) -> tuple[int, dict[str, int]]:
    """``(u, {type: s_g})``: the smallest unit u >= 1 with s_g = floor(u r_g) >= 1 and
    (u r_g - s_g) / (u r_g) < ``tolerance`` for every type (module docstring). ``ratios``: the
    exact speed ratios r_g > 0 (chunk time on the reference / chunk time on g).

    A product within 1e-9 (relative) of an integer counts as that integer, so exact ratios such
    as 1.6 give exact speeds despite float rounding."""
    if not 0.0 < tolerance < 1.0:
        raise ValueError(f"tolerance: must be in (0, 1), got {tolerance!r}")
    names = list(ratios)
    r = np.array([float(ratios[n]) for n in names])
    if not len(r) or not (np.isfinite(r).all() and (r > 0).all()):
        raise ValueError(f"ratios: expected at least one finite ratio > 0, got {dict(ratios)!r}")
    # u r >= 1 / tolerance always suffices (the loss is < 1 / (u r)): search up to there
    top = min(max_unit, int(math.ceil(1.0 / (tolerance * r.min()))) + 1)
    u = np.arange(1, top + 1, dtype=np.int64)[:, None]
    exact = u * r[None, :]
    s = np.floor(exact * (1.0 + INTEGER_RTOL))
    ok = ((s >= 1) & ((exact - s) < tolerance * exact)).all(axis=1)
    if not ok.any():
        raise ValueError(f"integer_speeds: no unit up to {max_unit} rounds {dict(ratios)!r} "
                         f"within {tolerance:g}")
    n = int(np.argmax(ok))
    return int(u[n, 0]), {name: int(v) for name, v in zip(names, s[n].tolist())}


def cpu_mode_worker(worker: Mapping[str, float]) -> dict[str, float]:
    """A worker's demand in CPU mode: no GPU, at least ``CPU_WORKER_VCPUS`` vCPUs, the rest
    (memory, storage, bandwidth) unchanged."""
    out = {r: float(v) for r, v in worker.items()}
    out["gpu"] = 0.0
    out["cpu"] = max(float(worker.get("cpu", 0.0)), float(CPU_WORKER_VCPUS))
    return out
