"""What "the same result" means on two machines: decisions exactly, floats within a tolerance.

A policy run on another CPU makes the same decisions (admissions, allocation rows, completion
slots, every integer and string of its result document), but the floats it reports may differ in
the last place: numpy picks its ufunc kernels at run time by the CPU's SIMD features (float64
``exp``, ``log`` and ``power`` have AVX-512 kernels, ``numpy.lib.introspect.opt_func_info``),
and a utility f_i(t) or a price computed with them comes out a few ulp apart. A
SHA-256 over a result file's text therefore differs between an AVX-512 machine and an AVX2 one
although nothing was decided differently.

So a result is held to a stored one in two parts (``fingerprint`` / ``differences``):

* **decisions**: the SHA-256 of the document with every float replaced by ``null``
  (``decisions``): every admission, completion slot, allocation row, name and count, exactly;
* **values**: the floats in document order, keys sorted (``values``), each within ``SAME_RTOL`` = 1e-12
  relative of the stored one (``SAME_ATOL`` = 1e-300 absolute, so that an underflowed value next
  to 0.0 is not a difference). Last-place noise is ~1e-16 relative; a real change of a utility
  or a price is far larger.

Rounding floats to a fixed number of digits before hashing is *not* used: a value that lies
within its noise of a rounding boundary rounds differently on the two machines (about one float
in 10^4 at 12 digits), and a file of thousands of floats would then differ somewhere.

Decisions that compare floats are made robust to the same noise where they are taken (the
tolerances of ``model.numerics``: the dual's tie rules, OASiS's admission test
``payoff_positive``, container fits), so that they really are identical on every CPU.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

SAME_RTOL = 1e-12
"""Relative tolerance of two runs' floats (last-place noise is ~1e-16)."""
SAME_ATOL = 1e-300
"""Absolute tolerance of two runs' floats (values that underflowed next to 0.0)."""


def _split(doc: Any, path: str, values: list[tuple[str, float]]) -> Any:
    if isinstance(doc, bool) or doc is None or isinstance(doc, (int, str)):
        return doc
    if isinstance(doc, float):
        values.append((path, doc))
        return None
    if isinstance(doc, dict):
        return {k: _split(doc[k], f"{path}.{k}", values) for k in sorted(map(str, doc))}
    if isinstance(doc, (list, tuple)):
        return [_split(v, f"{path}[{i}]", values) for i, v in enumerate(doc)]
    raise TypeError(f"{path or 'document'}: not a JSON value ({type(doc).__name__})")


def split(doc: Any) -> tuple[Any, list[tuple[str, float]]]:
    """``(decisions, values)``: ``doc`` (a JSON-like tree of dicts, lists, strings, ints, bools,
    floats and None; string keys) with every float replaced by None, and the floats with their
    paths (``".jobs[3].utility"``) in document order, keys sorted (so dict order does not count).
    A non-JSON leaf raises ``TypeError``."""
    values: list[tuple[str, float]] = []
    return _split(doc, "", values), values


def decisions_sha256(doc: Any) -> str:
    """SHA-256 of ``doc``'s decisions (``split``)."""
    text = json.dumps(split(doc)[0], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def same_float(got: float, want: float) -> bool:
    """``got`` equals ``want`` up to last-place noise (``SAME_RTOL``, ``SAME_ATOL``); infinities
    must match exactly and NaN equals NaN."""
    if math.isnan(got) or math.isnan(want):
        return math.isnan(got) and math.isnan(want)
    return math.isclose(got, want, rel_tol=SAME_RTOL, abs_tol=SAME_ATOL)


def fingerprint(doc: Any) -> dict[str, Any]:
    """What a stored result keeps of ``doc``: ``{"decisions_sha256": ..., "values": [...]}``."""
    return {"decisions_sha256": decisions_sha256(doc), "values": [v for _, v in split(doc)[1]]}


def differences(doc: Any, stored: dict[str, Any], limit: int = 5) -> list[str]:
    """How ``doc`` differs from a stored ``fingerprint``: [] when it is the same result (same
    decisions, every float within tolerance); else up to ``limit`` lines, the decisions first,
    then each float that differs named by its path."""
    out = []
    if decisions_sha256(doc) != stored["decisions_sha256"]:
        out.append("decisions differ (decisions_sha256)")
    values = split(doc)[1]
    want = stored["values"]
    if len(values) != len(want):
        out.append(f"{len(values)} floats, stored {len(want)}")
    for (path, got), w in zip(values, want):
        if len(out) >= limit:
            break
        if not same_float(got, float(w)):
            out.append(f"{path}: {got!r} != stored {w!r}")
    return out
