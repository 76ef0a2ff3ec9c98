"""Sorted server lists per slot, so that the dual reads a few servers of a slot instead of all.

At cluster scale most of a decision went into reading every server of every slot the
completion scan reaches: unit prices, fit counts and a partition over thousands of servers, per
slot and pool, only to keep the N_i cheapest containers (``benchmarks/results/speed.md``,
section oasis_scale).
A ``ServerIndex`` keeps, for one pool and every slot a commit has touched, each resource's
servers sorted by price (ascending) and by free capacity (descending) as of the slot's last
sort, and the servers changed since ("dirty"). Untouched slots share one sort of the initial
state. For a job with per-container demand w it reads, per slot, the first m servers of the
lists of the resources w demands plus the dirty servers (the candidates), with their current
prices and free capacity, and accepts the result only when one of two certificates holds:

* **threshold** (Fagin's threshold algorithm): a server that is not dirty and not among the
  first m of any price list has price^r >= key_r[m] (the m-th sorted price) for every demanded
  r, so its unit price is >= tau = sum_r w^r key_r[m], summed as ``unit_prices`` sums (float
  sums and products of non-negative numbers are monotone, so this holds for the computed
  floats). If the n-th cheapest candidate container costs <= tau, the n cheapest containers of
  the slot are candidates (ties at tau are equal floats). Placement (``place``) also needs no
  non-candidate to tie at tau with a lower index than the last server it fills: its docstring
  gives the two-part certificate (idle servers share one price, so ties at tau are the rule).
* **capacity**: if for some demanded r the m-th largest free capacity is too small for one
  container (``fit_count``'s own test, monotone in the free amount), no non-candidate server
  fits the job: the candidates hold every usable server. In the near future of a busy cluster
  this is the common case, and often no candidate fits at all (``marginals`` then reads their
  free capacity only).

Otherwise the cost curves read m fourfold, up to every server, and placement leaves the slot to
its caller (who reads every server). So the costs and placements are the floats and rows the
every-server reading gives (tests hold the two against each other); only the amount read
changes. Once a slot has ``dirty_limit`` dirty servers its lists are re-sorted: the dirty
servers, sorted by their current data, are merged into the others' unchanged order.

The owner keeps the arrays and must report every change (``changed``); slots before the
earliest slot it will query again can be released (``forget_before``) to bound memory.
"""
from __future__ import annotations

import numpy as np

from ..model.numerics import (FIT_EPS, fit_count, fit_count_columns, unit_prices,
                              unit_prices_columns)

FIRST_DEPTH = 64  # default servers read per list in a query's first round (at least n)


class ServerIndex:
    """Sorted server lists of one pool (``price``, ``free``: the owner's (T+1, H, R) arrays stored
    resource-major, read at query time, not copied; every slot must hold the same data when the
    index is built). ``dirty_limit``: changed servers a slot collects before it is re-sorted;
    ``depth``: servers read per list in a query's first round. Both change speed only.
    ``touched`` (T+1,) bool, for an index built mid-run (``OasisPolicy``'s copies): slots whose
    data may differ from the others', sorted afresh when first read or changed; the untouched
    slots must then hold the same data."""

    def __init__(self, price: np.ndarray, free: np.ndarray, dirty_limit: int = 32,
                 depth: int = FIRST_DEPTH, touched: np.ndarray | None = None):
        if price.shape != free.shape or price.ndim != 3:
            raise ValueError(f"price, free: expected two (T+1, H, R) arrays, got {price.shape} "
                             f"and {free.shape}")
        self.price, self.free = price, free
        T1, self.H, self.R = price.shape
        # flat views of the resource-major storage ((T+1, R, H) in memory, as ``OasisPolicy``
        # keeps it), for one-index gathers; a copy would not see the owner's updates
        self._flat_price, self._flat_free = (_flat(x) for x in (price, free))
        if dirty_limit < 1 or depth < 1:
            raise ValueError(f"dirty_limit, depth: expected integers >= 1, got {dirty_limit}, "
                             f"{depth}")
        self.limit, self.depth = int(dirty_limit), int(depth)
        self.row_of = np.zeros(T1, dtype=np.int64)  # row 0: the shared sort of untouched slots
        # per row: the 2R lists (price ascending, then free descending, per resource), their
        # keys as of the row's last sort, the dirty servers and their count
        self.order = np.empty((0, 2 * self.R, self.H), dtype=np.int32)
        self.keys = np.empty((0, 2 * self.R, self.H))
        self.dirty = np.zeros((0, self.limit), dtype=np.int32)
        self.count = np.zeros(0, dtype=np.int64)
        self._alloc(8)
        self.spare = list(range(len(self.order) - 1, 0, -1))
        self.order[0] = np.arange(self.H, dtype=np.int32)
        if touched is None:
            self._sort(0, T1 - 1)
        else:
            touched = np.asarray(touched, dtype=bool)
            alike = np.flatnonzero(~touched)
            self._sort(0, int(alike[-1]) if len(alike) else 0)  # unused if every slot differs
            self.row_of[touched] = -1  # as released slots: sorted afresh

    def _alloc(self, rows: int) -> None:
        R2, H, n = 2 * self.R, self.H, len(self.order)
        order, keys = np.empty((rows, R2, H), dtype=np.int32), np.empty((rows, R2, H))
        dirty, count = np.zeros((rows, self.limit), dtype=np.int32), np.zeros(rows, np.int64)
        order[:n], keys[:n], dirty[:n], count[:n] = self.order, self.keys, self.dirty, self.count
        self.order, self.keys, self.dirty, self.count = order, keys, dirty, count

    def _sort(self, row: int, slot: int) -> None:
        """Sort row ``row``'s lists by slot ``slot``'s current data, from the row's old order."""
        R = self.R
        vals = np.concatenate([self.price[slot].T, -self.free[slot].T])  # (2R, H)
        old = self.order[row]
        new = np.take_along_axis(old, np.argsort(np.take_along_axis(vals, old, axis=1),
                                                 axis=1, kind="stable"), axis=1)
        self.order[row] = new
        keys = np.take_along_axis(vals, new, axis=1)
        keys[R:] *= -1.0  # free capacity, descending
        self.keys[row] = keys
        self.count[row] = 0

    def _merge(self, row: int, slot: int, moved: np.ndarray) -> None:
        """Re-sort row ``row``'s lists after the servers ``moved`` (distinct) changed: the
        others keep their order and keys (unchanged since the last sort); the moved ones,
        sorted by their current data, are merged in after equal keys (a sorted order as good
        as a full sort's, for a fraction of its work)."""
        R2, H, d = 2 * self.R, self.H, len(moved)
        gone = np.zeros(H, dtype=bool)
        gone[moved] = True
        old = self.order[row]
        keep = ~gone[old]  # the same count in every list
        kept = old[keep].reshape(R2, H - d)
        sort_keys = self.keys[row][keep].reshape(R2, H - d)
        sort_keys[self.R:] *= -1.0  # free capacity: descending, as ascending negated amounts
        vals = np.concatenate([self.price[slot, moved].T, -self.free[slot, moved].T])  # (2R, d)
        by = np.argsort(vals, axis=1, kind="stable")
        vals, servers = np.take_along_axis(vals, by, axis=1), moved[by]
        at = np.empty((R2, d), dtype=np.int64)
        for i in range(R2):
            at[i] = np.searchsorted(sort_keys[i], vals[i], side="right")
        at += np.arange(d)  # final positions of the moved servers
        order, keys = np.empty((R2, H), dtype=old.dtype), np.empty((R2, H))
        spot = np.ones((R2, H), dtype=bool)
        lists = np.repeat(np.arange(R2), d)
        spot[lists, at.ravel()] = False
        order[lists, at.ravel()], keys[lists, at.ravel()] = servers.ravel(), vals.ravel()
        order[spot], keys[spot] = kept.ravel(), sort_keys.ravel()
        keys[self.R:] *= -1.0
        self.order[row], self.keys[row] = order, keys
        self.count[row] = 0

    # ---- the owner's updates ----------------------------------------------------------------
    def changed(self, slots: np.ndarray, servers: np.ndarray) -> None:
        """Servers whose price or free capacity changed, as (slot, server) pairs sorted by slot,
        each pair once."""
        if not len(slots):
            return
        cut = np.flatnonzero(np.diff(slots)) + 1
        for part_s, part_h in zip(np.split(slots, cut), np.split(servers, cut)):
            t = int(part_s[0])
            row = int(self.row_of[t])
            if row <= 0:
                released = row < 0
                row = self._own_row(t)
                if released:  # sorted afresh from the current data: the changes are in
                    continue
            c = int(self.count[row])
            if c + len(part_h) > self.limit:
                self._merge(row, t, np.unique(np.concatenate([self.dirty[row, :c], part_h])))
            else:
                self.dirty[row, c:c + len(part_h)] = part_h
                self.count[row] = c + len(part_h)

    def _own_row(self, t: int) -> int:
        """Give slot t a row of its own: a copy of the shared sort if it was untouched, else
        (released) a fresh sort of its data."""
        if not self.spare:
            n = len(self.order)
            self._alloc(2 * n)
            self.spare = list(range(2 * n - 1, n - 1, -1))
        row = self.spare.pop()
        if self.row_of[t] == 0:
            self.order[row], self.keys[row] = self.order[0], self.keys[0]
            self.count[row] = 0
        else:
            self.order[row] = np.arange(self.H, dtype=np.int32)
            self._sort(row, t)
        self.row_of[t] = row
        return row

    def forget_before(self, slot: int) -> None:
        """Release the lists of slots before ``slot`` to bound memory (a later query or change
        of such a slot sorts it afresh)."""
        done = self.row_of[:slot]
        for row in done[done > 0].tolist():
            self.spare.append(row)
        done[done != 0] = -1

    # ---- queries ------------------------------------------------------------------------------
    def _rows(self, slots: np.ndarray) -> np.ndarray:
        rows = self.row_of[slots]
        for i in np.flatnonzero(rows < 0).tolist():  # released: sorted afresh
            rows[i] = self._own_row(int(slots[i]))
        return rows

    def _pack(self, slots: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Candidates (S, M) -> (base, pad): each server once per row (the lists overlap: the
        cheapest servers head several of them), as offsets into the resource-major (T+1, R, H)
        storage of resource 0 (slot t, server h); ``pad`` marks the rows' unused ends."""
        cand.sort(axis=1)
        first = np.empty(cand.shape, dtype=bool)
        first[:, 0] = True
        np.not_equal(cand[:, 1:], cand[:, :-1], out=first[:, 1:])
        per_row = first.sum(axis=1)
        pad = np.arange(int(per_row.max())) >= per_row[:, None]
        packed = np.zeros(pad.shape, dtype=np.int64)
        packed[~pad] = cand[first]  # row-major: rows in order
        return slots[:, None] * (self.R * self.H) + packed, pad

    def _fits(self, base: np.ndarray, pad: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
        """``fit_count`` (capped at n) of packed candidates; 0 on the padding."""
        fit = fit_count_columns(lambda r: self._flat_free.take(base + r * self.H), base.shape,
                                w, n)
        fit[pad] = 0
        return fit

    def _prices(self, base: np.ndarray, pad: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``unit_prices`` of packed candidates; inf on the padding (never taken)."""
        u = unit_prices_columns(lambda r: self._flat_price.take(base + r * self.H), base.shape,
                                w)
        u[pad] = np.inf
        return u

    def marginals(self, slots: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
        """``_dp.cheapest_marginals`` of the given slots for demand ``w`` and n containers (the
        same floats): per slot, the candidates at depth m = max(``depth``, n), then 4m, ...,
        until a certificate holds or the lists would be read whole (then every server is)."""
        from ._dp import cheapest_marginals
        S, R = len(slots), self.R
        out = np.empty((S, n))
        dem = np.flatnonzero(w > 0)
        if n == 0:
            return out
        rows = self._rows(slots)
        todo = np.arange(S)
        m = max(self.depth, n)
        while len(todo) and len(dem) and (len(dem) + 1) * m + self.limit < self.H:
            r_ = rows[todo]
            dirty = self.dirty[r_, :int(self.count[r_].max())]  # stale entries: harmless extras
            # capacity: a demanded resource whose m-th largest free amount holds no container
            # (``fit_count``'s test); then the first m of that list and the dirty servers hold
            # every server that fits the job
            small = np.floor((self.keys[r_[:, None], R + dem[None, :], m] + FIT_EPS)
                             / w[dem]) < 1
            full = small.any(axis=1)
            done = np.zeros(len(todo), dtype=bool)
            if full.any():
                pick = R + dem[small[full].argmax(axis=1)]
                cand = np.concatenate([self.order[r_[full], pick, :m], dirty[full]], axis=1)
                base, pad = self._pack(slots[todo[full]], cand)
                fit = self._fits(base, pad, w, n)
                some = fit.any(axis=1)  # often none: the slot is booked up for this job
                at = todo[full]
                out[at[~some]] = np.inf  # what ``cheapest_marginals`` gives such a row
                if some.any():
                    out[at[some]] = cheapest_marginals(
                        self._prices(base[some], pad[some], w), fit[some], n)
                done[full] = True
            rest = ~full
            if rest.any():
                # threshold: a server outside the first m of every demanded price list and not
                # dirty has a unit price >= tau (summed as ``unit_prices`` sums)
                rr = r_[rest]
                cand = np.concatenate([self.order[rr[:, None], dem[None, :], :m]
                                       .reshape(len(rr), -1), dirty[rest]], axis=1)
                base, pad = self._pack(slots[todo[rest]], cand)
                mg = cheapest_marginals(self._prices(base, pad, w), self._fits(base, pad, w, n),
                                        n)
                tau, term = np.zeros(len(rr)), np.empty(len(rr))
                for r in dem.tolist():
                    np.add(tau, np.multiply(self.keys[rr, r, m], w[r], out=term), out=tau)
                ok = mg[:, n - 1] <= tau
                out[todo[rest][ok]] = mg[ok]
                done[np.flatnonzero(rest)[ok]] = True
            todo = todo[~done]
            m *= 4
        if len(todo):
            ts = slots[todo]
            out[todo] = cheapest_marginals(unit_prices(self.price[ts], w),
                                           fit_count(self.free[ts], w, n), n)
        return out


    def place(self, slots: np.ndarray, w: np.ndarray, counts: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Theorem 1's greedy placement (``_dp.greedy_fill``: cheapest unit price first, ties by
        the lowest server index) of counts[i] containers of demand ``w`` in slot slots[i], read
        from the first-round candidates of ``marginals`` where a certificate shows that reading
        every server would place the same: (row, server, containers) of the rows placed, and
        the rows left to the caller.

        The capacity certificate holds here as there (the candidates hold every server the job
        fits on). Under the threshold one a server outside the candidates (an outsider) has a
        unit price >= tau, so if the last container placed costs v < tau, no outsider precedes
        it. If v == tau (the usual case: idle servers share one price) an outsider at tau with
        a lower index than h*, the last server placed, would; none exists when
          (i) tau_r+ > tau for every demanded r, tau_r+ summing key_r[hi_r], the first larger
              key of r's price list, in place of key_r[m] (an outsider priced above key_r[m]
              in r has a unit price >= tau_r+: the float sums are monotone), and
         (ii) for some r, the servers at positions m..hi_r-1 of r's list (the rest of the tie
              block, where an outsider priced key_r[m] in every r sits) all have indices > h*.
        """
        from ._dp import fill_rows
        S, R, H = len(slots), self.R, self.H
        dem = np.flatnonzero(w > 0)
        none = np.zeros(0, dtype=np.int64)
        m = max(self.depth, int(counts.max()) if S else 0)
        if not S or not len(dem) or (len(dem) + 1) * m + self.limit >= H:
            return none, none, none, np.arange(S)
        rows = self._rows(slots)
        dirty = self.dirty[rows, :int(self.count[rows].max())]
        small = np.floor((self.keys[rows[:, None], R + dem[None, :], m] + FIT_EPS)
                         / w[dem]) < 1
        full = small.any(axis=1)
        placed, left = [], []
        for group in (np.flatnonzero(full), np.flatnonzero(~full)):
            if not len(group):
                continue
            rg = rows[group]
            if full[group[0]]:
                lists = self.order[rg, R + dem[small[group].argmax(axis=1)], :m]
            else:
                lists = self.order[rg[:, None], dem[None, :], :m].reshape(len(rg), -1)
            base, pad = self._pack(slots[group], np.concatenate([lists, dirty[group]], axis=1))
            u = self._prices(base, pad, w)
            row, j, n, short = fill_rows(u, self._fits(base, pad, w, int(counts.max())),
                                         counts[group])
            ok = np.ones(len(group), dtype=bool)
            ok[short] = False
            server = base[row, j] - slots[group][row] * (R * H)
            if not full[group[0]]:
                ok &= self._threshold_holds(rg, dem, w, m, row, u[row, j], server)
            keep = ok[row]
            placed.append((group[row[keep]], server[keep], n[keep]))
            left.append(group[~ok])
        at, server, n = (np.concatenate(x) for x in zip(*placed))
        return at, server, n, np.sort(np.concatenate(left))

    def _threshold_holds(self, rows: np.ndarray, dem: np.ndarray, w: np.ndarray, m: int,
                         row: np.ndarray, price: np.ndarray, server: np.ndarray) -> np.ndarray:
        """``place``'s threshold certificate for each of ``rows`` (the index rows of the slots),
        given the placement (row, its unit price, server) made from the candidates."""
        S = len(rows)
        tau, term = np.zeros(S), np.empty(S)
        for r in dem.tolist():
            np.add(tau, np.multiply(self.keys[rows, r, m], w[r], out=term), out=tau)
        v = np.full(S, -np.inf)
        np.maximum.at(v, row, price)
        ok = v < tau
        tie = np.flatnonzero(v == tau)
        if not len(tie):
            return ok
        last = np.full(S, -1)
        at_tau = price == v[row]
        np.maximum.at(last, row[at_tau], server[at_tau])
        rt = rows[tie]
        key = self.keys[rt[:, None], dem[None, :], m]  # (ties, demanded resources)
        lo, hi = np.full(key.shape, m + 1), np.full(key.shape, self.H)
        while (lo < hi).any():  # hi_r: the first position past m with a larger key (or H)
            mid = (lo + hi) // 2
            le = self.keys[rt[:, None], dem[None, :], np.minimum(mid, self.H - 1)] <= key
            lo, hi = np.where((lo < hi) & le, mid + 1, lo), np.where((lo < hi) & ~le, mid, hi)
        nxt = np.where(lo < self.H, self.keys[rt[:, None], dem[None, :],
                                              np.minimum(lo, self.H - 1)], np.inf)
        above = np.ones(len(tie), dtype=bool)  # (i)
        part = term[:len(tie)]
        for i in range(len(dem)):  # tau_r+ summed as ``unit_prices`` sums
            plus = np.zeros(len(tie))
            for k, r in enumerate(dem.tolist()):
                np.add(plus, np.multiply(nxt[:, k] if k == i else key[:, k], w[r], out=part),
                       out=plus)
            above &= plus > tau[tie]
        # (ii) on the shortest rest of a tie block: its smallest server index
        pick = np.argmin(lo, axis=1)
        length = lo[np.arange(len(tie)), pick] - m
        start = (rt * self.order.shape[1] + dem[pick]) * self.H + m
        offsets = np.cumsum(length) - length
        flat = np.repeat(start - offsets, length) + np.arange(int(length.sum()))
        lowest = np.minimum.reduceat(self.order.reshape(-1)[flat], offsets)
        ok[tie] = above & (lowest > last[tie])
        return ok


def _flat(x: np.ndarray) -> np.ndarray:
    """A flat view of a (T+1, H, R) array stored resource-major; ValueError otherwise."""
    base = x.transpose(0, 2, 1)
    if not base.flags.c_contiguous:
        raise ValueError("price, free: expected (T+1, H, R) arrays stored resource-major "
                         "((T+1, R, H) in memory, e.g. a transposed C-contiguous array)")
    return base.reshape(-1)
