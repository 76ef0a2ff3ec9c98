"""``python -m oasis_opt`` runs the ``oasis-opt`` command."""
import sys

from .cli import main

sys.exit(main())
