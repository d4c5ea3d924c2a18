"""The code on documentation pages runs: each page's ``python`` blocks, in order, in one
namespace (so a page reads as one script)."""

from __future__ import annotations

import re

import pytest
from helpers import REPO_ROOT

PAGES = ["docs/gpflux.md", "docs/keras.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


@pytest.mark.parametrize("page", PAGES)
def test_the_python_blocks_of_the_page_run(page):
    text = (REPO_ROOT / page).read_text()
    blocks = BLOCK.findall(text)
    assert blocks, f"{page} has no python blocks"
    namespace: dict = {"__name__": "docs_page"}
    for number, block in enumerate(blocks, start=1):
        code = compile(block, f"{page} (python block {number})", "exec")
        exec(code, namespace)  # noqa: S102 - the documentation's own examples
