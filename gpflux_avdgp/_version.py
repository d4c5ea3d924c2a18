"""The package version (one place: the package, setup.py and exports read it)."""

__version__ = "0.1.0"
