# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A tour of the `oasis_opt` API
#
# Generate a problem instance, solve it with several scheduling policies, check every schedule
# with the validator, compare the metrics the paper reports, and plot the schedules. Finally run
# a small experiment with the runner, the way `oasis-opt reproduce` does.

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import oasis_opt
from oasis_opt import available_policies, get_policy, validate
from oasis_opt.model.io import load_result, save_result
from oasis_opt.sim import summarize
from oasis_opt.workloads import paper_sim

print("oasis_opt", oasis_opt.__version__)

# %% [markdown]
# ## An instance
# `paper_sim` draws the paper's simulation setting (section 10 of the reference) at any size:
# worker servers with GPUs, PS servers, jobs with the CORA sigmoid utility of their duration.
# An `Instance` is immutable and array-backed.

# %%
inst = paper_sim(seed=7, jobs=30, horizon=60, worker_servers=6, ps_servers=6)
print(f"T = {inst.horizon} slots, H = {inst.H} worker servers, K = {inst.K} PS servers, "
      f"I = {inst.I} jobs, resources {inst.resources}")
print("worker-server capacities (first 3):\n", inst.worker_capacity[:3])
for i in range(5):
    j = inst.jobs[i]
    print(f"{j.id}: class {j.job_class:16s} arrives {j.arrival:2d}, N_i = {j.chunks:3d}, "
          f"work = {inst.work[i]:5d} worker-slots, d_min = {inst.min_duration[i]:2d}, "
          f"gamma = ({j.utility.priority:.0f}, {j.utility.decay:.2f}, {j.utility.target:.1f})")

# %% [markdown]
# ## Solving with several policies
# Policies are looked up by name in a registry; every one returns the same `Schedule`, and every
# schedule must pass `validate` (constraints (2)-(10) of the paper plus the utility accounting).

# %%
print("\n".join(f"{k:15s} {v}" for k, v in available_policies().items()))

# %%
names = ["oasis", "fifo", "drf", "rrh", "greedy"]
schedules = {}
for name in names:
    sched = get_policy(name).solve(inst)
    report = validate(inst, sched)
    assert report.ok, report
    schedules[name] = sched

rows = [summarize(inst, s) for s in schedules.values()]
print(f"{'policy':8s} {'utility':>9s} {'admitted':>8s} {'completed':>9s} {'unfinished':>10s}")
for m in rows:
    print(f"{m['policy']:8s} {m['total_utility']:9.1f} {m['admitted']:8d} {m['completed']:9d} "
          f"{m['unfinished']:10d}")

# %% [markdown]
# ## Plots: total utility, and workers in use per slot

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.5))
ax[0].bar(names, [schedules[n].total_utility for n in names], color="tab:blue")
ax[0].set(ylabel="total utility", title="total utility by policy")
for n in names:
    w = schedules[n].allocations.workers_per_job_slot(inst.I, inst.horizon).sum(axis=0)
    ax[1].plot(np.arange(inst.horizon + 1), w, label=n, lw=1)
ax[1].set(xlabel="slot", ylabel="workers running", title="cluster load over time")
ax[1].legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# One schedule in detail: which job runs how many workers in which slot (OASiS).

# %%
grid = schedules["oasis"].allocations.workers_per_job_slot(inst.I, inst.horizon)
fig, ax = plt.subplots(figsize=(10, 4))
im = ax.imshow(grid[:, 1:], aspect="auto", cmap="viridis", interpolation="nearest",
               extent=(0.5, inst.horizon + 0.5, inst.I - 0.5, -0.5))
ax.scatter(inst.arrival, np.arange(inst.I), marker="|", color="red", label="arrival")
ax.set(xlabel="slot", ylabel="job", title="OASiS: workers per job and slot")
ax.legend(loc="lower right", fontsize=8)
fig.colorbar(im, ax=ax, label="workers")
fig.tight_layout()

# %% [markdown]
# ## Results on disk
# Results are JSON (`oasis-opt/result@1`); reading one back gives the same schedule.

# %%
tmp = Path(tempfile.mkdtemp())
save_result(inst, schedules["drf"], tmp / "drf.json")
again = load_result(inst, tmp / "drf.json")
assert again.total_utility == schedules["drf"].total_utility and validate(inst, again).ok
print("round trip ok:", (tmp / "drf.json").stat().st_size, "bytes")

# %% [markdown]
# ## A small experiment with the runner
# A run is (instance recipe, policy, metrics); its key is a hash of that spec. `run_sweep`
# stores one JSON per key and skips runs already stored, so re-running costs nothing. Here in
# this process (`workers=1`); with `workers=N` the runs go to a local Ray.

# %%
from oasis_opt.experiments.runner import run_sweep
from oasis_opt.experiments.spec import RunSpec

specs = [RunSpec("paper_sim", {"seed": s, "jobs": 20, "horizon": 40, "worker_servers": 4,
                               "ps_servers": 4}, p, tags={"seed": s})
         for s in range(3) for p in ("oasis", "drf")]
first = run_sweep(specs, tmp / "results", workers=1, progress=False)
second = run_sweep(specs, tmp / "results", workers=1, progress=False)
print(f"first sweep computed {len(first.computed)}, second computed {len(second.computed)} "
      f"and reused {len(second.skipped)}")
for p in ("oasis", "drf"):
    u = [first.record(s)["metrics"]["total_utility"] for s in specs if s.policy == p]
    print(f"{p:6s} utility over seeds: {np.round(u, 1)}")
