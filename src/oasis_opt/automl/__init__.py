"""AutoML: real training tasks and their learning curves.

- ``tasks``: training tasks by name (``digits-mlp``, ``digits-cnn``, ``breast-cancer-mlp``,
  ``wine-mlp``) in JAX + optax, as pure functions a trainer or a parameter-server executor uses:
  seeded data splits and chunks, ``init``, ``loss_and_grad``, the optimiser step, ``evaluate``,
  flat parameter vectors and their shards.
- ``space``: the hyperparameter search spaces (sampling, strict checking).
- ``train``: ``train_trial(task, config, epochs, seed) -> Curve``.
- ``study``: random-search studies written to (and extended in) a curves CSV.
- ``curves``: the ``Curve`` record and the curves CSV's strict reader and canonical writer;
  ``shipped_curves()`` names the curve sets shipped in ``oasis_opt/data/curves``.

Only this subpackage imports jax, optax and scikit-learn, and only ``tasks``/``train``/``study``
do: ``curves``, ``space`` and ``shards`` are light, so replaying curves needs no JAX.
"""
