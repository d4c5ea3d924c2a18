"""Sphinx configuration for gpflux_avdgp."""

import importlib.metadata
import os
import sys

# Quieten TensorFlow before anything imports it (autodoc imports the real package).
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

sys.path.insert(0, os.path.abspath(".."))

# -- Project information -----------------------------------------------------

project = "gpflux_avdgp"
author = "gpflux_avdgp developers"
copyright = "gpflux_avdgp developers"
release = importlib.metadata.version("gpflux_avdgp")  # from gpflux_avdgp/_version.py
version = ".".join(release.split(".")[:2])

# -- General configuration ---------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_parser",
]

source_suffix = {
    ".rst": "restructuredtext",
    ".md": "markdown",
}

master_doc = "index"
root_doc = "index"

exclude_patterns = [
    "_build",
    "experiments/bench/tables.md",
    "experiments/bench100/tables.md",
    "experiments/uncertainty/uncertainty.md",  # tables quoted by uncertainty.md
    "experiments/paper/**",  # included by experiments/paper.md
]

autodoc_default_options = {
    "members": True,
    "undoc-members": False,
    "show-inheritance": True,
}
# We import the real package (all dependencies are installed in CI), so mock nothing.
autodoc_mock_imports = []

myst_enable_extensions = ["dollarmath", "amsmath"]

suppress_warnings = ["myst.header"]

nitpicky = False

# -- HTML output -------------------------------------------------------------

html_theme = "alabaster"
