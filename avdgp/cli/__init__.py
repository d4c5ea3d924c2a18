"""The ``avdgp`` command line (also ``python -m avdgp``): one module per command
(:mod:`.demo`, :mod:`.fit`, :mod:`.bench`, :mod:`.predict`, :mod:`.export`),
the parser (:mod:`.parser`) and :func:`~avdgp.cli.main.main`, which turns exceptions into
exit statuses by their type (2: bad input, 3: training diverged, 1: internal error)."""

from .main import main
from .parser import build_parser

__all__ = ["build_parser", "main"]
