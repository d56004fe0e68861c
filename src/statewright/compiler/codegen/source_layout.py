"""How generated Python is laid out: line width, import blocks, wrapped words, the layouts' environment.

Shared by a runner (render.py), the runtime package beside it (runtime_package.py) and the one-file form's
runtime (standalone.py).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from .runtime_source import ModuleImport

WIDTH = 100  # preferred line length of generated code
INDENT = "    "


@lru_cache(maxsize=1)
def layout_environment() -> Any:
    """The Jinja environment of the layouts of generated files (loaded once: their parse is cached inside
    it)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("statewright.compiler.codegen", "layouts"),
        autoescape=False,  # the output is Python, and every value is finished source already
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def wrap_words(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def import_block(imports: Iterable[ModuleImport], used: set[str]) -> str:
    """The module's imports of the names in `used`: the standard library, then the rest, each sorted —
    deterministic and readable (the file is not linted where it is committed: `# ruff: noqa`)."""
    chosen: dict[str, ModuleImport] = {}
    for imp in imports:
        if imp.bound in used and (imp.name is None or imp.bound not in chosen):
            chosen.setdefault(imp.bound if imp.name is not None else f"import {imp.module}", imp)
    stdlib = [i for i in chosen.values() if i.module.split(".")[0] in sys.stdlib_module_names]
    third_party = [i for i in chosen.values() if i.module.split(".")[0] not in sys.stdlib_module_names]
    return "\n\n".join("\n".join(import_lines(group)) for group in (stdlib, third_party) if group)


def import_lines(group: list[ModuleImport], width: int = WIDTH) -> list[str]:
    """`import m` and `from m import a, b` lines, sorted; a line past `width` holds one name a line."""
    lines = [f"import {m}" for m in sorted({i.module for i in group if i.name is None})]
    by_module: dict[str, set[str]] = {}
    for i in group:
        if i.name is not None:
            by_module.setdefault(i.module, set()).add(i.name if i.bound == i.name else f"{i.name} as {i.bound}")
    for module in sorted(by_module):
        names = sorted(by_module[module])
        line = f"from {module} import {', '.join(names)}"
        if len(line) > width:
            line = f"from {module} import (\n" + "".join(f"{INDENT}{n},\n" for n in names) + ")"
        lines.append(line)
    return lines


def quoted(text: str) -> str:
    """A version, digest or module name as a string literal: nothing in them needs escaping."""
    assert re.fullmatch(r"[0-9A-Za-z.+_-]+", text), text
    return f'"{text}"'
