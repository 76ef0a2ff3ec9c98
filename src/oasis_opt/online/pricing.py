"""OASiS resource prices: the exponential price functions (22) and their constants (23)-(26).

Prices are per server, resource and slot (Alg. 1). With ``g`` the amount of resource r already
committed on server h in slot t (capacity c), eq. (22) sets

    P_h^r(g) = L1 (U1^r / L1)^(g / c),          Q_k^r(v) = L2 (U2^r / L2)^(v / c)

so a server starts at the floor price L and reaches U when full. Constants (A5/A6 of the
reference, ``W_i`` = ``instance.work[i]`` = ceil(E_i N_i x_i) whole worker-slots):

    U1^r = max_{i: w_i^r > 0} f_i(dmin_i - 1) / w_i^r                                  (23)
    U2^r = max_{i: s_i^r > 0} f_i(dmin_i - 1) / s_i^r                                  (24)
    L1   = 1/(4 eta1) min_i f_i(T - a_i) / (W_i sum_r w_i^r)                          (25)
    L2   = 1/(4 eta2) min_i f_i(T - a_i) / (W_i sum_r s_i^r)                          (26)
    eta1 = max(1, max_i T sum_h sum_r c_h^r / (W_i sum_r w_i^r))    (smallest allowed eta)

``dmin_i - 1`` is the shortest achievable duration t_hat - a_i (A5: a job running only in its
arrival slot has duration 0; the paper's printed ``ceil(E M x) - a_i`` is a typo).

Choices the paper leaves open (reference section 15.6 and A6), applied by ``oracle_pricing``:

* **Zero demand in U.** f/w_i^r is infinite when w_i^r = 0, so the max in (23)/(24) runs over
  jobs that demand r only. A resource no job demands on that pool is *unpriced*: its U is
  ``nan``, its price stays at L forever (it multiplies a zero demand in every cost, so its value
  never matters) and it is left out of alpha.
* **Underflow guard in L.** f_i(T - a_i) of a time-critical sigmoid underflows to exactly 0.0 in
  float64 for an early job on a long horizon (e.g. 100 / (1 + e^{6 (299 - 15)})), which would make
  L = 0 and the price function 0 * inf. Such jobs, and jobs with no work (W_i = 0), are left out
  of the min in (25)/(26) and of the max in eta (a job with W_i = 0 consumes nothing); their ids
  are listed in ``excluded_from_L``. Appendix A's "empty cluster admits everything" then holds for
  every job whose f(T - a) > 0; an excluded job is still admitted on an empty cluster whenever its
  best-schedule utility exceeds its cost at the floor prices. If *every* job is excluded, L is
  undefined and ``oracle_pricing`` raises ``ValueError`` (give an explicit pricing file).
* **Tiny L.** The remaining f(T - a) can still be as small as 1e-300, so L is kept in log space:
  prices are computed as ``exp(log L + (g/c) log(U/L))``, which never overflows; a floor price
  below the float range is then exactly 0.0, a harmless limit.
* **Estimation error (Fig. 6).** ``u_scale = kappa`` multiplies every U; L is unchanged (A6).

``alpha = max_r(1, ln(U1^r/L1), ln(U2^r/L2))`` over priced resources; OASiS is 2 alpha-competitive
(Theorem 4, assuming each container is small relative to its server, A12).

**Accelerator types** (``model.instance``: worker servers of types g, job i does s_ig work units
per worker-slot on g with demand w_ig, W_i units in all). The dual subroutine then prices work
(``dual``), and the payoff of a plan is still (27), f_i(t_hat - a_i) minus the price of the
resources its workers (each with its type's demand) and PSs hold. The constants become, per type:

    U1_g^r = max_{i: s_ig > 0, w_ig^r > 0} f_i(dmin_i - 1) / w_ig^r                      (23')
    L1     = 1/(4 eta1) min_i f_i(T - a_i) / V_i,   V_i = min_{g: s_ig > 0} ceil(W_i / s_ig) sum_r w_ig^r
    eta1   = max(1, max_i T sum_h sum_r c_h^r / V_i)                                  (25')

with dmin_i = ceil(W_i / (N_i max_g s_ig)) (``Instance.min_duration``). A worker on a type-g
server whose resource r is priced at U1_g^r costs at least f_i(dmin_i - 1), the most any plan of
a job that can use g earns, so, as in (23), no job ever overfills a server; V_i is the resource
use of the job's leanest single-type schedule, so an empty cluster still admits every job whose
f(T - a) > 0 (its plan on that type costs at most L1 V_i < f_i(T - a_i)). Servers of type g
price resource r with eq. (22) and U1_g^r; U2, L2 and the PS pool are unchanged (PSs have no
type). ``alpha = max(1, max_{g,r} ln(U1_g^r / L1), max_r ln(U2^r / L2))`` and the 2 alpha bound
is Theorem 4's, its argument run per server with that server's constants (A12 as before).
``U_worker`` is then the max over types (what the file format and alpha read) and
``U_worker_types`` (G, R) the per-type table; a pricing file gives one U per resource, for
every type.

An explicit pricing file (``"format": "oasis-opt/pricing@1"``)::

    {"format": "oasis-opt/pricing@1",
     "U_worker": {"gpu": 25.0, "cpu": 10.0, ...}, "U_ps": {"cpu": 10.0, ...},
     "L_worker": 1e-4, "L_ps": 1e-4}

Every value must be a finite number > 0 and every U at least its pool's L (the price rises from
L on an empty server to U on a full one); a resource some job demands on that pool must have a
U; a resource nobody demands may be omitted (it is then unpriced as above).

**Per-resource floors.** ``L_worker`` / ``L_ps`` may also be an object ``{resource: L^r}`` with
exactly the resources of that pool's U: the floor of eq. (22) is then L^r per unit of resource
r. This is what a floor set on capacity-normalised demands becomes in raw units (L^r = L / c^r,
see ``online.plugin``); a single number is the paper's one floor per pool. Readers of files with
a single number are unaffected.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..model import Instance
from ..model.io import FormatError

PRICING_FORMAT = "oasis-opt/pricing@1"
_FIELDS = ("format", "U_worker", "U_ps", "L_worker", "L_ps")


@dataclass(frozen=True)
class Pricing:
    """The constants of eq. (22) for one instance.

    ``U_worker`` / ``U_ps``: shape (R,), U1^r / U2^r in the instance's resource order (``nan`` =
    unpriced resource, see the module docstring). ``log_L_worker`` / ``log_L_ps``: ln L1, ln L2
    (kept as logs so that a floor price below the float range stays exact): one number per
    pool, or shape (R,) for per-resource floors (an unpriced resource's entry is never used).
    ``eta_*`` are None for an explicit pricing file.
    """

    resources: tuple[str, ...]
    U_worker: np.ndarray
    U_ps: np.ndarray
    log_L_worker: float | np.ndarray
    log_L_ps: float | np.ndarray
    source: str = "oracle"
    u_scale: float = 1.0
    eta_worker: float | None = None
    eta_ps: float | None = None
    excluded_from_L: tuple[str, ...] = field(default=())
    U_worker_types: np.ndarray | None = None  # (G, R): U1_g^r with accelerator types
    server_type: np.ndarray | None = None  # (H,): each worker server's type index
    type_names: tuple[str, ...] = ()

    # ---- derived constants ---------------------------------------------------------------
    @property
    def L_worker(self) -> float | np.ndarray:
        return np.exp(self.log_L_worker) if np.ndim(self.log_L_worker) else \
            math.exp(self.log_L_worker)

    @property
    def L_ps(self) -> float | np.ndarray:
        return np.exp(self.log_L_ps) if np.ndim(self.log_L_ps) else math.exp(self.log_L_ps)

    @property
    def alpha(self) -> float:
        """alpha = max_r (1, ln(U1^r / L1^r), ln(U2^r / L2^r)) over priced resources (Theorem 4;
        L^r = L when the pool has one floor)."""
        logs = [1.0]
        for U, log_L in ((self.U_worker, self.log_L_worker), (self.U_ps, self.log_L_ps)):
            priced = ~np.isnan(U)
            logs.extend((np.log(U[priced]) - np.broadcast_to(log_L, U.shape)[priced]).tolist())
        return float(max(logs))

    @property
    def competitive_bound(self) -> float:
        """2 alpha: OPT / OASiS <= 2 alpha (Theorem 4)."""
        return 2.0 * self.alpha

    def scaled(self, u_scale: float) -> "Pricing":
        """The same pricing with every U multiplied by ``u_scale`` (Fig. 6; L unchanged)."""
        if not (math.isfinite(u_scale) and u_scale > 0):
            raise ValueError(f"u_scale: must be a finite number > 0, got {u_scale!r}")
        return replace(self, U_worker=self.U_worker * u_scale, U_ps=self.U_ps * u_scale,
                       u_scale=self.u_scale * u_scale,
                       U_worker_types=(None if self.U_worker_types is None
                                       else self.U_worker_types * u_scale))

    # ---- eq. (22) ----------------------------------------------------------------------------
    def worker_prices(self, committed: np.ndarray, capacity: np.ndarray,
                      servers: np.ndarray | None = None) -> np.ndarray:
        """p_h^r = P_h^r(g): ``committed`` (..., H, R) g, ``capacity`` (H, R) c; ``servers``:
        the worker servers of the H axis when not all of them (their types pick U1_g)."""
        U, (ratio, _, by_type) = self.U_worker, self._log_ratios
        if by_type is not None and self.U_worker_types is not None \
                and self.server_type is not None:
            types = self.server_type if servers is None else self.server_type[servers]
            U, ratio = self.U_worker_types[types], by_type[types]
        return price_function(committed, capacity, self.log_L_worker, U, ratio)

    def ps_prices(self, committed: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """q_k^r = Q_k^r(v): ``committed`` (..., K, R), ``capacity`` (K, R)."""
        return price_function(committed, capacity, self.log_L_ps, self.U_ps, self._log_ratios[1])

    @cached_property
    def _log_ratios(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """ln(U/L) of the worker pool, the PS pool and, with types, per type (G, R): computed
        once, elementwise, so indexing them gives the floats ``price_function`` would compute."""
        types = (None if self.U_worker_types is None
                 else price_log_ratio(self.U_worker_types, self.log_L_worker))
        return (price_log_ratio(self.U_worker, self.log_L_worker),
                price_log_ratio(self.U_ps, self.log_L_ps), types)

    # ---- reporting -----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The pricing file document (``oasis-opt/pricing@1``); unpriced resources are omitted."""
        def amounts(U: np.ndarray) -> dict[str, float]:
            return {r: float(u) for r, u in zip(self.resources, U) if not np.isnan(u)}

        def floor(L: float | np.ndarray, U: np.ndarray) -> float | dict[str, float]:
            return amounts(np.where(np.isnan(U), np.nan, L)) if np.ndim(L) else float(L)

        return {"format": PRICING_FORMAT, "U_worker": amounts(self.U_worker),
                "U_ps": amounts(self.U_ps), "L_worker": floor(self.L_worker, self.U_worker),
                "L_ps": floor(self.L_ps, self.U_ps)}

    def stats(self) -> dict:
        """Everything a result should report: constants, alpha, the 2 alpha bound, provenance."""
        d = self.to_dict()
        del d["format"]
        d.update(source=self.source, u_scale=self.u_scale,
                 log_L_worker=np.asarray(self.log_L_worker).tolist(),
                 log_L_ps=np.asarray(self.log_L_ps).tolist(), eta_worker=self.eta_worker, eta_ps=self.eta_ps,
                 unpriced_worker=[r for r, u in zip(self.resources, self.U_worker) if np.isnan(u)],
                 unpriced_ps=[r for r, u in zip(self.resources, self.U_ps) if np.isnan(u)],
                 excluded_from_L=list(self.excluded_from_L), alpha=self.alpha,
                 competitive_bound=self.competitive_bound)
        if self.U_worker_types is not None:
            d["U_worker_types"] = {
                str(t): {r: float(u) for r, u in zip(self.resources, U) if not np.isnan(u)}
                for t, U in zip(self.type_names, self.U_worker_types)}
        return d


def price_function(committed: np.ndarray, capacity: np.ndarray, log_L: float | np.ndarray,
                   U: np.ndarray, log_ratio: np.ndarray | None = None) -> np.ndarray:
    """Eq. (22): L (U/L)^(g/c) = exp(ln L + (g/c) ln(U/L)), elementwise over (..., S, R);
    ``log_L`` is one floor or one per resource, shape (R,); ``log_ratio``: ``log_ratio(U,
    log_L)`` when the caller keeps it (the same floats).

    Where c = 0 (the server has none of r) or r is unpriced (U = nan) the price is L: nothing can
    be committed there, or nothing demands it.
    """
    cap = np.asarray(capacity, dtype=float)
    frac = np.divide(committed, cap, out=np.zeros(np.broadcast_shapes(np.shape(committed),
                                                                       cap.shape)),
                     where=cap > 0)
    if log_ratio is None:
        log_ratio = price_log_ratio(U, log_L)
    return np.exp(log_L + frac * log_ratio)


def price_log_ratio(U: np.ndarray, log_L: float | np.ndarray) -> np.ndarray:
    """ln(U / L) of eq. (22), elementwise, as ``ln U - ln L``; 0 where r is unpriced (U = nan)."""
    return np.where(np.isnan(U), 0.0, np.log(np.where(np.isnan(U), 1.0, U)) - log_L)


# ---- the oracle (A6: the "100%" case, computed from the whole job trace) -------------------------
def best_case_utility(instance: Instance) -> np.ndarray:
    """f_i(dmin_i - 1): utility of the fastest possible schedule (A5), shape (I,)."""
    d = np.maximum(instance.min_duration - 1, 0)
    return np.array([float(j.utility(int(di))) for j, di in zip(instance.jobs, d)])


def worst_case_utility(instance: Instance) -> np.ndarray:
    """f_i(T - a_i): utility of finishing in the last slot, shape (I,)."""
    return instance.utility_table[np.arange(instance.I), instance.horizon].astype(float)


def oracle_u(instance: Instance) -> tuple[np.ndarray, np.ndarray]:
    """U1^r, U2^r of eqs. (23)-(24), shape (R,) each; ``nan`` where no job demands r on that
    pool (unpriced). Needs no L, so it is defined even where ``oracle_pricing`` is not. With
    accelerator types U1^r is the max over types of U1_g^r (23')."""
    best = best_case_utility(instance)

    def one(demand: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(demand > 0, best[:, None] / demand, -np.inf)  # (I, R)
        U = ratio.max(axis=0)
        return np.where(np.isfinite(U), U, np.nan)

    if instance.typed:  # (23'): the max over types of U1_g^r
        Ut = oracle_u_types(instance)
        Uw = np.where(np.isnan(Ut).all(axis=0), np.nan,
                      np.where(np.isnan(Ut), -np.inf, Ut).max(axis=0))
        return Uw, one(instance.ps_demand)
    return one(instance.worker_demand), one(instance.ps_demand)


def oracle_u_types(instance: Instance) -> np.ndarray:
    """U1_g^r of eq. (23') (module docstring), shape (G, R); ``nan`` where no job that can use
    type g demands r there."""
    best = best_case_utility(instance)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((instance.type_demand > 0) & instance.usable[:, :, None],
                         best[:, None, None] / instance.type_demand, -np.inf)  # (I, G, R)
    U = ratio.max(axis=0) if instance.I else np.full(instance.type_demand.shape[1:], -np.inf)
    return np.where(np.isfinite(U), U, np.nan)


def leanest_use(instance: Instance) -> np.ndarray:
    """V_i = min over the types job i can use of ceil(W_i / s_ig) sum_r w_ig^r, shape (I,)."""
    slots = -(-instance.work[:, None] // np.maximum(instance.type_speed, 1))  # (I, G)
    use = np.where(instance.usable, slots * instance.type_demand.sum(axis=2), np.inf)
    return use.min(axis=1).astype(float)


def oracle_pricing(instance: Instance, u_scale: float = 1.0) -> Pricing:
    """U, L and eta from the whole instance (eqs. 23-26 with the choices of A5/A6)."""
    if instance.I == 0:
        raise ValueError("pricing: an instance without jobs has no oracle pricing")
    worst = worst_case_utility(instance)
    work = instance.work.astype(float)
    T = instance.horizon
    ids = [j.id for j in instance.jobs]
    # jobs kept in L and eta: some work, and f(T - a) that did not underflow to 0
    keep = (work > 0) & (worst > 0)
    if not keep.any():
        raise ValueError("pricing: every job has f(T - a) = 0 (underflow) or no work, so L1/L2 "
                         "(eqs. 25-26) are undefined; give an explicit pricing file")
    excluded = tuple(i for i, k in zip(ids, keep) if not k)

    def floor(demand: np.ndarray, capacity: np.ndarray, per_job: np.ndarray | None = None
              ) -> tuple[float, float]:
        if per_job is None:
            per_job = work * demand.sum(axis=1)  # W_i sum_r w_i^r
        eta = max(1.0, float(np.max(T * capacity.sum() / per_job[keep])))
        log_L = float(np.min(np.log(worst[keep]) - np.log(per_job[keep]))) - math.log(4 * eta)
        return log_L, eta

    Uw, Up = oracle_u(instance)
    typed: dict[str, Any] = {}
    if instance.typed:  # (23'), (25'): U per type, V_i the leanest single-type use
        typed = {"U_worker_types": oracle_u_types(instance), "server_type": instance.worker_type,
                 "type_names": tuple(str(t) for t in instance.types)}
        logLw, etaw = floor(instance.worker_demand, instance.worker_capacity,
                            leanest_use(instance))
    else:
        logLw, etaw = floor(instance.worker_demand, instance.worker_capacity)
    logLp, etap = floor(instance.ps_demand, instance.ps_capacity)
    pricing = Pricing(tuple(instance.resources), Uw, Up, logLw, logLp, "oracle", 1.0, etaw, etap,
                      excluded, **typed)
    return pricing.scaled(u_scale) if u_scale != 1.0 else pricing


# ---- the pricing file ---------------------------------------------------------------------------
def _positive(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FormatError(path, f"expected a number, got {json.dumps(v)[:40]}")
    if not math.isfinite(v) or v <= 0:
        raise FormatError(path, f"must be a finite number > 0, got {v}")
    return float(v)


def parse_pricing(doc: Any) -> dict:
    """Check a pricing document's structure (no instance needed); return its plain values.

    Raises ``FormatError`` naming the field (``format``, ``U_worker.gpu``, ``L_ps`` ...).
    """
    if not isinstance(doc, dict):
        raise FormatError("", "a pricing document must be a JSON object")
    fmt = doc.get("format")
    if fmt != PRICING_FORMAT:
        raise FormatError("format", f"expected {PRICING_FORMAT!r}, got {fmt!r}")
    extra = sorted(set(doc) - set(_FIELDS))
    if extra:
        raise FormatError(extra[0], f"unknown field (known: {', '.join(_FIELDS)})")
    out: dict[str, Any] = {}
    for key in ("U_worker", "U_ps"):
        if key not in doc:
            raise FormatError(key, "missing field")
        amounts = doc[key]
        if not isinstance(amounts, dict):
            raise FormatError(key, "expected an object {resource: value}")
        out[key] = {str(r): _positive(v, f"{key}.{r}") for r, v in amounts.items()}
    for pool in ("worker", "ps"):
        key, ukey = f"L_{pool}", f"U_{pool}"
        if key not in doc:
            raise FormatError(key, "missing field")
        if isinstance(doc[key], dict):  # per-resource floors: exactly the priced resources
            floors = {str(r): _positive(v, f"{key}.{r}") for r, v in doc[key].items()}
            for r in sorted(set(floors) ^ set(out[ukey])):
                raise FormatError(f"{key}.{r}", f"{'no' if r in floors else 'missing:'} "
                                  f"{ukey}.{r}; a per-resource floor names exactly the "
                                  f"resources of {ukey}")
            out[key] = floors
        else:
            out[key] = _positive(doc[key], key)
        for r, u in out[ukey].items():
            floor = out[key][r] if isinstance(out[key], dict) else out[key]
            path = f"{key}.{r}" if isinstance(out[key], dict) else key
            if u < floor:
                raise FormatError(path, f"{floor:g} exceeds {ukey}.{r} = {u:g}; the "
                                  "price must rise from L (empty server) to U (full), so L <= U")
    return out


def read_pricing_file(path: str | Path) -> dict:
    """Read and structurally check a pricing file; ``FormatError`` on bad JSON or fields."""
    try:
        doc = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise FormatError("", f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except OSError as e:
        raise FormatError("", f"{path}: cannot read ({e.strerror})") from None
    return parse_pricing(doc)


def pricing_from_values(values: Mapping[str, Any], instance: Instance, source: str) -> Pricing:
    """Bind checked pricing values to an instance: resource names, and a U for every demanded one."""
    R = instance.resources
    arrays = {}
    # what workers demand: on every type a job can use, with types
    wdem = instance.type_demand[instance.usable] if instance.typed else instance.worker_demand
    for key, demand in (("U_worker", wdem), ("U_ps", instance.ps_demand)):
        given = values[key]
        for r in given:
            if r not in R:
                raise FormatError(f"{key}.{r}", f"unknown resource (known: {', '.join(R)})")
        U = np.array([given.get(r, np.nan) for r in R], dtype=float)
        for n, r in enumerate(R):
            if np.isnan(U[n]) and (demand[:, n] > 0).any():
                first = int(np.flatnonzero(demand[:, n] > 0)[0])
                if key == "U_worker" and instance.typed:
                    first = int(np.nonzero(instance.usable)[0][first])
                job = instance.jobs[first].id
                raise FormatError(f"{key}.{r}", f"missing: job {job!r} demands {r!r} on this pool")
        arrays[key] = U

    def log_floor(L: float | Mapping[str, float]) -> float | np.ndarray:
        if not isinstance(L, Mapping):
            return math.log(L)
        # an unpriced resource multiplies zero demand in every cost: its floor is never used
        return np.array([math.log(L[r]) if r in L else 0.0 for r in R])

    return Pricing(tuple(R), arrays["U_worker"], arrays["U_ps"], log_floor(values["L_worker"]),
                   log_floor(values["L_ps"]), source)


def resolve_pricing(spec: Any, instance: Instance, u_scale: float = 1.0) -> Pricing:
    """``spec``: "oracle", a ``Pricing``, a path to a pricing file, or a pricing document (dict)."""
    if isinstance(spec, Pricing):
        if tuple(spec.resources) != tuple(instance.resources):
            raise ValueError(f"pricing: resources {spec.resources} do not match the instance's "
                             f"{tuple(instance.resources)}")
        pricing = spec
    elif spec == "oracle":
        return oracle_pricing(instance, u_scale)
    elif isinstance(spec, dict):
        pricing = pricing_from_values(parse_pricing(spec), instance, "dict")
    elif isinstance(spec, (str, Path)):
        pricing = pricing_from_values(read_pricing_file(spec), instance, f"file:{spec}")
    else:
        raise ValueError(f"pricing: expected 'oracle', a file path or a dict, got {spec!r}")
    return pricing.scaled(u_scale) if u_scale != 1.0 else pricing


def save_pricing(pricing: Pricing | Mapping[str, Any], path: str | Path) -> None:
    """Write ``pricing`` as an ``oasis-opt/pricing@1`` file: a ``Pricing`` (e.g. the oracle, for
    Fig. 6 runs) or a pricing document (e.g. ``estimate_pricing``'s), checked as a file is read.

    Raises ``ValueError`` when L underflows float64 (ln L < -745): the file format holds L
    itself, which would read back as 0.
    """
    from ..model.io import write_json_atomic

    if not isinstance(pricing, Pricing):
        write_json_atomic(path, {"format": PRICING_FORMAT, **parse_pricing(dict(pricing))})
        return
    for name in ("L_worker", "L_ps"):
        if np.any(np.asarray(getattr(pricing, name)) <= 0):
            log_L = float(np.min(getattr(pricing, "log_" + name)))
            raise ValueError(f"{name}: exp({log_L:.1f}) underflows "
                             "float64 and cannot be written to a pricing file")
    write_json_atomic(path, pricing.to_dict())
