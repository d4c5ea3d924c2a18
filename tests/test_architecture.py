"""The library stands apart from its application (docs/design.md, "Architecture"): importing
``gpflux_avdgp`` loads the library only, changes no other library's classes and exports the
names a Keras user needs."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from helpers import REPO_ROOT

#: Public names at the top level (the issue's target: about 20).
NAME_BUDGET = 22

_PROBE = """
import json, sys
import gpflux
before = {
    "gp_layer_build": "build" in gpflux.layers.GPLayer.__dict__,
    "likelihood_layer_build": "build" in gpflux.layers.LikelihoodLayer.__dict__,
    "loss_call": gpflux.losses.LikelihoodLoss.call,
}
import gpflux_avdgp
after = {
    "gp_layer_build": "build" in gpflux.layers.GPLayer.__dict__,
    "likelihood_layer_build": "build" in gpflux.layers.LikelihoodLayer.__dict__,
    "loss_call": gpflux.losses.LikelihoodLoss.call,
}
ours = sorted(m for m in sys.modules if m.split(".")[0] in ("gpflux_avdgp", "avdgp"))
print(json.dumps({
    "modules": ours,
    "lines": sum(len(open(sys.modules[m].__file__).read().splitlines()) for m in ours),
    "names": gpflux_avdgp.__all__,
    "resolved": all(getattr(gpflux_avdgp, n, None) is not None for n in gpflux_avdgp.__all__),
    "gpflux_unchanged": before == after,
}))
"""


@pytest.fixture(scope="module")
def probe() -> dict:
    """What a fresh ``import gpflux_avdgp`` loads and changes (one subprocess)."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_library_loads_no_application_module_and_changes_no_gpflux_class(probe):
    assert not [m for m in probe["modules"] if m.split(".")[0] == "avdgp"], probe["modules"]
    # no budget on the lines it loads: the one of issue 35 (4,500) bred three lazy-loading
    # mechanisms and was retired; the library imports eagerly, as GPflux does (issue 49)
    assert probe["gpflux_unchanged"]


def test_the_library_exports_the_names_of_a_keras_user_and_they_resolve(probe):
    assert len(probe["names"]) <= NAME_BUDGET, probe["names"]
    assert probe["resolved"]
    assert {"AmortizedGPLayer", "AVDGPLoss", "build_avdgp", "predict_mixture", "export"} <= set(
        probe["names"]
    )


#: CONTRIBUTING's bound on a module's lines (issue 49: one concept per module).
MODULE_LINES = 400


def test_no_module_of_the_library_or_the_application_is_over_its_line_bound():
    sizes = {
        str(path.relative_to(REPO_ROOT)): len(path.read_text().splitlines())
        for package in ("gpflux_avdgp", "avdgp")
        for path in (REPO_ROOT / package).rglob("*.py")
    }
    assert len(sizes) > 100, sorted(sizes)  # both packages were found
    assert {path: n for path, n in sizes.items() if n > MODULE_LINES} == {}


def test_the_library_s_tests_do_not_import_the_application():
    """``tests/library`` checks the library against NumPy, as a user without the application
    would run it (``docs/design.md``, "Architecture")."""
    importing = re.compile(r"^\s*(from|import)\s+avdgp\b", re.M)
    tests = sorted((REPO_ROOT / "tests" / "library").rglob("*.py"))
    assert len(tests) > 30, tests
    assert [str(p.relative_to(REPO_ROOT)) for p in tests if importing.search(p.read_text())] == []
