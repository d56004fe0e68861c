"""mkdocs hook: fills docs/examples.md with each bundled example's graph and source, read from examples/.

A marker `<!-- example: NAME -->` becomes the Mermaid graph of `examples/NAME.fsm` (as `statewright graph`
draws it) followed by the file itself, so the page always shows the examples as they are.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
MARKER = re.compile(r"<!-- example: ([A-Za-z0-9_]+) -->")


class ExampleError(Exception):
    """An example named on the page is missing or does not check; the docs build stops."""


def _api() -> Any:
    try:
        from statewright import api
    except ImportError:  # building the docs from a checkout without installing the package
        sys.path.insert(0, str(EXAMPLES_DIR.parent / "src"))
        from statewright import api
    return api


def _fence(text: str, lang: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def render_example(name: str) -> str:
    """The Markdown for one example: its graph, then its source."""
    path = EXAMPLES_DIR / f"{name}.fsm"
    if not path.is_file():
        raise ExampleError(f"docs/examples.md names example '{name}', but {path} does not exist")
    api = _api()
    compilation = api.check_file(path)
    if not compilation.ok:
        problems = "; ".join(f"{d.code} {d.message}" for d in compilation.diagnostics)
        raise ExampleError(f"example {path.name} does not check: {problems}")
    graph = api.render_graph(compilation, "mermaid")
    source = path.read_text(encoding="utf-8")
    return "\n\n".join([
        _fence(graph, "mermaid"),
        f"Source: `examples/{name}.fsm`",
        _fence(source, "fsm"),
    ])


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    if MARKER.search(markdown) is None:
        return markdown
    return MARKER.sub(lambda m: render_example(m.group(1)), markdown)
