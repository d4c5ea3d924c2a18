"""Packaging for gpflux_avdgp."""

import os
import re

from setuptools import find_packages, setup

HERE = os.path.abspath(os.path.dirname(__file__))
README_PATH = os.path.join(HERE, "README.md")
VERSION_PATH = os.path.join(HERE, "gpflux_avdgp", "_version.py")

if os.path.exists(README_PATH):
    with open(README_PATH, encoding="utf-8") as f:
        LONG_DESCRIPTION = f.read()
else:
    LONG_DESCRIPTION = ""

with open(VERSION_PATH, encoding="utf-8") as f:  # the one place the version is written
    VERSION = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M).group(1)

setup(
    name="gpflux_avdgp",
    version=VERSION,
    description=(
        "Amortized variational inference for deep Gaussian processes "
        "as GPflux-style Keras layers"
    ),
    long_description=LONG_DESCRIPTION,
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["gpflux_avdgp", "gpflux_avdgp.*", "avdgp", "avdgp.*"]),
    package_data={"avdgp.experiments.paper": ["numbers/*.csv"]},  # the paper's Tables 1-5
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tf-keras>=2.21,<2.22",
        "tensorflow-probability>=0.25,<0.26",
        "gpflow==2.11.2",
        "gpflux==0.4.5",
        "numpy>=1.26,<2",
        "check_shapes>=1.1,<2",
        "matplotlib>=3.8,<3.11",
        "tensorboard>=2.21,<2.22",  # tf_keras.callbacks.TensorBoard; TF 2.21 does not pull it
    ],
    entry_points={"console_scripts": ["avdgp = avdgp.cli:main"]},
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3.5", "scoringrules>=0.10", "import-linter>=2.1"],
        "docs": [
            "sphinx>=8",
            "myst-parser>=4",
            "pydata-sphinx-theme>=0.16,<0.25",  # GPflow's theme
            "sphinx-copybutton>=0.5",
            "sphinx-mathjax-offline>=0.0.2",  # MathJax 3 in the build: no CDN for formulas
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
    ],
)
