"""The code on documentation pages runs: each page's ``python`` blocks, in order, in one
namespace (so a page reads as one script)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO_ROOT

PAGES = ["docs/gpflux.md", "docs/keras.md", "docs/uncertainty.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


# In the slow suite (CI runs it on every submission): each page traces half a dozen models,
# 41 s of the default suite's budget; the default suite tests the same calls in
# tests/library/models/test_keras_habits (docs/keras.md) and tests/library/models/test_deep_gp and
# tests/library/layers (docs/gpflux.md).
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


class _Links(HTMLParser):
    """The ``href``/``src`` links and the anchor ids of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        found = dict(attrs)
        if "id" in found:
            self.ids.add(found["id"])
        self.links += [found[key] for key in ("href", "src") if found.get(key)]


def broken_links(site: Path) -> list[str]:
    """Every link of the built site to a page of it that does not exist or to an anchor the
    page does not have, as ``"page -> link"`` (external links and the theme's templates in
    ``_static`` are not followed)."""
    pages = {}
    for path in site.rglob("*.html"):
        if "_static" not in path.relative_to(site).parts:
            parser = _Links()
            parser.feed(path.read_text(errors="replace"))
            pages[path.resolve()] = parser
    broken = []
    for page, parser in pages.items():
        for link in parser.links:
            if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # http:, mailto:, data:
                continue
            target, _, anchor = link.partition("#")
            resolved = (page.parent / target.split("?")[0]).resolve() if target else page
            missing_anchor = anchor and resolved in pages and anchor not in pages[resolved].ids
            if not resolved.exists() or missing_anchor:
                broken.append(f"{page.relative_to(site.resolve())} -> {link}")
    return broken


def test_the_link_checker_finds_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "a.html").write_text(
        '<a href="b.html#here">ok</a><a href="b.html#gone">x</a><a href="c.html">x</a>'
        '<a href="https://example.org/nowhere">external</a><img src="b.html?v=1">'
    )
    (tmp_path / "b.html").write_text('<h1 id="here">b</h1><a href="#here">self</a>')
    assert broken_links(tmp_path) == ["a.html -> b.html#gone", "a.html -> c.html"]


@pytest.mark.slow  # builds the site, about 40 s
def test_every_link_of_the_built_docs_resolves(tmp_path):
    site = tmp_path / "html"
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", "docs", str(site)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    assert broken_links(site) == []
