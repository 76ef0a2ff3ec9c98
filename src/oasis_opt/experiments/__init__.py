"""The experiments, in one shape: a study's runs in ``experiments.<study>``, its drawing and
markdown in ``experiments.figures.<study>``, the same name on both sides.

* **A study**, ``oasis_opt.experiments.<study>``: its settings and its runs (the experiment specs
  and the estimates their pricing needs, or the ``compute`` that produces its data) and the
  functions that turn the runs' records into rows and results. A study without a figure module
  (``calibration``, ``placement``, ``placement_bracket``, ``predictors``, ``gavel``,
  ``worst_case``, ``automl_curves``, ``case_study``) holds its tables and plots too.
* **Its figure**, ``oasis_opt.experiments.figures.<study>``: the drawing, the markdown and the
  source's claims checked on the numbers; it imports its study and no policy, solver or simulator
  package (the runs belong to the study). A figure that ``oasis-opt reproduce`` draws has a
  ``FIGURE``, registered in ``figures.FIGURE_MODULES`` or ``figures.EXTRA_MODULES``; one that a
  script draws has ``main``. (Fig. 5's offline-track table, ``fig5.markdown``, stays in the study:
  ``fig5.md`` cites it by that name.)
* **A script** of the repository, ``experiments/<study>.py``, is thin: it calls ``main`` of its
  study's figure module, or of the study when it has none (``experiments/gavel_dev.py`` runs the
  study ``gavel``: ``paper_figs/gavel.md`` names the script).
* **Infrastructure**: ``spec`` (the run specs), ``runner`` (``run_sweep``, the result store),
  ``reproduce`` (``oasis-opt reproduce``), ``figures.common`` (the paper's numbers, plotting and
  markdown helpers, the OASiS run pair) and the registry ``figures``.

``tests/test_experiments_shape.py`` holds the shape.
"""
