"""Plain reference implementation of the dual subroutine (Alg. 2), written for reading.

The DP table over (slot, remaining work), the tie rule, the scan over completion slots and the
backtrack are explicit Python loops with no pruning and no vectorisation; the fast backends are
tested against this one. It shares with them the job's data (``JobSpec``), the per-slot cost
curves C_t(k) (``_dp.slot_costs``: one function builds them for every backend, so all minimise
over the same floats) and the placement of the chosen plan (``_dp.make_plan``). The cost curves
and the DP are pinned independently by a brute-force test that enumerates every placement and
every split of the work over slots (``tests/test_online_dual.py``). Use it on small instances
only: it is O(T * target * N) Python operations after the curves.

Both granularities run the same DP over k = 0..N_i workers per slot doing delta(k) units of work
(worker-slots, or in chunk granularity the most chunks k workers train, floor(k / x_i): Alg. 2's
loop over d chunks at cost COST_t(ceil(d x_i)) reaches the same optimum, see ``dual``). With
accelerator types the DP's options are the job's per-slot choices of ``_dp.JobTypes`` (k workers
on one type, or P units from a mix of types), each doing delta units of work.
"""
from __future__ import annotations

import math

from ._dp import CompletionScan, JobSpec, Plan, range_costs, scan_result, tie_costs

INF = math.inf


def best_schedule_reference(spec: JobSpec, wprice, pprice, wfree, pfree,
                            lower_bound: float = 0.0) -> Plan:
    a, T, target = spec.arrival, spec.horizon, spec.target
    delta = [int(d) for d in spec.delta]
    C = range_costs(spec, a, T + 1, wprice, pprice, wfree, pfree)
    C, tie = C.tolist(), tie_costs(C).tolist()
    # F[D]: cheapest cost (up to the tie rule) of >= D units within slots a..t; choice[s][D]:
    # the k chosen in slot a + s for D units still to do
    F = [0.0] + [INF] * target
    choice = []
    scan = CompletionScan(spec, lower_bound, prune=False)
    for s, t in enumerate(range(a, T + 1)):
        new, chosen = [], []
        for D in range(target + 1):
            best, k = INF, 0
            for j in range(spec.options):  # strict <: the smallest option among equal ties
                v = tie[s][j] + F[max(0, D - delta[j])]
                if v < best:
                    best, k = v, j
            new.append(C[s][k] + F[max(0, D - delta[k])])
            chosen.append(k)
        F = new
        choice.append(chosen)
        scan.update(t, F[target])
    return scan_result(spec, scan, choice, wprice, pprice, wfree, pfree)
