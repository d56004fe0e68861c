"""Running what the editor shows: code lenses, test runs, runners written, a runner's line traced back.

A test block runs, all of a file's tests run, the runner is written from the file (on demand or on save),
and a runner's line leads back to its `.fsm` position. Each goes through the API, as the CLI does: a test block runs through `api.run_tests` (what
`statewright test` runs), a runner is written by `api.Machine.compile` (what `statewright compile -o`
writes), and a runner's line is read back through `api.runner_origin` (what `statewright source-map`
prints). The functions here are synchronous and do the work; the server calls them off its event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types

from .. import api
from ..grammar import ast
from .analysis import Analysis
from .positions import LineIndex

RUN_TEST_COMMAND = "statewright.runTest"
RUN_TESTS_COMMAND = "statewright.runTests"
COMPILE_COMMAND = "statewright.compileRunner"
RUNNER_SOURCE_COMMAND = "statewright.runnerSource"
TEST_SOURCE = "statewright test"  # the source of the diagnostics a failed test block leaves
DEFAULT_RUNNER_PATH = "{dir}/{stem}_runner.py"
OLD_RUNTIME_SETTING = {"inline": True, "module": False}  # runnerRuntime, runnerStandalone's older spelling


@dataclass
class EditorSettings:
    """What a client configures (initializationOptions, or `statewright` in workspace/didChangeConfiguration)."""

    compile_on_save: bool = False
    runner_path: str = DEFAULT_RUNNER_PATH  # {dir}: the spec's directory, {stem}: its name without .fsm
    runner_standalone: bool = False  # one file, rather than a runner and the runtime package beside it

    def update(self, options: Any) -> None:
        """Take the settings `options` names (a dict; unknown keys and wrongly typed values are ignored)."""
        if not isinstance(options, dict):
            return
        if isinstance(options.get("compileOnSave"), bool):
            self.compile_on_save = options["compileOnSave"]
        if isinstance(options.get("runnerPath"), str) and options["runnerPath"].strip():
            self.runner_path = options["runnerPath"].strip()
        if isinstance(options.get("runnerStandalone"), bool):
            self.runner_standalone = options["runnerStandalone"]
        elif options.get("runnerRuntime") in OLD_RUNTIME_SETTING:  # kept for one release
            self.runner_standalone = OLD_RUNTIME_SETTING[options["runnerRuntime"]]


class CannotRun(Exception):
    """A run or a compile the document does not allow; the message says why, for the editor to show.
    `has_errors`: because the document does not check (its diagnostics already show why)."""

    def __init__(self, message: str, *, has_errors: bool = False) -> None:
        super().__init__(message)
        self.has_errors = has_errors


# ---- code lenses -------------------------------------------------------------------------------------


def code_lenses(a: Analysis, uri: str) -> list[types.CodeLens]:
    """Over the machine: run all its tests, compile its runner; over each test block: run that test.
    Shown while the text parses (a file with errors shows them, and a run explains it cannot start)."""
    machine = a.compilation.ast
    if machine is None:
        return []
    tests = machine.of(ast.TestDecl)
    header = _range(a, machine.span.start, machine.name.span.end)
    lenses = []
    if tests:
        count = f"{len(tests)} tests" if len(tests) != 1 else "the test"
        lenses.append(_lens(header, f"▶ Run {count}", RUN_TESTS_COMMAND, [uri]))
    lenses.append(_lens(header, "Compile the runner", COMPILE_COMMAND, [uri]))
    for test in tests:
        lenses.append(_lens(_test_header(a, test), "▶ Run test", RUN_TEST_COMMAND, [uri, test.name.value]))
    return lenses


def _lens(where: types.Range, title: str, command: str, arguments: list[Any]) -> types.CodeLens:
    return types.CodeLens(range=where, command=types.Command(title=title, command=command, arguments=arguments))


def _range(a: Analysis, start: int, end: int) -> types.Range:
    (l1, c1), (l2, c2) = a.lines.position(start), a.lines.position(end)
    return types.Range(types.Position(l1, c1), types.Position(l2, c2))


def _test_header(a: Analysis, test: ast.TestDecl) -> types.Range:
    """`test "name"`: where a test block's lens and its failure go."""
    return _range(a, test.span.start, test.name.span.end)


# ---- test blocks ---------------------------------------------------------------------------------------


@dataclass
class TestRun:
    """What running a document's test blocks gave: the outcomes as JSON for the command's caller, the
    failures as diagnostics over their test blocks, and one line for the editor to show."""

    __test__ = False  # not a pytest test class

    results: list[dict[str, Any]]
    diagnostics: list[types.Diagnostic]
    summary: str
    failed: int


def run_tests(a: Analysis, name: str | None = None) -> TestRun:
    """Run the document's test blocks (or the one called `name`) as `statewright test` runs them."""
    _require_checked(a, "its tests cannot run")
    machine = a.compilation.ast
    assert machine is not None
    blocks = {t.name.value: t for t in machine.of(ast.TestDecl)}
    if name is not None and name not in blocks:
        raise CannotRun(f"there is no test block named {name!r} in {_file_name(a)}")
    if not blocks:
        raise CannotRun(f"{_file_name(a)} has no test blocks")
    outcomes = api.run_tests(a.compilation, names=[name] if name is not None else None)
    results, diagnostics = [], []
    for outcome in outcomes:
        where = _test_header(a, blocks[outcome.name])
        results.append({"name": outcome.name, "passed": outcome.passed, "messages": list(outcome.messages),
                        "path": list(outcome.actual_path), "range": _range_json(where)})
        if not outcome.passed:
            lines = [f"test {outcome.name!r} failed", *outcome.messages]
            if outcome.expected_path is not None and outcome.expected_path != outcome.actual_path:
                lines.append(f"expected path: {' -> '.join(outcome.expected_path)}")
                lines.append(f"actual path:   {' -> '.join(outcome.actual_path)}")
            diagnostics.append(types.Diagnostic(range=where, message="\n".join(lines), source=TEST_SOURCE,
                                                severity=types.DiagnosticSeverity.Error))
    failed = sum(not o.passed for o in outcomes)
    passed = len(outcomes) - failed
    if name is not None:
        summary = f"test {name!r} {'passed' if not failed else 'failed'}"
    else:
        summary = f"{passed} passed, {failed} failed"
    return TestRun(results, diagnostics, f"{_file_name(a)}: {summary}", failed)


def _range_json(r: types.Range) -> dict[str, dict[str, int]]:
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}


# ---- the runner -----------------------------------------------------------------------------------------


def runner_path(spec_path: str, pattern: str) -> Path:
    """Where a spec's runner goes: `pattern` with {dir} and {stem} filled in, relative to the spec's directory."""
    spec = Path(spec_path)
    stem = spec.name[: -len(".fsm")] if spec.name.endswith(".fsm") else spec.stem
    filled = pattern.replace("{dir}", str(spec.parent)).replace("{stem}", stem)
    target = Path(filled)
    return target if target.is_absolute() else spec.parent / target


def compile_runner(a: Analysis, settings: EditorSettings) -> Path:
    """Write the document's runner (the editor's text, checked) where the settings say: what
    `statewright compile SPEC -o RUNNER [--standalone]` writes."""
    if urlparse(a.uri).scheme != "file":
        raise CannotRun("save the file first: a runner is written beside its .fsm file")
    _require_checked(a, "no runner was written")
    target = runner_path(a.path, settings.runner_path)
    if target.resolve() == Path(a.path).resolve():
        raise CannotRun(f"the runner path {target} is the spec itself: change statewright.runnerPath")
    if not settings.runner_standalone:
        try:
            api.check_runner_path(target)
        except ValueError as e:
            raise CannotRun(f"{e}: change statewright.runnerPath") from None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # a runnerPath such as "build/{stem}.py"
        return api.Machine(a.compilation).compile(target, standalone=settings.runner_standalone)
    except api.RunnerOverwriteError as e:
        raise CannotRun(str(e)) from None
    except OSError as e:
        raise CannotRun(f"cannot write {e.filename or target}: {e.strerror or e}") from None


def _require_checked(a: Analysis, consequence: str) -> None:
    errors = [d for d in a.compilation.diagnostics if d.severity.value == "error"]
    if errors:
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        raise CannotRun(f"{_file_name(a)} has {count} ({errors[0].code} first): {consequence}", has_errors=True)


def _file_name(a: Analysis) -> str:
    return os.path.basename(a.path) or a.path


# ---- a runner's line back to the spec ----------------------------------------------------------------------


def runner_source(runner_uri: str, line: int, encoding: str = "utf-16") -> types.Location | None:
    """The `.fsm` position that 0-based `line` of the runner at `runner_uri` was generated from, or None when
    it comes from no one place of the spec. Raises CannotRun when the file is no runner or cannot be read.
    The position's character counts the code units the client and server agreed on (`encoding`)."""
    parsed = urlparse(runner_uri)
    if parsed.scheme != "file":
        raise CannotRun(f"{runner_uri} is not a file: a runner is read from disk")
    path = unquote(parsed.path)
    from ..compiler.codegen.source_map import NotARunner
    from ..grammar.parser import read_named_file

    try:
        found = api.runner_origin(path, line + 1)
    except OSError as e:
        raise CannotRun(f"cannot read {path}: {e.strerror or e}") from None
    except NotARunner as e:
        raise CannotRun(f"{os.path.basename(path)}: {e}") from None
    if found is None:
        return None
    spec_line, character = found.line - 1, found.column - 1
    try:  # the column counts characters; the client counts code units
        text = read_named_file(found.path).decode("utf-8")  # what the runner names: a regular file, bounded
        lines = LineIndex(text, encoding)
        spec_line, character = lines.position(lines.offset(spec_line, 0) + character)
    except (OSError, UnicodeDecodeError):
        pass  # the spec moved or is unreadable: its position as the runner wrote it
    at = types.Position(spec_line, character)
    spec = Path(found.path)
    try:
        spec = spec.resolve()
    except (OSError, ValueError):  # a name no file has (a NUL): the runner's word for it, made absolute
        spec = spec.absolute()
    return types.Location(uri=spec.as_uri(), range=types.Range(at, at))
