"""A runner's line back to its `.fsm` position: code generation read backwards through SOURCE_MAP.

Every construct a runner writes from the spec carries `origin=SOURCE_MAP["key"]` (a state, a transition,
an agent, a tool call, a test block and its steps), and SOURCE_MAP maps each key to "file:line:col" of
the spec, relative to the runner's directory. So a line of a runner belongs to the innermost construct
around it that names an origin: a line of a TransitionSpec to that transition, a line of a StateSpec
outside its transitions to the state, a guard function to the transition that calls it (and the comment
above the function with it), an entry of SOURCE_MAP to its own key. The runner is parsed, never imported:
reading a file someone hands over runs none of its code. Lines of the runtime a one-file runner
carries, its imports and its pydantic classes come from no one place of the spec and map to nothing.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

SOURCE_MAP_NAME = "SOURCE_MAP"
# The largest runner read back: a runner is a few times its spec (16 MiB at most), and a file that is not
# one (a log, a device) must not be read without end
MAX_RUNNER_BYTES = 128 * 1024 * 1024


class NotARunner(ValueError):
    """The text is not a runner statewright generated (no SOURCE_MAP), or not Python at all."""


@dataclass(frozen=True)
class RunnerOrigin:
    """Where line `runner_line` of a runner comes from: `key` in its SOURCE_MAP ("review transition 1"),
    the position as the runner wrote it ("../flows/review.fsm:14:9"), and that position's parts with the
    file resolved against the runner's directory."""

    runner_line: int
    key: str
    written: str
    path: str
    line: int
    column: int

    def label(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True)
class _Extent:
    first: int
    last: int
    key: str

    @property
    def size(self) -> int:
        return self.last - self.first


class RunnerMap:
    """The lines of one runner and the spec positions they come from; parsed once, asked any number of times.

    Raises NotARunner when the text does not parse as Python or has no SOURCE_MAP."""

    def __init__(self, text: str, runner_path: str = "") -> None:
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            raise NotARunner(f"not a runner statewright generated: not Python ({e.msg}, line {e.lineno})") from None
        except ValueError as e:  # a NUL character
            raise NotARunner(f"not a runner statewright generated: not Python ({e})") from None
        except (RecursionError, MemoryError):  # nested deeper than Python's parser goes
            raise NotARunner("not a runner statewright generated: nested too deeply to read as Python") from None
        table = _source_map(tree)
        if table is None:
            raise NotARunner(f"no {SOURCE_MAP_NAME}: not a runner statewright generated")
        self.entries, extents = table
        self.runner_path = runner_path
        extents += _constructs(tree) + _functions(tree, text.split("\n"), _references(tree))
        # innermost first: the first extent around a line is the construct it belongs to
        self.extents = sorted((e for e in extents if e.key in self.entries), key=lambda e: e.size)

    def origin(self, line: int) -> RunnerOrigin | None:
        """The spec position of 1-based `line`, or None when that line comes from no one place of the spec.
        The spec's file is resolved against the directory of the runner's path."""
        key = next((e.key for e in self.extents if e.first <= line <= e.last), None)
        return _origin(line, key, self.entries[key], self.runner_path) if key is not None else None


def runner_origin(text: str, line: int, runner_path: str = "") -> RunnerOrigin | None:
    """`RunnerMap(text, runner_path).origin(line)`: one line of one runner."""
    return RunnerMap(text, runner_path).origin(line)


def _origin(runner_line: int, key: str, written: str, runner_path: str) -> RunnerOrigin | None:
    path, line, column = _split_position(written)
    if not path:
        return None
    if runner_path and not os.path.isabs(path):
        path = os.path.normpath(os.path.join(os.path.dirname(runner_path), path))
    return RunnerOrigin(runner_line, key, written, path, line, column)


def _split_position(written: str) -> tuple[str, int, int]:
    """("flows/review.fsm", 14, 9) from "flows/review.fsm:14:9"; ("", 0, 0) when it is not that shape: a
    line and a column are numbers from 1 in ASCII digits, as code generation writes them (a runner handed
    over may hold anything there: "²", a number of thousands of digits, 0)."""
    parts = written.rsplit(":", 2)
    if len(parts) != 3 or not all(_POSITION_NUMBER.fullmatch(part) for part in parts[1:]):
        return "", 0, 0
    return parts[0], int(parts[1]), int(parts[2])


_POSITION_NUMBER = re.compile(r"[1-9][0-9]{0,8}")  # a billion lines is far past any spec (16 MiB at most)


def _source_map(tree: ast.Module) -> tuple[dict[str, str], list[_Extent]] | None:
    """SOURCE_MAP's entries, and the lines of each entry (a line of the table maps to its own key): its
    assignment and the `SOURCE_MAP.update({...})` statements that add the rest of a large table."""
    tables = [table for table in map(_source_map_table, tree.body) if table is not None]
    if not any(assigned for _, assigned in tables):
        return None
    entries: dict[str, str] = {}
    extents = []
    for table, _ in tables:
        for k, v in zip(table.keys, table.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Constant) \
                    and isinstance(v.value, str):
                entries[k.value] = v.value
                extents.append(_Extent(k.lineno, v.end_lineno or v.lineno, k.value))
    return entries, extents


def _source_map_table(node: ast.stmt) -> tuple[ast.Dict, bool] | None:
    """The dict of `SOURCE_MAP = {...}` (True) or of `SOURCE_MAP.update({...})` (False) at `node`."""
    if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == SOURCE_MAP_NAME and isinstance(node.value, ast.Dict)):
        return node.value, True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        if (isinstance(call.func, ast.Attribute) and call.func.attr == "update"
                and isinstance(call.func.value, ast.Name) and call.func.value.id == SOURCE_MAP_NAME
                and len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Dict)):
            return call.args[0], False
    return None


def _origin_key(call: ast.Call) -> str | None:
    """The key of `origin=SOURCE_MAP["key"]` among a call's arguments."""
    for keyword in call.keywords:
        value = keyword.value
        if (keyword.arg == "origin" and isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
                and value.value.id == SOURCE_MAP_NAME and isinstance(value.slice, ast.Constant)
                and isinstance(value.slice.value, str)):
            return value.slice.value
    return None


def _constructs(tree: ast.Module) -> list[_Extent]:
    """The lines of every call that names its origin: StateSpec(...), TransitionSpec(...), ..."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            key = _origin_key(node)
            if key is not None:
                out.append(_Extent(node.lineno, node.end_lineno or node.lineno, key))
    return out


def _references(tree: ast.Module) -> dict[str, str]:
    """Each function the machine's constructs name (`guard=guard_review_0`), and the key of the innermost
    construct that names it."""
    found: dict[str, tuple[int, str]] = {}  # name -> (size of the construct, its key)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        key = _origin_key(node)
        if key is None:
            continue
        size = (node.end_lineno or node.lineno) - node.lineno
        for keyword in node.keywords:
            for name in ast.walk(keyword.value):
                if isinstance(name, ast.Name) and name.id != SOURCE_MAP_NAME:
                    known = found.get(name.id)
                    if known is None or size < known[0]:
                        found[name.id] = (size, key)
    return {name: key for name, (_, key) in found.items()}


def _functions(tree: ast.Module, lines: list[str], references: dict[str, str]) -> list[_Extent]:
    """The lines of each module-level function a construct names, with the comment lines just above it
    (a guard's function is written under `# when ...`, the guard as the spec says it)."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in references:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            while first > 1 and lines[first - 2].lstrip().startswith("#"):
                first -= 1
            out.append(_Extent(first, node.end_lineno or node.lineno, references[node.name]))
    return out
