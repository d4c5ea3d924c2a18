"""The code on documentation pages runs: each page's ``python`` blocks, in order, in one
namespace (so a page reads as one script)."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest
from helpers import REPO_ROOT

PAGES = ["docs/gpflux.md", "docs/keras.md", "docs/uncertainty.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


# In the slow suite (CI runs it on every submission): each page traces half a dozen models,
# 41 s of the default suite's budget; the default suite tests the same calls in
# test_keras_habits (docs/keras.md) and test_deep_gp / tests/layers (docs/gpflux.md).
@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_the_python_blocks_of_the_page_run(page):
    text = (REPO_ROOT / page).read_text()
    blocks = BLOCK.findall(text)
    assert blocks, f"{page} has no python blocks"
    namespace: dict = {"__name__": "docs_page"}
    for number, block in enumerate(blocks, start=1):
        code = compile(block, f"{page} (python block {number})", "exec")
        exec(code, namespace)  # noqa: S102 - the documentation's own examples


RST_PYTHON_BLOCK = re.compile(r"^\.\. code-block:: python\n\n((?:   .*\n|\n)+)", re.M)


@pytest.mark.slow  # trains a model for 30 epochs
def test_the_landing_page_example_runs_and_learns_the_step():
    text = (REPO_ROOT / "docs" / "index.rst").read_text()
    (block,) = RST_PYTHON_BLOCK.findall(text)
    namespace: dict = {"__name__": "docs_index"}
    exec(compile(textwrap.dedent(block), "docs/index.rst", "exec"), namespace)  # noqa: S102
    outputs = namespace["outputs"]
    assert {"mean", "std", "lower_95", "upper_95"} <= set(outputs)
    mean = np.asarray(outputs["mean"])[:, 0]  # at x = -2, -1, 0, 1, 2
    np.testing.assert_allclose(mean[[0, 1, 3, 4]], [-1, -1, 1, 1], atol=0.3)
