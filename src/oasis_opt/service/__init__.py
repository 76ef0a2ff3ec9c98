"""The online scheduling service: jobs submitted over HTTP, decided slot by slot in wall-clock
time by an online policy (the simulator's own loop), run on Ray, shown on a dashboard.

``wiring.build_service`` puts the parts together (what ``oasis-opt serve`` runs):
``scheduler`` is the clock-free core (``Scheduler.advance`` decides one slot), ``store`` its
SQLite state, ``runner`` paces slots in wall-clock time and drives the executor, ``app`` the
FastAPI application (the ``service`` extra), ``client`` the thin HTTP client of ``oasis-opt
submit`` / ``status``.
"""
