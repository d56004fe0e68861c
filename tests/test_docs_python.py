"""The Python on documentation pages runs: every code block, in order, as a reader would run them."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "python.md"
PAGES = ["python.md", "testing.md"]  # pages whose ```python blocks are whole programs (others show snippets)


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def test_the_page_has_code_to_run() -> None:
    assert len(python_blocks(PAGE.read_text(encoding="utf-8"))) >= 6


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_on_a_page_runs(page: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)  # the page's paths are the repository's
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "content_pipeline_runner", raising=False)
    # runs the page starts write their default workspaces under the current directory: keep them out of it
    monkeypatch.setattr("statewright.runtime.engine.DEFAULT_WORKSPACE_ROOT", str(tmp_path / "runs"))
    namespace: dict[str, object] = {"__name__": "docs_python"}
    for number, block in enumerate(python_blocks((ROOT / "docs" / page).read_text(encoding="utf-8")), 1):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block, f"docs/{page} block {number}", "exec"), namespace)  # noqa: S102
        assert "Traceback" not in printed.getvalue()
    sys.modules.pop("content_pipeline_runner", None)
