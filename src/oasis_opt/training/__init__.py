"""Training: real training tasks, their runs, and the learning curves they record.

- ``tasks``: training tasks by name (``digits-mlp``, ``digits-cnn``, ``breast-cancer-mlp``,
  ``wine-mlp``) in JAX + optax, as pure functions a trainer or a parameter-server executor uses:
  seeded data splits and chunks, ``init``, ``loss_and_grad``, the optimiser step, ``evaluate``,
  flat parameter vectors and their shards (``shards``: the shard bounds).
- ``space``: the hyperparameter search spaces (sampling, strict checking).
- ``train``: ``train_trial(task, config, epochs, seed) -> Curve``.
- ``study``: random-search studies written to (and extended in) a curves CSV; the trial
  configurations and weight seeds of a study (``trial_config``, ``trial_seed``).
- ``curves``: the ``Curve`` record and the curves CSV's strict reader and canonical writer;
  ``shipped_curves()`` names the curve sets shipped in ``oasis_opt/data/curves``.
- ``export``: a trained model's weights as a file, and its predictions.

The executor (``runtime``), the service and the case study train through this package;
``automl`` (early stopping on learning curves) reads its curves. Only ``tasks``/``train``/
``study`` import jax and optax (the ``automl`` extra), and only when they are imported.
"""
