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
- ``predict``: final accuracy and remaining time from a partial curve (last value, parametric
  families and their ensemble, regression on completed trials); ``classify``: poor /
  uncertain / promising, expected improvement, water-filling; ``evaluate``: their quality
  without leakage.
- ``replay``: a study replayed on recorded curves under a ``Controller``; ``controllers``: the
  registry by name (``automl-thesis`` in ``thesis``, the Optuna pruners and ASHA in
  ``pruners``, ``no-stop``); ``cluster``: the study's trials as jobs of the simulator.

Only ``tasks``/``train``/``study`` import jax and optax; ``predict`` loads scikit-learn and
scipy, ``pruners`` Optuna, when they are used: replaying curves needs no JAX.
"""
