"""The Python API: one function per thing statewright does. The CLI, the designer's repair loop and the
tests all call these, so every face of the compiler behaves the same.

Heavy modules (pydantic, jinja2, litellm) are imported inside the functions that need them, so that
`check`, `fmt` and `graph` start fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .diagnostics import Diagnostic, Diagnostics, SourceFile
from .grammar import ParseResult, ast, parse_source, parse_text, read_source  # noqa: F401 - parse_text is API

if TYPE_CHECKING:  # imported for annotations only: these modules are heavy or call models
    from .compiler import ir
    from .designer.design import DesignOutcome
    from .designer.llm_merge import MergeReport
    from .runtime.spec import MachineSpec
    from .runtime.testing import TestOutcome
    from .runtime.trace import Trace


_Comment = ast.Comment  # the `ast` field below shadows the module inside the class body


@dataclass
class Compilation:
    """Everything one pass of the front end learned about one file."""

    source: SourceFile | None
    ast: ast.Machine | None
    comments: list[_Comment]
    ir: ir.Machine | None  # when the file has no errors
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.ir is not None and not any(d.severity.value == "error" for d in self.diagnostics)


def check_source(source: SourceFile) -> Compilation:
    """Parse and check one source file; every problem is reported, none raised."""
    from .compiler.check import check_machine
    from .grammar.parser import paused_gc

    with paused_gc():
        parsed = parse_source(source)
        diags = parsed.diagnostics
        ir = None
        if parsed.machine is not None:
            ir = check_machine(source, parsed.machine, diags)
    return Compilation(source, parsed.machine, parsed.comments, ir, diags.sorted())


def check_text(text: str, path: str = "<string>") -> Compilation:
    return check_source(SourceFile(path, text))


def check_bytes(data: bytes, path: str) -> Compilation:
    diags = Diagnostics()
    source = read_source(path, data, diags)
    if source is None:
        return Compilation(None, None, [], None, diags.sorted())
    return check_source(source)


def check_file(path: str | Path) -> Compilation:
    """Check a file on disk. A missing or unreadable file is an OSError for the caller to report."""
    p = Path(path)
    return check_bytes(p.read_bytes(), str(path))


# ---- views of a compiled machine -----------------------------------------------------------------


def dump_ast(parsed: ParseResult) -> dict[str, object]:
    from .compiler.ir_json import ast_to_json

    assert parsed.machine is not None
    return ast_to_json(parsed.machine)


def optimize(comp: Compilation, *, level: int = 1, disabled: Sequence[str] = (),
             log: list[str] | None = None) -> ir.Machine:
    """The IR after the optimization passes (`level` 0 runs none; `disabled` names passes to skip).

    `log`, when given, receives one line per pass saying what it changed."""
    from .compiler.passes import run_passes

    assert comp.ir is not None
    return run_passes(comp.ir, level=level, disabled=disabled, log=log)


def dump_ir(comp: Compilation, *, optimized: bool = False, level: int = 1,
            disabled: Sequence[str] = (), log: list[str] | None = None) -> dict[str, object]:
    from .compiler.ir_json import ir_to_json

    ir = optimize(comp, level=level, disabled=disabled, log=log) if optimized else comp.ir
    return ir_to_json(ir)  # type: ignore[arg-type]


def parse_file(path: str | Path) -> ParseResult:
    """Parse a file without checking it (what `dump --stage ast` shows)."""
    diags = Diagnostics()
    source = read_source(str(path), Path(path).read_bytes(), diags)
    if source is None:
        result = ParseResult(SourceFile(str(path), ""), None)
        result.diagnostics = diags
        return result
    return parse_source(source)


def format_bytes(data: bytes, path: str) -> FormatOutcome:
    """Format source bytes; `text` is None (and diagnostics say why) when the file cannot be formatted."""
    from .compiler.formatter import format_source

    diags = Diagnostics()
    source = read_source(path, data, diags)
    if source is None:
        return FormatOutcome(None, diags.sorted())
    res = format_source(source)
    return FormatOutcome(res.text, list(res.diagnostics))


def format_text(text: str, path: str = "<string>") -> FormatOutcome:
    return format_bytes(text.encode("utf-8"), path)


def unified_diff(old: str, new: str, path: str) -> str:
    from .compiler.formatter import unified_diff as diff

    return diff(old, new, path)


def render_graph(comp: Compilation, fmt: str = "mermaid") -> str:
    from .compiler.graph import render_graph as render

    assert comp.ir is not None
    return render(comp.ir, fmt)  # type: ignore[arg-type]


@dataclass
class FormatOutcome:
    text: str | None
    diagnostics: list[Diagnostic]


# ---- code generation and execution ---------------------------------------------------------------


class RunnerOverwriteError(Exception):
    """The output path holds a file that statewright did not generate."""


def decoding_grammar(fmt: str = "gbnf", *, draft: bool = False) -> str:
    """The grammar as a decoding constraint: "gbnf" (llama.cpp) or "lark" (decoders that take Lark); with
    `draft`, the form a model writes into (no comments; in GBNF, bounded whitespace)."""
    from .grammar.decoding import export_constraint

    return export_constraint(fmt, draft)


def source_sha256(comp: Compilation) -> str:
    import hashlib

    assert comp.source is not None
    return hashlib.sha256(comp.source.text.encode("utf-8")).hexdigest()


def generate_runner(comp: Compilation, *, level: int = 1, disabled: Sequence[str] = ()) -> str:
    """The source of the standalone runner module for a checked machine (optimized unless level 0)."""
    from .compiler.codegen import render_runner

    assert comp.source is not None
    ir = optimize(comp, level=level, disabled=disabled)
    return render_runner(ir, source_text=comp.source.text, source_path=comp.source.path)  # type: ignore[arg-type]


def runner_source_name(spec_path: str | Path, output_path: str | Path | None) -> str:
    """How a runner names its spec: relative to the runner's directory, with `/` separators.

    The name is in the runner's header and in every source position it reports, so it must not depend on
    how the path was typed (`x.fsm`, `./x.fsm`, `/home/me/x.fsm`) nor leak the machine's directories
    into a committed file.
    """
    import os

    base = os.path.dirname(os.path.abspath(output_path)) if output_path else os.getcwd()
    relative = os.path.relpath(os.path.abspath(spec_path), base)
    return Path(relative).as_posix()


def runner_is_current(path: str | Path, text: str) -> bool:
    from .compiler.codegen import runner_is_current as current

    return current(str(path), text)


def write_runner(path: str | Path, text: str, *, force: bool = False) -> None:
    from .compiler.codegen import RunnerOverwriteRefused
    from .compiler.codegen import write_runner as write

    try:
        write(str(path), text, force=force)
    except RunnerOverwriteRefused as e:
        raise RunnerOverwriteError(str(e)) from None


def runtime_machine(comp: Compilation, *, level: int = 1, disabled: Sequence[str] = ()) -> MachineSpec:
    """The machine as the engine runs it (`statewright run`): the IR with interpreted guards."""
    from .compiler.to_runtime import to_runtime

    assert comp.source is not None
    ir = optimize(comp, level=level, disabled=disabled)
    return to_runtime(ir, source_sha256=source_sha256(comp), source_path=comp.source.path)  # type: ignore[arg-type]


def run_tests(comp: Compilation, *, trace_dir: str | None = None, trace_content: bool = False,
              name_filter: str | None = None) -> list[TestOutcome]:
    """Run the machine's test blocks with the scripted provider; one outcome per test block.

    Tests run against the unoptimized machine: they describe the source as written.
    """
    from .compiler.to_runtime import to_runtime
    from .runtime.testing import run_tests as run

    assert comp.ir is not None and comp.source is not None
    machine = to_runtime(comp.ir, source_sha256=source_sha256(comp), source_path=comp.source.path)  # type: ignore[arg-type]
    return list(run(machine, trace_dir=trace_dir, trace_content=trace_content, name_filter=name_filter))


# ---- design and LLM-judged optimization ----------------------------------------------------------


def design(task: str, *, output: str, model: str | None = None, max_repairs: int = 3, optimize: bool = True,
           trace_path: str | None = None, client: Any = None, constrain: str = "auto",
           max_tokens: int | None = None, system_prompt: str | None = None) -> DesignOutcome:
    """Draft a machine from a task description; see designer.design. Returns a DesignOutcome."""
    from .designer import design as run_design

    trace = _open_trace(trace_path)
    try:
        return run_design(task, output=output, model=model, max_repairs=max_repairs, optimize=optimize,
                          client=client, trace=trace, constrain=constrain, max_tokens=max_tokens,
                          system_prompt=system_prompt)
    finally:
        if trace is not None:
            trace.close()


def optimize_with_llm(comp: Compilation, *, model: str, write: bool = False, trace_path: str | None = None,
                      client: Any = None) -> MergeReport:
    """Propose LLM-judged merges for a checked file; returns a MergeReport with a unified diff."""
    from .designer.llm_merge import judge_and_merge

    assert comp.source is not None
    trace = _open_trace(trace_path)
    try:
        report = judge_and_merge(comp.source.text, comp.source.path, model=model, client=client, trace=trace)
    finally:
        if trace is not None:
            trace.close()
    if write and report.ok and report.source != comp.source.text:
        Path(comp.source.path).write_text(report.source, encoding="utf-8")
        report.log.append(f"wrote {comp.source.path}")
    return report


def _open_trace(path: str | None) -> Trace | None:
    if path is None:
        return None
    from .runtime.trace import Trace

    return Trace(path)
