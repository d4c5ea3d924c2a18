"""The package version, written here only: ``setup.py``, ``gpflux_avdgp.__version__`` and
the serving export read it."""

__version__ = "0.1.0"
