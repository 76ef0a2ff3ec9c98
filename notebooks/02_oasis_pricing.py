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
# # OASiS's pricing, step by step
#
# OASiS (Bao et al., INFOCOM 2018, Alg. 1) decides each job once, on arrival. Every server,
# resource and *slot* has a price that grows exponentially with the amount already committed
# there (eq. 22):
#
# $$P_h^r(g) = L_1 \left(\frac{U_1^r}{L_1}\right)^{g / c_h^r}$$
#
# The dual subroutine (Alg. 2) finds the job's schedule of largest **payoff** = utility
# $f_i(\hat t_i - a_i)$ minus the cost of its resources at the current prices; the job is
# admitted iff that payoff is positive, and then its whole plan is reserved and the prices of
# every (slot, server, resource) it uses go up. This notebook walks through that on a small
# instance.

# %%
import matplotlib.pyplot as plt
import numpy as np

from oasis_opt import validate
from oasis_opt.online.dual import Market, best_schedule
from oasis_opt.online.oasis import OasisPolicy
from oasis_opt.online.pricing import oracle_pricing
from oasis_opt.sim import ClusterState
from oasis_opt.workloads import paper_sim

# Time-insensitive jobs only (constant utility gamma1 / 2): with time-critical sigmoids in the
# mix, L becomes astronomically small (see the last section) and prices stay near 0 until a
# server is almost full, which makes for a dull picture.
inst = paper_sim(seed=5, jobs=30, horizon=60, worker_servers=4, ps_servers=4,
                 class_mix=(1.0, 0.0, 0.0))
print(f"T = {inst.horizon}, {inst.H} worker + {inst.K} PS servers, {inst.I} jobs")

# %% [markdown]
# ## The constants U and L (eqs. 23-26)
# U is the largest utility per unit of a resource any job can earn (per resource, per pool);
# L the smallest utility per unit of resource and time, scaled down by 4 eta. Here they are the
# "oracle" values computed from the whole job list (choice A6), the 100% case of Fig. 6.

# %%
pricing = oracle_pricing(inst)
print(f"L1 (worker pool) = {pricing.L_worker:.3e}, L2 (PS pool) = {pricing.L_ps:.3e}")
for r, u1, u2 in zip(inst.resources, pricing.U_worker, pricing.U_ps):
    print(f"  {r:8s} U1 = {u1:10.4g}   U2 = {u2:10.4g}")
print(f"alpha = {pricing.alpha:.1f}: OASiS is {pricing.competitive_bound:.0f}-competitive "
      "(Theorem 4)")

# %% [markdown]
# ## Price curves
# The price of one unit of resource r on a server, as a function of the committed fraction
# g / c: L at an empty server, U at a full one, exponential in between (a straight line on a
# log scale).

# %%
frac = np.linspace(0, 1, 101)
fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
for n, r in enumerate(inst.resources):
    cap = inst.worker_capacity[0]
    g = frac[:, None] * cap[None, :]
    ax[0].plot(frac, pricing.worker_prices(g, cap)[:, n], label=r)
    capp = inst.ps_capacity[0]
    gp = frac[:, None] * capp[None, :]
    ax[1].plot(frac, pricing.ps_prices(gp, capp)[:, n], label=r)
for a, title in zip(ax, ("worker server 0: P(g)", "PS server 0: Q(v)")):
    a.set(yscale="log", xlabel="committed fraction g / c", ylabel="price per unit", title=title)
    a.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## Deciding the jobs one by one
# We drive the policy's own hooks by hand, job by job in arrival order (exactly what the
# simulator does), and record the payoff of each decision, the committed share of the worker
# GPUs and the mean GPU price over the remaining slots.

# %%
policy = OasisPolicy()
state = ClusterState(inst)
policy.start(inst, state)
gpu = inst.resources.index("gpu")
gpu_cap = inst.worker_capacity[:, gpu].sum() * inst.horizon
log, seen_by_job = [], {}
for job in range(inst.I):
    a = int(inst.arrival[job])
    # the prices and free capacity this job sees, kept for the dual subroutine below
    seen_by_job[job] = {k: getattr(policy, k).copy() for k in ("worker_price", "ps_price",
                                                               "worker_free", "ps_free")}
    admitted = policy.on_arrival(job, a, state)
    log.append({"job": job, "arrival": a, "admitted": admitted, "payoff": policy.payoff[job],
                "gpu_committed": policy.worker_used[1:, :, gpu].sum() / gpu_cap,
                "gpu_price": float(policy.worker_price[a:, :, gpu].mean())})
adm = np.array([e["admitted"] for e in log])
empty = seen_by_job[0]  # prices and capacity of the empty cluster
too_big = [e["job"] for e in log
           if not best_schedule(inst, e["job"], Market(*empty.values())).feasible]
no_room = [e["job"] for e in log if e["payoff"] is None and e["job"] not in too_big]
priced_out = [e["job"] for e in log if e["payoff"] is not None and not e["admitted"]]
print(f"admitted {adm.sum()} of {inst.I} jobs")
print(f"  rejected, cannot finish by T even alone on the empty cluster: {too_big}")
print(f"  rejected, the capacity it needs is reserved by earlier plans: {no_room}")
print(f"  rejected for its payoff (utility <= cost at the current prices): {priced_out}")

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
pay = np.array([e["payoff"] if e["payoff"] is not None else np.nan for e in log])
ax[0].bar(np.arange(inst.I), np.where(np.isfinite(pay), pay, 0),
          color=np.where(adm, "tab:green", "tab:red"))
ax[0].axhline(0, color="black", lw=0.6)
ax[0].set(xlabel="job (arrival order)", ylabel="best payoff",
          title="payoff at decision time (green: admitted)")
ax[1].plot([e["gpu_committed"] for e in log], marker=".", label="GPU-slots committed (share)")
ax[1].set(xlabel="jobs decided", ylabel="share of all worker GPU-slots")
tw = ax[1].twinx()
tw.plot([e["gpu_price"] for e in log], color="tab:orange", marker=".", label="mean GPU price")
tw.set(yscale="log", ylabel="mean GPU price from arrival on")
ax[1].set_title("commitments and prices rise as jobs are admitted")
fig.legend(loc="lower right", fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## One job's dual subroutine
# We study a job rejected for its payoff if there is one, else the admitted job whose plan cost
# the largest share of its utility. At the prices it saw on arrival: the best schedule (workers per slot),
# its utility, cost and payoff. Then the trade-off behind it: restricting the job to finish by
# slot t (free capacity set to 0 after t), the best payoff achievable as t grows. Finishing
# earlier earns more utility but needs more workers per slot on pricier servers.

# %%
def share(e):
    p = best_schedule(inst, e["job"], Market(*seen_by_job[e["job"]].values()))
    return p.cost / max(p.utility, 1e-300)


watch = priced_out[0] if priced_out else max((e for e in log if e["admitted"]), key=share)["job"]
seen = seen_by_job[watch]
plan = best_schedule(inst, watch, Market(seen["worker_price"], seen["ps_price"],
                                        seen["worker_free"], seen["ps_free"]))
job = inst.jobs[watch]
print(f"job {job.id}: arrives {job.arrival}, work {inst.work[watch]} worker-slots, "
      f"N_i = {job.chunks}, target gamma3 = {job.utility.target:.1f}")
print(f"best plan: completes in slot {plan.completion}, utility {plan.utility:.3f}, "
      f"cost {plan.cost:.3g}, payoff {plan.payoff:.3f} -> "
      f"{'admit' if plan.payoff > 0 else 'reject'}")
assert (plan.payoff > 0) == log[watch]["admitted"]

by_slot = []
for t in range(job.arrival, inst.horizon + 1):
    wf, pf = seen["worker_free"].copy(), seen["ps_free"].copy()
    wf[t + 1:], pf[t + 1:] = 0.0, 0.0
    p = best_schedule(inst, watch, Market(seen["worker_price"], seen["ps_price"], wf, pf))
    by_slot.append(p.payoff if p.feasible else np.nan)

fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
slots = np.arange(inst.horizon + 1)
ax[0].bar(slots, plan.workers, color="tab:blue", label="workers")
# what the plan pays in each slot: count x (prices . demand), workers and PSs
cost = np.zeros(inst.horizon + 1)
for _, t, server, role, count in plan.rows.tolist():
    if role == 0:
        cost[t] += count * seen["worker_price"][t, server] @ inst.worker_demand[watch]
    else:
        cost[t] += count * seen["ps_price"][t, server - inst.H] @ inst.ps_demand[watch]
assert np.isclose(cost.sum(), plan.cost)
tw = ax[0].twinx()
tw.plot(slots[cost > 0], cost[cost > 0], color="tab:orange", marker=".", label="cost")
tw.set(yscale="log", ylabel="cost of the slot's containers")
ax[0].set(xlabel="slot", ylabel="workers", title=f"best plan of {job.id}: workers (bars), cost")
ts = np.arange(job.arrival, inst.horizon + 1)
ax[1].plot(ts, by_slot, marker=".", label="best payoff finishing by t")
ax[1].plot(ts, [job.utility(t - job.arrival) for t in ts], ls="--", label="utility f(t - a)")
ax[1].axvline(plan.completion, color="grey", ls=":", label="chosen completion")
ax[1].set(xlabel="completion slot t", ylabel="value", title="utility vs payoff")
ax[1].legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## The same decisions through the simulator
# `policy.solve` runs the slot loop; its schedule has the same admissions as our hand-driven
# loop, and it validates.

# %%
sched = OasisPolicy().solve(inst)
assert validate(inst, sched).ok
assert list(sched.admitted) == [bool(x) for x in adm]
print(f"total utility {sched.total_utility:.1f}, completed {int(sched.completed.sum())} jobs")

# %% [markdown]
# ## How small L gets with the paper's class mix
# Eq. (25) takes the minimum of f_i(T - a_i), the utility of finishing in the last slot. For a
# time-critical sigmoid (decay 4-6) that is about gamma1 exp(-5 (T - a - gamma3)): tiny. With
# the default 10/55/35% class mix, L (and so every price below about 90% utilisation) is
# effectively 0, and OASiS's admission test "payoff > 0" passes for almost any feasible plan,
# even one that completes so late its utility is ~0.

# %%
for mix in ((1.0, 0.0, 0.0), (0.10, 0.55, 0.35)):
    p = oracle_pricing(paper_sim(seed=5, jobs=30, horizon=60, worker_servers=4, ps_servers=4,
                                 class_mix=mix))
    print(f"class mix {mix}: L1 = {p.L_worker:.1e}, alpha = {p.alpha:.0f}")

# %% [markdown]
# ## Estimating U and L from past instances
# The paper runs OASiS on U and L "estimated from past experience". `estimate_pricing` takes
# past instances of the workload (here three other seeds, never the instance we evaluate on),
# computes U by eqs. (23)-(24) over their jobs, and picks the floor L (L1 = L2) of a grid at
# which OASiS earns the most on that history. Its result is the pricing document itself (pass it
# as `pricing=`), with the calibration table as `.calibration`. We then price OASiS with it on the instance above,
# this time with the paper's class mix, and compare with the oracle constants.

# %%
from oasis_opt.online.estimate import estimate_pricing

params = dict(jobs=30, horizon=60, worker_servers=4, ps_servers=4)
history = [paper_sim(seed=s, **params) for s in (1000, 1001, 1002)]
pricing = estimate_pricing(history)
calibration = pricing.calibration
target = paper_sim(seed=5, **params)
estimated = OasisPolicy(pricing=pricing).solve(target)
oracle = OasisPolicy().solve(target)
assert validate(target, estimated).ok and validate(target, oracle).ok
print(f"chosen L = {calibration.chosen:.1e}; total utility on seed 5: estimated "
      f"{estimated.total_utility:.1f}, oracle {oracle.total_utility:.1f}")

fig, ax = plt.subplots(figsize=(6, 3.4))
ax.plot(calibration.grid, calibration.mean, marker="o", label="mean utility on the history")
ax.axvline(calibration.chosen, color="grey", ls=":", label="chosen L")
ax.set(xscale="log", xlabel="floor price L", ylabel="OASiS total utility",
       title="calibrating L on past instances")
ax.legend(fontsize=8)
fig.tight_layout()
