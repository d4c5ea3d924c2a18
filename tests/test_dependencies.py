"""The install's pins are the ones the stack forces (issue 50: numpy 2 wherever it allows)."""

from __future__ import annotations

import importlib.metadata

from packaging.requirements import Requirement
from packaging.version import Version


def _numpy_requirement(distribution: str) -> Requirement:
    requirements = [Requirement(r) for r in importlib.metadata.requires(distribution) or []]
    return next(r for r in requirements if r.name == "numpy" and r.marker is None)


def test_numpy_is_pinned_below_2_only_because_gpflow_and_gpflux_require_it():
    """README says why numpy stays below 2; once GPflow or GPflux allow numpy 2, this fails:
    lift the pin in setup.py and the README's paragraph."""
    ours = _numpy_requirement("gpflux-avdgp").specifier
    assert Version("1.26.4") in ours and Version("2.0.0") not in ours
    forced = [
        name
        for name in ("gpflow", "gpflux")
        if Version("2.0.0") not in _numpy_requirement(name).specifier
    ]
    assert forced == ["gpflow", "gpflux"]
