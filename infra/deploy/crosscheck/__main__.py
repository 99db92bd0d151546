"""`python -m crosscheck` (infra/deploy/crosscheck.sh runs it with the deploy venv)."""

import sys

from . import main

sys.exit(main(sys.argv[1:]))
