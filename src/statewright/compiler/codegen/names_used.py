"""The names a piece of generated code uses, for the runner's imports and its reserved names."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from .python_literals import Call, Position, Raw

LAYOUT = "runner.py.jinja"
# Where the machine part of a module finds the runtime: in the package statewright_runtime/ beside it
# (`statewright compile`, the default), in marked sections above it (`compile --standalone`, one file), or
# in the installed statewright (`statewright run`, `test` and the Python API, compiled in memory).
RUNTIME_SHARED, RUNTIME_STANDALONE, RUNTIME_INSTALLED = "shared", "standalone", "installed"
RUNTIME_FORMS = (RUNTIME_SHARED, RUNTIME_STANDALONE)  # what `compile` writes
INSTALLED_RUNTIME = "statewright.runtime"


def used_names(code: str) -> set[str]:
    """The names `code` reads or binds (ast.Name nodes: attributes, keywords and strings are not names)."""
    return {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}


_GENERATED_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')  # unrolled: no regex state per character
_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def function_names(code: str) -> set[str]:
    """The names the guard and argument functions read, found without parsing them: every identifier but
    attributes, outside comments and strings. Their code is this module's own — each comment a whole
    line, each string written by py_string — so this finds every name `used_names` would, and besides
    them only words that are not names there (`def`, a parameter, a function's own name), which never
    collide with the runtime's names that imports are chosen from."""
    lines = [line for line in code.split("\n") if not line.lstrip().startswith("#")]
    return set(_IDENTIFIER.findall(_GENERATED_STRING.sub('""', "\n".join(lines))))


def literal_names(value: object) -> set[str]:
    """The names a literal written by py_source uses: its calls' functions and the names in its Raw parts."""
    names: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Position):
            names.add("SOURCE_MAP")
        elif isinstance(item, Raw):
            names |= {item.text} if item.text.isidentifier() else _raw_names(item.text)
        elif isinstance(item, Call):
            names.add(item.func)
            stack.extend(v for _, v in item.arguments)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return names


@lru_cache(maxsize=4096)
def _raw_names(text: str) -> set[str]:
    return used_names(text)
