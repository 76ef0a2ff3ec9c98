"""AutoML: early stopping on learning curves (the tasks and curves are ``oasis_opt.training``).

- ``predict``: final accuracy and remaining time from a partial curve (last value, parametric
  families and their ensemble, regression on completed trials); ``classify``: poor /
  uncertain / promising, expected improvement, water-filling; ``evaluate``: their quality
  without leakage.
- ``replay``: a study replayed on recorded curves under a ``Controller``; ``controllers``: the
  registry by name (``automl-thesis`` in ``thesis``, the Optuna pruners and ASHA in
  ``pruners``, ``no-stop``); ``cluster``: the study's trials as jobs of the simulator.

``predict`` loads scikit-learn and scipy, ``pruners`` Optuna, when they are used: replaying
curves needs no JAX.
"""
