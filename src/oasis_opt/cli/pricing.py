"""``estimate-pricing``: OASiS's U and L from past instances, a pricing file for ``solve``."""
from __future__ import annotations

import argparse
import math
import sys

from .args import MAX_WORK, PROGRESS, adder, arg, blame, floor_grid, quantile
from .common import EXIT_OK, PROG, CliError, check_size, load_instance, show_progress, write

# above this alpha (U/L > e^50) the plug-in floor is far below every price that matters
PLUGIN_ALPHA_WARNING = 50.0
_SEARCH_ONLY = (("grid", "--grid"), ("backend", "--backend"), ("report", "--report"),
                ("batch", "--batch/--no-batch"))

add_estimate_pricing = adder(
    arg("history", nargs="+", metavar="HISTORY",
        help="instance JSON files of past workload (not the instances to be evaluated)"),
    arg("--method", choices=("search", "plugin"), default="search",
        help="search (default: the rule that wins the pricing study, paper_figs/pricing.md): "
             "the floor L (L1 = L2) of --grid under which OASiS earned the most on the "
             "history, U by eqs. (23)-(24); give it several past instances (the figures use "
             "3). plugin: eqs. (23)-(26) applied to the history's jobs, L1 and L2 from a low "
             "percentile of f(T-a)/(W sum_r w) on capacity-normalised demands; the paper's "
             "definitions, no OASiS runs, nothing tuned on utility"),
    arg("--quantile", type=quantile, metavar="Q",
        help="plugin: the percentile of the per-job terms and sizes, as a fraction "
             "(default 0.1)"),
    arg("--grid", type=floor_grid, metavar="L1,L2,...",
        help="search: floor prices L to try, comma-separated (default: 1e-7 to 1 in half "
             "decades)"),
    arg("--backend", choices=("numpy", "jax", "reference"),
        help="search: OASiS kernel backend for the calibration runs (default numpy)"),
    arg("--batch", action=argparse.BooleanOptionalAction, default=None,
        help="search: run the whole grid on each history instance at once (default "
             "with the numpy backend, which it needs; the same table and L as "
             "--no-batch, one floor at a time)"),
    PROGRESS, MAX_WORK,
    arg("--report", metavar="FILE",
        help="search: also write the calibration table (oasis-opt/floor-calibration@1 "
             "JSON)"),
    arg("--out", required=True, metavar="PRICING", help="pricing JSON to write"))


def estimate_pricing(args: argparse.Namespace) -> int:
    from ..online.pricing import save_pricing

    history = [load_instance(path) for path in args.history]
    for path, inst in zip(args.history[1:], history[1:]):
        # one pricing file prices every history run: the resource names must agree
        if tuple(inst.resources) != tuple(history[0].resources):
            raise CliError(path, f"resources {', '.join(inst.resources)} differ from "
                           f"{args.history[0]}'s ({', '.join(history[0].resources)})")
    if args.method == "plugin":
        for attr, flag in _SEARCH_ONLY:
            if getattr(args, attr) is not None:
                raise CliError(flag, "applies to --method search only")
        from ..online.plugin import DEFAULT_QUANTILE, plugin_pricing

        try:
            pricing = plugin_pricing(history, DEFAULT_QUANTILE if args.quantile is None
                                     else args.quantile)
        except ValueError as e:
            raise blame(e, {"history": "HISTORY", "quantile": "--quantile"}, "HISTORY") from None
        write(args.out, save_pricing, pricing)
        _print_plugin(pricing, history, args.out)
        return EXIT_OK
    if args.quantile is not None:
        raise CliError("--quantile", "applies to --method plugin only")
    return _estimate_by_search(args, history)


def _print_plugin(pricing: dict, history: list, out: str) -> None:
    from ..sim.report import format_table

    d = pricing.details  # type: ignore[attr-defined]
    rows = [[pool, f"{d[pool]['L_normalised']:.4g}", f"{d[pool].get('eta', math.nan):.4g}",
             ", ".join(f"{r}={v:.3g}" for r, v in d[pool]["L"].items())]
            for pool in ("worker", "ps")]
    print(format_table(["pool", "L (normalised)", "eta", "L per unit"], rows))
    jobs = sum(inst.I for inst in history)
    print(f"plug-in U and L (quantile {d['quantile']:g}) from {jobs} history jobs, alpha = "
          f"{d['alpha']:.4g}, 2 alpha = {2 * d['alpha']:.4g} -> {out}")
    if d["alpha"] > PLUGIN_ALPHA_WARNING:
        print(f"{PROG}: warning: alpha = {d['alpha']:.0f}: the floor is tiny against U (most "
              "history jobs are worth almost nothing at the horizon), so prices stay near 0 "
              "until a server is almost full; --method search tunes the floor instead",
              file=sys.stderr)


def _estimate_by_search(args: argparse.Namespace, history: list) -> int:
    from ..model.io import write_json_atomic
    from ..online.estimate import DEFAULT_FLOOR_GRID, estimate_pricing
    from ..online.pricing import save_pricing
    from ..sim.report import format_table
    from ..sizing import estimate_work

    grid = DEFAULT_FLOOR_GRID if args.grid is None else args.grid
    check_size(estimate_work(history, "oasis", runs=len(grid)), args.max_work, "HISTORY")
    bar = None
    if show_progress(args):
        from tqdm import tqdm

        bar = tqdm(total=len(grid) * len(history), desc="floor calibration", unit="run",
                   leave=False)
    try:
        pricing = estimate_pricing(
            history, grid, backend=args.backend or "numpy", batch=args.batch,
            progress=None if bar is None else lambda done, total: bar.update(done - bar.n))
    except ValueError as e:
        raise blame(e, {"history": "HISTORY", "grid": "--grid", "batch": "--batch"},
                    "HISTORY") from None
    finally:
        if bar is not None:
            bar.close()

    calibration = pricing.calibration
    write(args.out, save_pricing, pricing)
    if args.report is not None:
        report = {"format": "oasis-opt/floor-calibration@1", "history": list(args.history),
                  **calibration.to_dict()}
        write(args.report, lambda doc, path: write_json_atomic(path, doc), report,
              field="--report")
    rows = [[f"{L:.3g}", mean, "<- chosen" if n == calibration.index else ""]
            for n, (L, mean) in enumerate(zip(calibration.grid, calibration.mean))]
    print(format_table(["L", "mean utility", ""], rows))
    jobs = sum(inst.I for inst in history)
    print(f"chosen L = {calibration.chosen:.6g} (U from {jobs} history jobs) -> {args.out}")
    if calibration.at_edge:
        print(f"{PROG}: warning: the best floor is an end of the grid; widen --grid",
              file=sys.stderr)
    return EXIT_OK


COMMANDS = {"estimate-pricing": (add_estimate_pricing, estimate_pricing)}
