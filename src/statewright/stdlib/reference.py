"""The language reference the designer model reads, built from the real grammar and the bundled examples.

The grammar is read from the package itself, and the examples from the repository's `examples/*.fsm`,
kept in one place: in a checkout `stdlib/examples` is a link to that folder, and a wheel carries its
`.fsm` files at that path (pyproject.toml's package data). So the prompt cannot drift from the language.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_HERE = Path(__file__).parent
GRAMMAR = _HERE.parent / "grammar" / "statewright.lark"
EXAMPLES = _HERE / "examples"


def example_paths() -> list[Path]:
    return sorted(EXAMPLES.glob("*.fsm"))


@lru_cache(maxsize=1)
def designer_system_prompt() -> str:
    parts = [(_HERE / "designer.md").read_text(encoding="utf-8").strip(), "", "## The grammar (Lark)", "",
             "```lark", GRAMMAR.read_text(encoding="utf-8").strip(), "```"]
    for path in example_paths():
        parts += ["", f"## Example: {path.name}", "", "```fsm", path.read_text(encoding="utf-8").strip(), "```"]
    return "\n".join(parts) + "\n"


@lru_cache(maxsize=1)
def compact_designer_system_prompt(example: str = "content_pipeline.fsm") -> str:
    """The design guide and one example machine, without the grammar: about 2,000 tokens instead of 11,000,
    for a designer model with a small context window (SmolLM2 served by llama.cpp with 4,096 tokens). Under
    the grammar constraint the model's decoder is held to the grammar, so the model need not read it."""
    guide = (_HERE / "designer.md").read_text(encoding="utf-8").strip().rsplit("\n", 1)[0].rstrip()
    parts = [guide, "", "A complete example machine follows.", "", f"## Example: {example}", "", "```fsm",
             (EXAMPLES / example).read_text(encoding="utf-8").strip(), "```"]
    return "\n".join(parts) + "\n"
