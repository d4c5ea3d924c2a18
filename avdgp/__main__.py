"""``python -m avdgp``: the ``avdgp`` command line."""

import sys

from .cli import main

sys.exit(main())
