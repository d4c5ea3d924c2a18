"""The code on documentation pages runs: each page's ``python`` blocks, in order, in one
namespace (so a page reads as one script)."""

from __future__ import annotations

import re

import pytest
from helpers import REPO_ROOT

PAGES = ["docs/gpflux.md", "docs/keras.md"]
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
