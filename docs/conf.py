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
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static: formulas render without a CDN
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "myst_parser",
]

# Links to the libraries we build on. The inventories are committed (docs/_inventories/, from
# the projects' published docs: GPflow develop, GPflux, NumPy 1.26, GPflow's TensorFlow 2.4 and
# TFP 0.12 inventories), so the build needs no network; the links point at the live sites.
intersphinx_mapping = {
    "numpy": ("https://numpy.org/doc/1.26/", "_inventories/numpy.inv"),
    "tensorflow": ("https://www.tensorflow.org/api_docs/python", "_inventories/tensorflow.inv"),
    "tensorflow_probability": (
        "https://www.tensorflow.org/probability/api_docs/python",
        "_inventories/tensorflow_probability.inv",
    ),
    "gpflow": ("https://gpflow.github.io/GPflow/develop/", "_inventories/gpflow.inv"),
    "gpflux": ("https://secondmind-labs.github.io/GPflux/", "_inventories/gpflux.inv"),
}
intersphinx_timeout = 5

# Copy buttons copy the command, not the prompt or the output.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = False

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
    "experiments/uncertainty_hard/uncertainty.md",  # the same, for the harder benchmark
    "experiments/paper/**",  # included by experiments/paper.md
    "experiments/reproduction/**",  # rows and raw renders behind experiments/reproduction.md
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

html_theme = "pydata_sphinx_theme"  # GPflow's
html_title = "gpflux_avdgp"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
# Top-level pages have no sub-pages: no empty "Section Navigation" column beside them.
html_sidebars = {"*": []}
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "header_links_before_dropdown": 4,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_context = {"default_mode": "light"}

# -- Class signatures --------------------------------------------------------

import inspect  # noqa: E402

from sphinx.util.inspect import stringify_signature  # noqa: E402


def _init_signature(app, what, name, obj, options, signature, return_annotation):
    """Keras' ``Layer``, ``Model`` and ``Metric`` define ``__new__(cls, *args, **kwargs)``,
    which autodoc shows as the signature of every layer, model and metric; show the
    arguments of the class's ``__init__`` instead."""
    if what != "class" or signature != "(*args, **kwargs)":
        return None
    init = inspect.signature(obj.__init__)
    parameters = list(init.parameters.values())[1:]  # without self
    init = init.replace(parameters=parameters, return_annotation=inspect.Signature.empty)
    return stringify_signature(init, show_return_annotation=False), return_annotation


def _source_module(app, modname: str, attribute: str) -> str:
    """Where viewcode looks for a documented object's source: the module that defines it, or,
    for a constant whose type is a builtin (a tuple of names), the module that documents it
    (Sphinx would otherwise list a ``builtins`` source page it never writes)."""
    import importlib

    try:
        value = importlib.import_module(modname)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError):
        return modname
    defined_in = getattr(value, "__module__", None)
    return modname if defined_in in (None, "builtins") else defined_in


def setup(app):
    app.connect("autodoc-process-signature", _init_signature)
    app.connect("viewcode-follow-imported", _source_module)
