"""Model sizes, tensor layouts and per-iteration compute times of common training jobs.

Inputs of the placement-aware cost model (``costmodel.placement``): S, the bytes of gradients a
worker pushes (= parameters it pulls) per iteration, and the compute time of one iteration on
the reference accelerator.

Sources (see ``reference/cluster-scheduler.md`` section 3.4):

* ``TIRESIAS_TENSORS_MB`` [source]: the tensor tables (MB, large tensors only) of the Tiresias
  simulator, ``SymbioticLab/Tiresias`` ``simulator/models.py`` (Apache-2.0; Gu et al., NSDI'19).
  Totals reproduce the reference's table (vgg19 547.1 MB, resnet50 80.6 MB ...).
* ``compute_s`` of the Tiresias models [source, derived]: the seconds per iteration of the
  1-GPU jobs of the Tiresias example trace (``60_job.csv``: duration / iterations; identical
  for every 1-GPU job of a model). One GPU has no network cost, so this is compute only.
  ``googlenet`` has no tensor table: Tiresias itself falls back to ``inception3`` for unknown
  models, and so do we (its compute time is its own).
* The Pollux applications [choice, approximate]: size = parameter count x 4 bytes (fp32) of the
  network each application trains in the Pollux study (cifar10: ResNet-18, ncf: NeuMF,
  deepspeech2: DeepSpeech2, bert: BERT-base fine-tuning, yolov3: YOLOv3, imagenet: ResNet-50,
  for which we take the Tiresias resnet50 entry); compute times are rough per-iteration figures
  of the same order as the Tiresias ones. They only set the compute/communication balance of
  trace jobs; nothing here is a measurement.
"""
from __future__ import annotations

from dataclasses import dataclass

# Tiresias simulator, models.py: m_tensors (MB), in the order of m_names.
TIRESIAS_TENSORS_MB: dict[str, tuple[float, ...]] = {
    "vgg19": (1.1, 2.3, 2.3, 2.3, 4.5, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 392.0, 64.0, 15.6),
    "vgg16": (1.1, 2.3, 2.3, 4.5, 9.0, 9.0, 9.0, 9.0, 9.0, 392.0, 64.0, 15.6),
    "vgg11": (1.1, 2.3, 4.5, 9.0, 9.0, 9.0, 392.0, 64.0, 15.6),
    "alexnet": (1.2, 2.5, 5.1, 3.4, 144.0, 64.0, 15.6),
    "resnet152": (2.0,) + (2.3,) * 36 + (8.0, 2.0, 9.0, 4.0, 4.0, 9.0, 4.0, 4.0, 9.0, 4.0, 7.8),
    "resnet101": (2.0,) + (2.3,) * 23 + (8.0, 2.0, 9.0, 4.0, 4.0, 9.0, 4.0, 4.0, 9.0, 4.0, 7.8),
    "resnet50": (2.0,) + (2.3,) * 6 + (8.0, 2.0, 9.0, 4.0, 4.0, 9.0, 4.0, 4.0, 9.0, 4.0, 7.8),
    "inception4": (1.3, 5.1, 1.5, 2.0, 1.5, 1.1, 1.5, 1.1, 1.3, 1.5, 1.5, 1.1, 1.5, 1.1, 1.3,
                   1.5, 1.5, 1.1, 1.5, 1.1, 1.3, 1.5, 1.5, 1.1, 1.5, 1.1, 1.3, 1.5, 1.5, 1.1,
                   1.5, 1.1, 1.3, 1.5, 1.5, 1.1, 1.5, 1.1, 1.3, 1.5, 1.5, 1.1, 1.5, 1.1, 1.3,
                   1.5, 1.3, 1.8, 2.2, 3.5, 1.5, 1.5, 2.3, 1.1, 1.1, 2.3, 2.0, 2.6, 1.5, 1.5,
                   1.5, 1.5, 2.3, 1.1, 1.1, 2.3, 2.0, 2.6, 1.5, 1.5, 1.5, 1.5, 2.3, 1.1, 1.1,
                   2.3, 2.0, 2.6, 1.5, 1.5, 5.9),
    "inception3": (3.8, 2.1, 1.3, 1.6, 1.9, 1.7, 1.7, 2.2, 5.9, 1.7, 1.7, 2.5, 3.0, 1.7, 1.7, 3.5,
                   5.9, 1.7, 1.7, 1.5, 7.8),
}


@dataclass(frozen=True)
class ModelSpec:
    """One trainable model: ``size_mb`` = S (gradient = parameter bytes per iteration, MB),
    ``tensors_mb`` its tensors where known (PS shard imbalance), ``compute_s`` the compute time of
    one iteration on the reference accelerator (speed 1.0 in ``GPU_SPEED``), ``source`` a tag."""

    name: str
    size_mb: float
    compute_s: float
    tensors_mb: tuple[float, ...] = ()
    source: str = "choice"

    @property
    def largest_fraction(self) -> float:
        """Largest tensor / total: the skew that drives PS load imbalance (reference 3.4)."""
        return max(self.tensors_mb) / self.size_mb if self.tensors_mb else 0.0


def _tiresias(name: str, compute_s: float, tensors: str | None = None) -> ModelSpec:
    t = TIRESIAS_TENSORS_MB[tensors or name]
    return ModelSpec(name, round(sum(t), 1), compute_s, t, "source: Tiresias models.py, 60_job.csv")


# compute_s of the Tiresias models: 60_job.csv duration / iterations of its 1-GPU jobs.
MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    _tiresias("vgg19", 0.271),
    _tiresias("vgg16", 0.236),
    _tiresias("vgg11", 0.156),
    _tiresias("alexnet", 0.054),
    _tiresias("resnet152", 0.371),
    _tiresias("resnet101", 0.260),
    _tiresias("resnet50", 0.153),
    _tiresias("inception4", 0.478),
    _tiresias("inception3", 0.232),
    _tiresias("googlenet", 0.140, tensors="inception3"),
    # Pollux applications [choice]: parameters x 4 bytes, rough compute per iteration
    ModelSpec("cifar10", 44.7, 0.06),        # ResNet-18, 11.2 M parameters
    ModelSpec("ncf", 20.0, 0.03),            # NeuMF embeddings on MovieLens, ~5 M parameters
    ModelSpec("deepspeech2", 150.0, 0.35),   # DeepSpeech2, ~38 M parameters
    ModelSpec("bert", 440.0, 0.40),          # BERT-base, 110 M parameters
    ModelSpec("yolov3", 248.0, 0.45),        # YOLOv3, 62 M parameters
    ModelSpec("imagenet", 80.6, 0.153, TIRESIAS_TENSORS_MB["resnet50"], "choice: = resnet50"),
)}

DEFAULT_MODEL = "resnet50"  # a job that names no model and records no gradient size [choice]

# Relative training speed of one accelerator by server kind [choice]: roughly the ratio of fp32
# ResNet-50 training throughputs, with the P100 (the Philly trace's GPUs) as the reference 1.0.
# Kinds not listed (the paper's EC2 catalogue, whose tau_i is the same on every worker, p.3)
# run at 1.0, so the paper's workloads keep the paper's compute time. This coarse per-kind table
# is the placement-aware cost model's; jobs' per-type speeds on clusters with accelerator types
# come from ``costmodel.accelerators`` (by model family).
GPU_SPEED: dict[str, float] = {
    "P100": 1.0,
    "P40": 1.0,
    "V100": 1.6,
    "V100M32": 1.6,
    "T4": 0.55,
    "MISC": 0.7,  # PAI's "MISC": unnamed older GPUs
    "K80": 0.35,
    "M60": 0.4,
}


def get_model(name: str) -> ModelSpec:
    """The ``MODELS`` entry ``name``; ValueError listing the known ones otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})") from None


def pollux_model_for_gpu_hours(gpu_hours: float, coin: float) -> str:
    """Pollux's assignment of a model class to a Philly job by its GPU-time (traces README):
    < 1 GPU-h cifar10 or ncf, 1-10 deepspeech2 or bert, 10-100 yolov3, >= 100 imagenet.
    ``coin`` in [0, 1) picks within a pair (seeded by the caller)."""
    if gpu_hours < 1:
        return "cifar10" if coin < 0.5 else "ncf"
    if gpu_hours < 10:
        return "deepspeech2" if coin < 0.5 else "bert"
    if gpu_hours < 100:
        return "yolov3"
    return "imagenet"
