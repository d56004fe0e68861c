"""Regenerates the parts of the documentation that are read from the code: the diagnostics index in
docs/diagnostics.md (from the code registry), the table of which module reports each code in
docs/architecture.md (from compiler/checks/reporters.py), the graphs and sources in docs/examples.md
(from examples/), and the IR's JSON Schema and worked example in docs/ir.md (from the compiler).

    python docs/generate.py            rewrite the generated parts of both pages
    python docs/generate.py --check    change nothing; exit 1 and name the pages that are out of date

A page holds its generated parts between marker comments, and everything outside them is written by hand:

    <!-- begin: diagnostics-index -->      ...      <!-- end: diagnostics-index -->
    <!-- begin: example content_pipeline -->  ...  <!-- end: example content_pipeline -->

tests/test_docs.py fails when a page is not what this script would write.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES_DIR = ROOT / "examples"
COMMAND = "python docs/generate.py"

# A generated part: `<!-- begin: KIND ARG -->` ... `<!-- end: KIND ARG -->` (ARG is empty for the index).
REGION = re.compile(r"(<!-- begin: ([a-z-]+)(?: ([A-Za-z0-9_]+))? -->\n)(.*?)(<!-- end: \2(?: \3)? -->)", re.DOTALL)

# The registry groups codes by their first digit; these are the section titles for each group.
GROUPS = {
    "1": "Syntax and files",
    "2": "Names",
    "3": "Machine structure",
    "4": "Types and guards",
    "5": "Templates",
    "6": "Test blocks",
    "7": "Warnings: unused and dead parts",
    "8": "Importers",
    "9": "Internal",
}

# Characters that are markup anywhere in running text (the registry's prose is plain text); `{` and `}`
# because mkdocs reads `{...}` at the end of a line as attributes. `<` is written as an entity.
_INLINE_MARKUP = set("\\`*_[]{}")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_BLOCK_START = re.compile(r"^(\d*)([#>+*-]|(?<=\d)[.)])")


class GenerationError(Exception):
    """A page names an example that is missing or does not check, or its markers do not pair up."""


def _api() -> Any:
    try:
        from statewright import api
    except ImportError:  # run from a checkout without installing the package
        sys.path.insert(0, str(ROOT / "src"))
        from statewright import api
    return api


def _registry() -> Mapping[str, Any]:
    _api()  # makes the package importable
    from statewright.diagnostics.codes import CODES

    return CODES


def _plain(text: str) -> str:
    """Text shown exactly as written, escaped only where Markdown would read it as markup, so that the
    page reads as well in the repository as on the site."""
    out = "".join("\\" + ch if ch in _INLINE_MARKUP else ch for ch in text)
    out = _ENTITY.sub(r"\\&", out).replace("<", "&lt;")
    return _BLOCK_START.sub(r"\1\\\2", out)


def _fence(text: str, lang: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


# ---- the diagnostics index -------------------------------------------------------------------------


def render_entry(info: Any) -> str:
    """One code: an anchor named by the code (for links such as diagnostics.md#SW2002), its heading,
    severity, explanation and examples."""
    lines = [
        f'<a id="{info.code}"></a>',
        "",
        f"### {info.code}: {_plain(info.title)}",
        "",
        f"**Severity:** {info.severity.value}",
        "",
        _plain(info.explanation),
        "",
    ]
    if info.wrong:
        lines += ["Wrong:", "", _fence(info.wrong, "text"), ""]
    if info.right:
        lines += ["Right:", "", _fence(info.right, "text"), ""]
    return "\n".join(lines)


def render_index(codes: Mapping[str, Any] | None = None) -> str:
    """The Markdown index of every code: a section per group, a heading per code, in code order."""
    registry = _registry() if codes is None else codes
    parts: list[str] = []
    group = None
    for code in sorted(registry):
        digit = code[2:3]
        if digit != group:
            group = digit
            parts.append(f"## {GROUPS.get(digit, f'SW{digit}xxx')}\n")
        parts.append(render_entry(registry[code]))
    return "\n".join(parts)


# ---- the architecture page: which module reports each code ---------------------------------------


def render_reporters(table: Any = None, codes: Mapping[str, Any] | None = None) -> str:
    """The Markdown table of the stages, the modules that report diagnostics in them, and their codes
    (each linked to its entry in the diagnostics index)."""
    registry = _registry() if codes is None else codes
    if table is None:
        from statewright.compiler.checks.reporters import REPORTED_BY as table
    lines = ["| Stage | Module | Codes |", "|---|---|---|"]
    for stage, module, reported in table:
        unknown = [code for code in reported if code not in registry]
        if unknown:
            raise GenerationError(f"compiler/checks/reporters.py names unregistered codes: {', '.join(unknown)}")
        links = ", ".join(f"[{code}](diagnostics.md#{code})" for code in sorted(reported))
        lines.append(f"| {stage} | `{module}` | {links} |")
    return "\n".join(lines)


# ---- the examples page ---------------------------------------------------------------------------


def render_example(name: str) -> str:
    """The Markdown for one example: its graph (as `statewright graph` draws it), then its source. An
    example in a folder of its own (examples/NAME/NAME.fsm and the files it uses) shows its entry machine's
    graph, then every file of the folder, the entry first."""
    folder = EXAMPLES_DIR / name
    path = folder / f"{name}.fsm" if folder.is_dir() else EXAMPLES_DIR / f"{name}.fsm"
    if not path.is_file():
        raise GenerationError(f"docs/examples.md names example '{name}', but {path} does not exist")
    api = _api()
    compilation = api.check_file(path)
    if not compilation.ok:
        problems = "; ".join(f"{d.code} {d.message}" for d in compilation.diagnostics)
        raise GenerationError(f"example {path.name} does not check: {problems}")
    files = [path, *sorted(p for p in folder.rglob("*.fsm") if p != path)] if folder.is_dir() else [path]
    parts = [_fence(api.render_graph(compilation, "mermaid"), "mermaid")]
    for file in files:
        parts += [f"Source: `{file.relative_to(EXAMPLES_DIR.parent).as_posix()}`",
                  _fence(file.read_text(encoding="utf-8"), "fsm")]
    return "\n\n".join(parts)


# ---- the IR page ---------------------------------------------------------------------------------

IR_EXAMPLE = """machine greet {
    input name: str
    agent host { prompt "You greet people." }
    start state hello {
        agent host
        do "Greet {{ name }}."
        when len(name) > 0 -> done
        otherwise -> done
    }
    final state done
}
"""


def render_ir_schema() -> str:
    """The JSON Schema of the IR's JSON form, as the compiler defines it."""
    import json

    from statewright.compiler.tools.ir_json import IR_JSON_SCHEMA

    return _fence(json.dumps(IR_JSON_SCHEMA, indent=2), "json")


def render_ir_example() -> str:
    """A small machine and the JSON its IR is."""
    import json

    from statewright.compiler.tools.ir_json import ir_to_json

    compilation = _api().check_text(IR_EXAMPLE, "greet.fsm")
    if compilation.ir is None:
        raise GenerationError("the IR example in docs/generate.py does not check")
    return "\n\n".join([_fence(IR_EXAMPLE, "text"), "lowers to",
                         _fence(json.dumps(ir_to_json(compilation.ir), indent=2), "json")])


# ---- pages ---------------------------------------------------------------------------------------

PAGES = ("diagnostics.md", "architecture.md", "examples.md", "ir.md")


def _generated(kind: str, argument: str | None) -> str:
    if kind == "diagnostics-index" and argument is None:
        return render_index()
    if kind == "reporters" and argument is None:
        return render_reporters()
    if kind == "example" and argument is not None:
        return render_example(argument)
    if kind == "ir-schema" and argument is None:
        return render_ir_schema()
    if kind == "ir-example" and argument is None:
        return render_ir_example()
    raise GenerationError(f"unknown generated part '{kind}{' ' + argument if argument else ''}'")


def regenerate(text: str, page: str = "the page") -> str:
    """`text` with every generated part rewritten; the hand-written rest is left as it is."""
    begins = len(re.findall(r"<!-- begin: ", text))
    found = list(REGION.finditer(text))
    if len(found) != begins:
        raise GenerationError(f"{page}: a '<!-- begin: ... -->' marker has no matching '<!-- end: ... -->'")
    return REGION.sub(lambda m: f"{m.group(1)}\n{_generated(m.group(2), m.group(3))}\n\n{m.group(5)}", text)


def examples_named(text: str) -> list[str]:
    """The examples a page shows, in order."""
    return [m.group(3) for m in REGION.finditer(text) if m.group(2) == "example"]


def stale_pages(docs: Path = DOCS) -> list[str]:
    """The pages whose generated parts are not what this script writes now."""
    stale = []
    for page in PAGES:
        text = (docs / page).read_text(encoding="utf-8")
        if regenerate(text, page) != text:
            stale.append(page)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is out of date")
    args = parser.parse_args(argv)
    try:
        if args.check:
            stale = stale_pages()
            for page in stale:
                print(f"docs/{page} is out of date: run `{COMMAND}`", file=sys.stderr)
            return 1 if stale else 0
        for page in PAGES:
            path = DOCS / page
            text = path.read_text(encoding="utf-8")
            new = regenerate(text, page)
            if new != text:
                path.write_text(new, encoding="utf-8", newline="\n")
                print(f"wrote docs/{page}", file=sys.stderr)
    except GenerationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
