"""Build the API reference from the docstrings with pdoc: ``python docs/build.py OUT_DIR``.

Every module of ``oasis_opt`` is documented (private ``_*`` modules and ``__main__`` excepted);
docstrings are reStructuredText (``code``, ``:mod:``). Any warning raised while importing and
rendering (a module that fails to import, a docstring or annotation pdoc cannot parse, a broken
cross-reference) fails the build: ``make docs`` runs this, and CI runs ``make docs``.
"""
from __future__ import annotations

import pkgutil
import sys
import warnings
from pathlib import Path

import pdoc
import pdoc.extract
import pdoc.render

import oasis_opt


def module_specs() -> list[str]:
    """Module names for pdoc covering every public module once: pdoc walks a package's
    submodules itself unless the package defines ``__all__``, so a module is named only when
    no package named before it already covers it."""
    names = ["oasis_opt"] + [info.name for info in
                             pkgutil.walk_packages(oasis_opt.__path__, "oasis_opt.")]
    specs: list[str] = []
    covered: set[str] = set()
    for name in sorted(names):
        if name in covered or any(part.startswith("_") for part in name.split(".")[1:]):
            continue
        specs.append(name)
        covered.update(pdoc.extract.walk_specs([name]))
    return specs


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python docs/build.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    pdoc.render.configure(docformat="restructuredtext", show_source=False,
                          footer_text=f"oasis-opt {oasis_opt.__version__}")
    modules = module_specs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*modules, output_directory=out)
    for w in caught:
        print(f"docs: warning: {w.filename}:{w.lineno}: {w.category.__name__}: {w.message}",
              file=sys.stderr)
    if caught:
        print(f"docs: {len(caught)} warning(s): the build fails on any", file=sys.stderr)
        return 1
    pages = sum(1 for _ in out.rglob("*.html")) - 1  # every module's page, and index.html
    print(f"docs: {pages} module pages -> {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
