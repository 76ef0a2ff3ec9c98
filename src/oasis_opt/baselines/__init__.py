"""The OASiS paper's baselines and two modern peers, as simulator policies (``OnlinePolicy``).

Registered in ``oasis_opt.policies`` by name; each module's docstring lists its documented
choices (reference A8):

* ``fifo`` (:mod:`.fifo`): fixed k_i ~ U{1..30} workers, strict head-of-line order;
* ``drf`` (:mod:`.drf`): progressive filling of dominant shares at every arrival/completion;
* ``rrh`` (:mod:`.rrh`): risk-reward admission and pause/keep decisions, fixed k_i;
* ``dorm`` (:mod:`.dorm`): utilisation MILP with fairness and M_adj adjustment limits;
* ``tiresias`` (:mod:`.tiresias`): discretised 2D-LAS priority queues;
* ``optimus`` (:mod:`.optimus`): greedy marginal gain of workers per unit of resource.

Shared pieces (fixed worker draws, pooled dominant shares, progressive filling, the
event-driven base class that holds containers between events) are in :mod:`.common`.
Every policy takes ``seed`` and ``placement`` (a name in ``oasis_opt.sim.placement.PLACEMENTS``).
"""
