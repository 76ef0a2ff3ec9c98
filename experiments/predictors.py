"""Regenerate paper_figs/predictors.{md,png,pdf}: MAE / RMSE of the utilisation predictors on the
real Helios series (10-minute and 1-hour horizons).

    .venv/bin/python experiments/predictors.py
"""
from oasis_opt.experiments.predictors import main

if __name__ == "__main__":
    raise SystemExit(main())
