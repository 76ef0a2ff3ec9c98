"""Training tasks by name: real data shipped with scikit-learn, models in JAX + optax.

| task | data | model |
|---|---|---|
| ``digits-mlp`` | scikit-learn digits, 1,797 8x8 images, 10 classes, pixels / 16 | MLP |
| ``digits-cnn`` | the same images as 8x8x1 | CNN |
| ``breast-cancer-mlp`` | Wisconsin breast cancer, 569 x 30, 2 classes, standardised | MLP |
| ``wine-mlp`` | wine, 178 x 13 features, 3 classes, standardised | MLP |
| ``digits-linear`` | the digits as in ``digits-mlp`` | softmax regression (no hidden layer) |

Everything a trainer or a parameter-server (PS) executor needs is a pure function::

    task = get_task("digits-mlp")
    data = task.split(seed)                      # train/val/test, stratified 60/20/20
    x, y = data.chunk(k, n)                      # k-th of n contiguous data chunks of the train set
    model = task.model(config)                   # config checked against task.space
    params = model.init(seed)                    # pytree: [{"w", "b"}, ...] per layer
    loss, grads = model.loss_and_grad(params, x, y)     # mean cross-entropy over the batch
    state = model.optimizer.init(params)
    params, state = model.optimizer.step(grads, state, params)
    accuracy, loss = model.evaluate(params, data.x_val, data.y_val)

**Parameter servers.** ``flat, unflatten = ravel(params)`` gives one float32 vector (layers in
order, ``w`` before ``b``); PS k of P holds ``flat[b[k]:b[k+1]]`` with ``b = shard_bounds(flat.size,
P)`` and its own ``model.optimizer.init(shard)``. Every optimiser of the search space (SGD,
momentum, Adam with L2, AdamW) acts element by element, so stepping each shard with its slice of
the gradient is exactly the whole-vector step, and the whole-vector step is the pytree step.
``split_state`` / ``join_states`` cut and rejoin an optimiser state when the number of PSs changes.
Workers holding unequal batches combine with ``mean_gradients(grads, counts)`` (the weighted
mean, i.e. the gradient of the mean loss over the union of their batches).

**Models.** MLP: ``depth`` hidden ReLU layers of ``width`` units, then a linear layer to the
classes (``digits-linear``: depth 0 and width 0, the linear layer alone: multinomial logistic
regression). CNN: ``depth`` 3x3 'SAME' convolutions of ``width`` channels with ReLU, a 2x2 average
pool, then a linear layer. Weights He-normal (LeCun-normal for the output layer), biases zero.

The jitted kernels are module-level functions whose static argument is the (hashable)
architecture or optimiser name, so a process compiles each shape once, whatever the number of
trials or tasks it runs. float32; no x64 needed.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .._extras import require

FEATURE = "AutoML training (oasis_opt.automl)"
for _module in ("jax", "optax"):  # without the automl extra: one line naming it
    require(_module, extra="automl", feature=FEATURE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

from .shards import shard_bounds  # noqa: E402
from .space import OPTIMIZERS, Choice, LogUniform, SearchSpace  # noqa: E402

Params = Any  # a pytree of float32 arrays
SPLIT = (0.6, 0.2, 0.2)  # train / validation / test shares, stratified by class


# ---- data ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Features (float64, unscaled, flat) and labels of a dataset shipped with scikit-learn."""
    datasets = require("sklearn.datasets", extra="automl", feature=FEATURE)
    loader = {"digits": datasets.load_digits, "breast-cancer": datasets.load_breast_cancer,
              "wine": datasets.load_wine}[name]
    x, y = loader(return_X_y=True)
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


@dataclass(frozen=True)
class Split:
    """A task's data, split by seed. ``x_*`` float32 of the task's input shape, ``y_*`` int32."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def chunk_bounds(self, chunks: int) -> np.ndarray:
        """Offsets of ``chunks`` contiguous data chunks covering the train set exactly
        (``shard_bounds``: sizes differ by at most one)."""
        return shard_bounds(len(self.y_train), chunks)

    def chunk(self, k: int, chunks: int) -> tuple[np.ndarray, np.ndarray]:
        """The k-th (0-based) of ``chunks`` data chunks of the train set: ``(x, y)``."""
        if not 0 <= k < chunks:
            raise ValueError(f"k: expected 0 <= k < {chunks}, got {k}")
        b = self.chunk_bounds(chunks)
        return self.x_train[b[k]:b[k + 1]], self.y_train[b[k]:b[k + 1]]


# ---- models -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Architecture:
    """Static (hashable) description of a network: the jit cache key."""

    kind: str  # "mlp" | "cnn"
    input_shape: tuple[int, ...]
    classes: int
    width: int
    depth: int

    def layer_shapes(self) -> list[tuple[tuple[int, ...], int]]:
        """(weight shape, fan-in) per layer; the bias has the weight's last dimension."""
        if self.kind == "mlp":
            dims = [int(np.prod(self.input_shape))] + [self.width] * self.depth + [self.classes]
            return [((a, b), a) for a, b in zip(dims[:-1], dims[1:])]
        height, width, channels = self.input_shape
        inputs = [channels] + [self.width] * (self.depth - 1)
        convs = [((3, 3, c, self.width), 9 * c) for c in inputs]
        flat = (height // 2) * (width // 2) * self.width
        return convs + [((flat, self.classes), flat)]


def init_params(arch: Architecture, seed: int) -> Params:
    """He-normal weights (LeCun-normal for the output layer), zero biases; one key per layer."""
    shapes = arch.layer_shapes()
    keys = jax.random.split(jax.random.PRNGKey(seed), len(shapes))
    params = []
    for n, (key, (shape, fan_in)) in enumerate(zip(keys, shapes)):
        gain = 1.0 if n == len(shapes) - 1 else 2.0
        w = jax.random.normal(key, shape, jnp.float32) * np.float32(np.sqrt(gain / fan_in))
        params.append({"w": w, "b": jnp.zeros(shape[-1], jnp.float32)})
    return params


def _logits(arch: Architecture, params: Params, x: jax.Array) -> jax.Array:
    if arch.kind == "mlp":
        h = x.reshape(x.shape[0], -1)
        for layer in params[:-1]:
            h = jax.nn.relu(h @ layer["w"] + layer["b"])
    else:
        h = x
        for layer in params[:-1]:
            h = jax.lax.conv_general_dilated(h, layer["w"], (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            h = jax.nn.relu(h + layer["b"])
        b, height, width, c = h.shape
        h = h.reshape(b, height // 2, 2, width // 2, 2, c).mean(axis=(2, 4)).reshape(b, -1)
    return h @ params[-1]["w"] + params[-1]["b"]


def _loss(arch: Architecture, params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy over the batch."""
    return optax.softmax_cross_entropy_with_integer_labels(_logits(arch, params, x), y).mean()


@functools.partial(jax.jit, static_argnums=0)
def loss_and_grad(arch: Architecture, params: Params, x, y) -> tuple[jax.Array, Params]:
    """(mean loss, its gradient) on the batch ``(x, y)``."""
    return jax.value_and_grad(_loss, argnums=1)(arch, params, x, y)


@functools.partial(jax.jit, static_argnums=0)
def evaluate(arch: Architecture, params: Params, x, y) -> tuple[jax.Array, jax.Array]:
    """(accuracy, mean cross-entropy) on ``(x, y)``."""
    logits = _logits(arch, params, x)
    accuracy = jnp.mean(jnp.argmax(logits, axis=-1) == y)
    return accuracy, optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


@functools.partial(jax.jit, static_argnums=0)
def classes(arch: Architecture, params: Params, x) -> jax.Array:
    """The predicted class of each row of ``x`` (the argmax of the logits)."""
    return jnp.argmax(_logits(arch, params, x), axis=-1)


# ---- optimisers ---------------------------------------------------------------------------------
def _sgd(learning_rate, weight_decay):
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate))


def _momentum(learning_rate, weight_decay):
    return optax.chain(optax.add_decayed_weights(weight_decay),
                       optax.sgd(learning_rate, momentum=0.9))


def _adam(learning_rate, weight_decay):  # L2 penalty: the decay term goes through Adam's scaling
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(learning_rate))


def _adamw(learning_rate, weight_decay):  # decoupled weight decay (Loshchilov & Hutter)
    return optax.adamw(learning_rate, weight_decay=weight_decay)


# inject_hyperparams keeps learning_rate and weight_decay in the optimiser state as arrays: one
# compiled step serves every value of them, and a shard's state carries its own copy.
_TRANSFORMS: dict[str, Callable[..., optax.GradientTransformation]] = {
    name: optax.inject_hyperparams(f) for name, f in
    zip(OPTIMIZERS, (_sgd, _momentum, _adam, _adamw))}


def _optimizer_init(name: str, learning_rate, weight_decay, params):
    return _TRANSFORMS[name](learning_rate=learning_rate, weight_decay=weight_decay).init(params)


def _optimizer_step(name: str, grads, state, params):
    # the hyperparameters are read from ``state``; the values given here are placeholders
    updates, state = _TRANSFORMS[name](learning_rate=0.0, weight_decay=0.0).update(
        grads, state, params)
    return optax.apply_updates(params, updates), state


optimizer_init = jax.jit(_optimizer_init, static_argnums=0)
optimizer_step = jax.jit(_optimizer_step, static_argnums=0)


@dataclass(frozen=True)
class Optimizer:
    """An optax optimiser of the search space with its learning rate and weight decay."""

    name: str
    learning_rate: float
    weight_decay: float

    def init(self, params: Params):
        """Optimiser state for ``params`` (a pytree, or a flat shard of one)."""
        return optimizer_init(self.name, np.float32(self.learning_rate),
                              np.float32(self.weight_decay), params)

    def step(self, grads: Params, state, params: Params) -> tuple[Params, Any]:
        """One update: ``(new params, new state)``; ``grads`` has ``params``' structure."""
        return optimizer_step(self.name, grads, state, params)


@functools.partial(jax.jit, static_argnums=(0, 1))
def train_step(arch: Architecture, optimizer: str, params: Params, state, x, y):
    """``loss_and_grad`` on the batch then the optimiser step, fused: ``(params, state, loss)``."""
    # Trainers loop over batches in Python: on jax 0.10.2's CPU backend a lax.scan over these
    # steps was no faster for the MLPs and far slower for the CNN (convolutions in a loop body).
    loss, grads = jax.value_and_grad(_loss, argnums=1)(arch, params, x, y)
    params, state = _optimizer_step(optimizer, grads, state, params)
    return params, state, loss


def mean_gradients(grads: list[Params], counts: list[int]) -> Params:
    """Weighted mean of per-worker gradients of mean losses over batches of ``counts`` examples:
    the gradient of the mean loss over the union of the batches."""
    if len(grads) != len(counts) or not grads:
        raise ValueError(f"counts: expected {len(grads)} counts (one per gradient), "
                         f"got {len(counts)}")
    total = float(sum(counts))
    return jax.tree.map(lambda *g: sum(c / total * gi for c, gi in zip(counts, g)), *grads)


def split_state(state, bounds) -> list:
    """The optimiser state of a whole flat vector cut into the states of its shards
    ``[bounds[k], bounds[k+1])``: vector leaves (moments) are sliced, scalar leaves (step count,
    hyperparameters) copied. With ``join_states`` a PS group can change its number of shards
    mid-training (checkpoint, re-shard) without resetting the optimiser."""
    return [jax.tree.map(lambda leaf: leaf[lo:hi] if jnp.ndim(leaf) == 1 else leaf, state)
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def join_states(states: list):
    """The inverse of ``split_state``: vector leaves concatenated in shard order, scalar leaves
    taken from the first shard (they are equal in every shard: all shards take every step)."""
    return jax.tree.map(lambda *leaves: jnp.concatenate(leaves) if jnp.ndim(leaves[0]) == 1
                        else leaves[0], *states)


def ravel(params: Params) -> tuple[jax.Array, Callable[[jax.Array], Params]]:
    """``(flat float32 vector, unflatten)``: layers in order, ``w`` before ``b`` in each."""
    return ravel_pytree(params)


# ---- tasks --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskModel:
    """A task's network and optimiser for one checked configuration."""

    task: "Task"
    config: Mapping[str, Any]
    arch: Architecture
    optimizer: Optimizer

    def init(self, seed: int) -> Params:
        return init_params(self.arch, seed)

    def loss_and_grad(self, params: Params, x, y) -> tuple[jax.Array, Params]:
        return loss_and_grad(self.arch, params, x, y)

    def evaluate(self, params: Params, x, y) -> tuple[jax.Array, jax.Array]:
        return evaluate(self.arch, params, x, y)

    def classes(self, params: Params, x) -> jax.Array:
        return classes(self.arch, params, x)

    def train_step(self, params: Params, state, x, y) -> tuple[Params, Any, jax.Array]:
        return train_step(self.arch, self.optimizer.name, params, state, x, y)


@dataclass(frozen=True)
class Task:
    """A named training task: a dataset shipped with scikit-learn, a model kind, a search space."""

    name: str
    description: str
    dataset: str
    kind: str
    input_shape: tuple[int, ...]
    classes: int
    space: SearchSpace

    def split_indices(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Indices into the dataset of the train, validation and test examples of
        ``split(seed)``: stratified 60/20/20, disjoint, covering the dataset."""
        from sklearn.model_selection import train_test_split

        _, y = _dataset(self.dataset)
        rest, test = train_test_split(np.arange(len(y)), test_size=SPLIT[2], stratify=y,
                                      random_state=seed)
        train, val = train_test_split(rest, test_size=SPLIT[1] / (SPLIT[0] + SPLIT[1]),
                                      stratify=y[rest], random_state=seed)
        return train, val, test

    def scaling(self, x_train: np.ndarray) -> tuple[Any, Any]:
        """``(mean, scale)`` of the features, from the raw train features only (digits: 0 and
        16, the pixels' range; tabular: per-feature mean and standard deviation)."""
        if self.dataset == "digits":
            return 0.0, 16.0
        scale = x_train.std(axis=0)
        return x_train.mean(axis=0), np.where(scale > 0, scale, 1.0)

    def prepare(self, x: np.ndarray, mean: Any, scale: Any) -> np.ndarray:
        """Raw features (n rows of the dataset's flat features) as the model's input:
        ``(x - mean) / scale`` in float32, shaped ``(n, *input_shape)``, read-only."""
        out = ((np.asarray(x, dtype=np.float64).reshape(len(x), -1) - mean) / scale)
        out = out.astype(np.float32).reshape((-1, *self.input_shape))
        out.setflags(write=False)
        return out

    def raw(self) -> tuple[np.ndarray, np.ndarray]:
        """The dataset's raw features (flat, unscaled) and labels, read-only."""
        return _dataset(self.dataset)

    def split(self, seed: int = 0) -> Split:
        """Stratified train/val/test split (60/20/20) by ``seed`` (``split_indices``); features
        scaled with train statistics only (``scaling``, ``prepare``)."""
        x, y = _dataset(self.dataset)
        parts = self.split_indices(seed)
        mean, scale = self.scaling(x[parts[0]])

        def labels(a: np.ndarray) -> np.ndarray:
            out = a.astype(np.int32)
            out.setflags(write=False)
            return out

        train, val, test = ((self.prepare(x[idx], mean, scale), labels(y[idx])) for idx in parts)
        return Split(*train, *val, *test)

    def model(self, config: Mapping[str, Any]) -> TaskModel:
        """The network and optimiser of ``config``; ``ValueError("config.<name>: ...")`` when
        ``config`` is not a point of ``self.space``."""
        config = self.space.check(config)
        arch = Architecture(self.kind, self.input_shape, self.classes, config["width"],
                            config["depth"])
        optimizer = Optimizer(config["optimizer"], config["learning_rate"],
                              config["weight_decay"])
        return TaskModel(self, config, arch, optimizer)


_MLP_SPACE = SearchSpace(learning_rate=LogUniform(1e-4, 0.3), weight_decay=LogUniform(1e-6, 1e-2),
                         width=Choice((16, 32, 64, 128, 256)), depth=Choice((1, 2, 3)),
                         batch_size=Choice((16, 32, 64, 128)))
_CNN_SPACE = SearchSpace(learning_rate=LogUniform(1e-4, 0.3), weight_decay=LogUniform(1e-6, 1e-2),
                         width=Choice((8, 16, 32)), depth=Choice((1, 2, 3)),
                         batch_size=Choice((16, 32, 64, 128)))
_TABULAR_SPACE = SearchSpace(learning_rate=LogUniform(1e-4, 0.3),
                             weight_decay=LogUniform(1e-6, 1e-2),
                             width=Choice((8, 16, 32, 64, 128)), depth=Choice((1, 2, 3)),
                             batch_size=Choice((8, 16, 32, 64)))
_LINEAR_SPACE = SearchSpace(learning_rate=LogUniform(1e-4, 0.3),
                            weight_decay=LogUniform(1e-6, 1e-2), width=Choice((0,)),
                            depth=Choice((0,)), batch_size=Choice((16, 32, 64, 128)))

TASKS: dict[str, Task] = {t.name: t for t in (
    Task("digits-mlp", "MLP on scikit-learn's 8x8 digits (10 classes)", "digits", "mlp", (64,),
         10, _MLP_SPACE),
    Task("digits-cnn", "small CNN on scikit-learn's 8x8 digits (10 classes)", "digits", "cnn",
         (8, 8, 1), 10, _CNN_SPACE),
    Task("breast-cancer-mlp", "MLP on the Wisconsin breast-cancer table (30 features, 2 classes)",
         "breast-cancer", "mlp", (30,), 2, _TABULAR_SPACE),
    Task("wine-mlp", "MLP on the wine table (13 features, 3 classes)", "wine", "mlp", (13,), 3,
         _TABULAR_SPACE),
    Task("digits-linear", "softmax regression (no hidden layer) on scikit-learn's 8x8 digits "
         "(10 classes)", "digits", "mlp", (64,), 10, _LINEAR_SPACE),
)}


def get_task(name: str) -> Task:
    """The registered task ``name``; ``ValueError("task: ...")`` naming the known ones."""
    if name not in TASKS:
        raise ValueError(f"task: unknown task {name!r} (known: {', '.join(TASKS)})")
    return TASKS[name]
