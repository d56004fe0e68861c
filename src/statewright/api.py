"""The Python API: one function per thing statewright does.

The CLI, the language server and the tests all call these, so every face of the compiler behaves the same.

Heavy modules (pydantic, jinja2, litellm) are imported inside the functions that need them, so that
`check`, `fmt` and `graph` start fast.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .compiler.pipeline import Compilation, compile_source
from .diagnostics import Diagnostic, Diagnostics, SourceFile
from .grammar import ParseResult, ast, parse_source, parse_text, read_source  # noqa: F401 - parse_text is API
from .grammar.node import Node

if TYPE_CHECKING:  # imported for annotations only: these modules are heavy or call models
    from collections.abc import Mapping

    from .compiler import ir
    from .compiler.codegen.runtime_package import RuntimePackageState, RuntimeWrite
    from .compiler.codegen.source_map import RunnerMap, RunnerOrigin
    from .compiler.project import Project
    from .designer.design import DesignOutcome
    from .designer.llm_merge import MergeReport
    from .importers import ImportOutcome
    from .runtime.result import RunResult
    from .runtime.spec import MachineSpec
    from .runtime.testing import TestOutcome
    from .runtime.trace import Trace
    from .spec_paths import SpecFiles


def check_source(source: SourceFile, *, location: str | None = None, project: Project | None = None
                 ) -> Compilation:
    """Parse and check one source file; every problem is reported, none raised (the compiler's front door,
    compiler.pipeline.compile_source, as far as the IR). The files its `use` lines name are read from
    disk relative to `location` (its path by default), through `project` when given (which keeps every
    file it compiles: see new_project)."""
    if project is not None:
        return project.compile_source(source, location=location)
    return compile_source(source, location=location)


def check_text(text: str, path: str = "<string>", *, location: str | None = None) -> Compilation:
    return check_source(SourceFile(path, text), location=location)


def new_project(namer: Any = None, reader: Any = None) -> Project:
    """A project: files compiled through it are read and compiled once, however many files use them.
    `namer`, given a used file's location, names it (as diagnostics and generated code show it); `reader`
    reads a file's bytes by its location (the language server reads open documents first)."""
    from .compiler.pipeline import compile_source
    from .compiler.project import Project

    return Project(compile_source, reader=reader, namer=namer)


def check_for_runner(path: str, output: str | None, text: str | None = None) -> Compilation:
    """The file at `path` (or `text`, as the file there reads now: an editor's) checked as `compile -o
    OUTPUT` writes it: it and every file it uses named by their path from the runner's folder
    (runner_source_name), so that no directory of this machine's reaches the runner, whatever path a
    `use` line gives."""
    name = runner_source_name(path, output)
    project = new_project(namer=lambda location: runner_source_name(location, output))
    if text is not None:
        return project.compile_source(SourceFile(name, text), location=str(path))
    data, problems = read_spec(path)
    if data is None:
        return Compilation(None, None, [], None, problems)
    diags = Diagnostics()
    source = read_source(name, data, diags)
    if source is None:
        return Compilation(None, None, [], None, diags.sorted())
    return project.compile_source(source, location=str(path))


def check_files(paths: Sequence[str], project: Project | None = None) -> list[Compilation]:
    """Check files on disk as one project: each file once, and each file they use (directly or through
    others) once. The compilations of `paths` in order, then those of the files only used, in the order
    they were read. A file that cannot be read is a compilation holding its SW1022 diagnostic."""
    project = project if project is not None else new_project()
    given = [check_path(path, project) for path in paths]
    return project_compilations(project, given)


def project_compilations(project: Project, given: Sequence[Compilation]) -> list[Compilation]:
    """`given`, then every other file `project` compiled, each once."""
    seen = {id(c) for c in given}
    return [*given, *(c for c in project.compilations() if id(c) not in seen)]


def used_compilations(comp: Compilation) -> list[Compilation]:
    """The compilations of the files `comp` uses, directly or through others, each once."""
    from .compiler.project import iter_used

    return list(iter_used(comp))


def check_bytes(data: bytes, path: str, project: Project | None = None) -> Compilation:
    diags = Diagnostics()
    source = read_source(path, data, diags)
    del data  # decoded: the bytes are not held while the text is compiled (check_path hands them over)
    if source is None:
        return Compilation(None, None, [], None, diags.sorted())
    return check_source(source, project=project)


def check_file(path: str | Path) -> Compilation:
    """Check a file on disk. A missing or unreadable file is an OSError for the caller to report."""
    from .grammar.parser import read_limited

    with open(path, "rb") as f:
        return check_bytes(read_limited(f), str(path))


def check_path(path: str | Path, project: Project | None = None) -> Compilation:
    """Check a file on disk; one that cannot be read is an SW1022 diagnostic, not an exception."""
    known = project.compilation(str(path)) if project is not None else None
    if known is not None:  # checked already, as a file another one uses
        return known
    data, problems = read_spec(path)
    if data is None:
        return Compilation(None, None, [], None, problems)
    handed = [data]
    del data  # check_bytes holds the only reference, and lets the bytes go once they are decoded
    return check_bytes(handed.pop(), str(path), project)


def read_spec(path: str | Path) -> tuple[bytes | None, list[Diagnostic]]:
    """A spec's bytes, or None and the diagnostic saying why it is not read: SW1022 for a file that cannot
    be read, SW1021 for one over the size limit (found without reading more than the limit, whatever the
    file is: a pipe or a device has no size to ask for)."""
    from .grammar.parser import MAX_FILE_BYTES, file_too_large, read_limited
    from .spec_paths import unreadable_file

    try:
        with open(path, "rb") as f:
            data = read_limited(f)
            if len(data) > MAX_FILE_BYTES:
                size = os.fstat(f.fileno()).st_size
                return None, [file_too_large(str(path), size if size > MAX_FILE_BYTES else None)]
            return data, []
    except OSError as e:
        return None, [unreadable_file(str(path), e)]


def spec_files(paths: Sequence[str], exclude: Sequence[str] = ()) -> SpecFiles:
    """The files PATH arguments stand for: each directory is every `.fsm` file under it (see spec_paths)."""
    from .spec_paths import find_spec_files

    return find_spec_files(paths, exclude)


# ---- views of a compiled machine -----------------------------------------------------------------


def dump_ast(parsed: ParseResult) -> dict[str, object]:
    from .compiler.views.ir_json import ast_to_json

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
    from .compiler.views.ir_json import ir_to_json

    ir = optimize(comp, level=level, disabled=disabled, log=log) if optimized else comp.ir
    return ir_to_json(ir)  # type: ignore[arg-type]


def parse_file(path: str | Path) -> ParseResult:
    """Parse a file without checking it (what `dump --stage ast` shows); a file that cannot be read is an
    SW1022 diagnostic."""
    diags = Diagnostics()
    data, problems = read_spec(path)
    diags.extend(problems)
    source = None if data is None else read_source(str(path), data, diags)
    if source is None:
        result = ParseResult(SourceFile(str(path), ""), None)
        result.diagnostics = diags
        return result
    return parse_source(source)


def format_bytes(data: bytes, path: str) -> FormatOutcome:
    """Format source bytes; `text` is None (and diagnostics say why) when the file cannot be formatted."""
    from .compiler.views.formatter import format_source

    diags = Diagnostics()
    source = read_source(path, data, diags)
    del data  # decoded: the bytes are not held while the text is formatted
    if source is None:
        return FormatOutcome(None, diags.sorted())
    res = format_source(source)
    return FormatOutcome(res.text, list(res.diagnostics))


def format_text(text: str, path: str = "<string>") -> FormatOutcome:
    return format_bytes(text.encode("utf-8"), path)


def unified_diff(old: str, new: str, path: str) -> str:
    from .compiler.views.formatter import unified_diff as diff

    return diff(old, new, path)


def render_graph(comp: Compilation, fmt: str = "mermaid") -> str:
    from .compiler.views.graph import render_graph as render

    assert comp.ir is not None
    return render(comp.ir, fmt)  # type: ignore[arg-type]


class FormatOutcome(Node, frozen=False):
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


RUNTIME_DIR = "statewright_runtime"  # the runtime package a runner imports, beside it (unless standalone)


def generate_runner(comp: Compilation, *, level: int = 1, disabled: Sequence[str] = (), standalone: bool = False,
                    runtime: str | None = None) -> str:
    """The source of the runner module for a checked machine (optimized unless level 0): by default one that
    imports the runtime from the package statewright_runtime/ beside it (write_runtime_package writes it);
    with `standalone`, one file that carries the runtime. `runtime` is the older spelling ("inline" for
    standalone, "module" for the default), kept for one release."""
    from .compiler.codegen import render_runner
    from .grammar.parser import paused_gc

    standalone = _standalone(standalone, runtime)
    assert comp.source is not None
    # A large machine's trees are millions of objects: a collection in the middle of code generation
    # scans them all, again and again (as in parsing: see paused_gc).
    with paused_gc():
        ir = optimize(comp, level=level, disabled=disabled)
        return render_runner(ir, source_text=comp.source.text, source_path=comp.source.path,  # type: ignore[arg-type]
                             runtime="standalone" if standalone else "shared")


def _standalone(standalone: bool, runtime: str | None) -> bool:
    """`standalone`, or what the deprecated `runtime` argument says instead."""
    if runtime is None:
        return standalone
    if runtime not in ("inline", "module"):
        raise ValueError(f"unknown runtime {runtime!r}: pass standalone=True for one file, or nothing")
    import warnings

    warnings.warn(f'runtime="{runtime}" is deprecated: ' + ("pass standalone=True" if runtime == "inline" else
                  "the runtime package beside the runner is the default"), DeprecationWarning, stacklevel=3)
    return runtime == "inline"


def runtime_package_path(runner_path: str | Path) -> Path:
    """Where a runner at `runner_path` finds its runtime: the package statewright_runtime/ beside it."""
    return Path(runner_path).parent / RUNTIME_DIR


def check_runner_path(runner_path: str | Path) -> None:
    """Raise ValueError when a runner that imports the runtime package cannot be written at `runner_path`:
    named as the package, or inside it."""
    path = Path(runner_path)
    if path.name == f"{RUNTIME_DIR}.py" or path.stem == RUNTIME_DIR:
        raise ValueError(f"{runner_path}: {RUNTIME_DIR} is the name of the runtime package written beside the "
                         "runner; name the runner otherwise")
    if path.parent.name == RUNTIME_DIR:
        raise ValueError(f"{runner_path}: a runner cannot go inside the runtime package {RUNTIME_DIR}/; write "
                         "it beside the package")


def check_runtime_package(path: str | Path) -> RuntimePackageState:
    """How the runtime package at `path` compares with the one this statewright writes (`.current`, and a
    `.message` saying what is wrong: missing, not generated, edited by hand, another version or build)."""
    from .compiler.codegen.runtime_package import runtime_package_state

    return runtime_package_state(path)


def write_runtime_package(path: str | Path, *, force: bool = False) -> RuntimeWrite:
    """Write the runtime package statewright_runtime/ to `path` unless it is current already, refusing
    (RunnerOverwriteError, before anything is written) to replace a file statewright did not write, unless
    `force`. The result says whether it was written, what was removed (files of an earlier runtime), what
    was left alone (files statewright did not write), and which runners beside it were generated for
    another runtime (they refuse to import until they are regenerated)."""
    from .compiler.codegen import RunnerOverwriteRefused
    from .compiler.codegen.runtime_package import write_runtime_package as write

    try:
        return write(path, force=force)
    except RunnerOverwriteRefused as e:
        raise RunnerOverwriteError(str(e)) from None


def check_overwrite(path: str | Path, *, force: bool = False) -> None:
    """Raise RunnerOverwriteError if `path` holds a file write_runner would not replace."""
    from .compiler.codegen import RunnerOverwriteRefused
    from .compiler.codegen import check_overwrite as check

    try:
        check(str(path), force=force)
    except RunnerOverwriteRefused as e:
        raise RunnerOverwriteError(str(e)) from None


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


def runner_origin(runner_path: str | Path, line: int) -> RunnerOrigin | None:
    """Where 1-based `line` of a generated runner comes from in its `.fsm` spec (its SOURCE_MAP), the spec's
    path resolved against the runner's directory; None when the line comes from no one place of the spec
    (the runtime a one-file runner carries, imports, type classes). Raises OSError when the file cannot
    be read, and NotARunner (a ValueError) when it is not a runner statewright generated."""
    return runner_map(runner_path).origin(line)


def runner_map(runner_path: str | Path) -> RunnerMap:
    """A generated runner read once, to map any number of its lines back to the spec (`.origin(line)`)."""
    from .compiler.codegen.source_map import MAX_RUNNER_BYTES, NotARunner, RunnerMap
    from .grammar.parser import read_named_file

    data = read_named_file(str(runner_path), MAX_RUNNER_BYTES + 1)  # a regular file, never read without end
    if len(data) > MAX_RUNNER_BYTES:
        raise NotARunner(f"not a runner statewright generated: it has more than {MAX_RUNNER_BYTES:,} bytes")
    return RunnerMap(data.decode("utf-8", errors="replace"), str(runner_path))


def runtime_machine(comp: Compilation, *, level: int = 1, disabled: Sequence[str] = ()) -> MachineSpec:
    """The machine as every face runs it: the machine part of its runner, compiled in memory (and cached
    per source, so loading it again costs nothing)."""
    from .compiler.codegen import load_machine

    assert comp.source is not None
    ir = optimize(comp, level=level, disabled=disabled)
    return load_machine(ir, source_text=comp.source.text, source_path=comp.source.path)  # type: ignore[no-any-return]


def runtime_machine_text(comp: Compilation, *, level: int = 1, disabled: Sequence[str] = ()) -> str:
    """The module `runtime_machine` loads: the machine part of the runner, importing the installed runtime
    (`statewright worker` makes it in a process of its own and loads it without the compiler)."""
    from .compiler.codegen import machine_module_text

    assert comp.source is not None
    ir = optimize(comp, level=level, disabled=disabled)
    return machine_module_text(ir, source_text=comp.source.text, source_path=comp.source.path)


def run_tests(comp: Compilation, *, trace_dir: str | None = None, trace_content: bool = False,
              name_filter: str | None = None, level: int = 1,
              disabled: Sequence[str] = (), otel: Any = None,
              names: Sequence[str] | None = None) -> list[TestOutcome]:
    """Run the machine's test blocks with scripted replies; one outcome per test block.

    `name_filter` keeps the tests whose name contains it or matches it as a glob (`test --filter`);
    `names`, the tests of exactly these names (an editor's "run this test"). Tests run the machine that
    `compile` would write, optimized as `level` and `disabled` say; merged states keep their names, so a
    test means the same at every level. `otel` (an OtelTelemetry) makes each test's run spans and metrics
    too."""
    from .runtime.testing import run_tests as run

    machine = runtime_machine(comp, level=level, disabled=disabled)
    if names is not None:
        wanted = set(names)
        machine = dataclasses.replace(machine, tests=tuple(t for t in machine.tests if t.name in wanted))
    return list(run(machine, trace_dir=trace_dir, trace_content=trace_content, name_filter=name_filter,
                    otel=otel))


# ---- the Python API: a machine loaded from a file ---------------------------------------------------


class CheckError(Exception):
    """A `.fsm` file that does not check. `diagnostics` holds every problem, as `statewright check` shows
    them; the message lists the errors with their positions."""

    def __init__(self, path: str, diagnostics: Sequence[Diagnostic]) -> None:
        from .diagnostics import render_text

        self.path = path
        self.diagnostics = list(diagnostics)
        errors = [d for d in self.diagnostics if d.severity.value == "error"]
        listed = "\n\n".join(render_text(d) for d in errors)
        super().__init__(f"{path} does not check: {len(errors)} error{'s' if len(errors) != 1 else ''}\n\n"
                         f"{listed}")


class Machine:
    """A checked machine, ready to run: `statewright.load("flow.fsm")`.

    It runs what `statewright compile` would write — the machine part of its runner, compiled in memory —
    so a run here, `statewright run`, a test block and a generated runner execute the same code."""

    def __init__(self, compilation: Compilation, *, level: int = 1, disabled: Sequence[str] = ()) -> None:
        if not compilation.ok or compilation.source is None:
            raise CheckError(compilation.source.path if compilation.source else "<unknown>",
                             compilation.diagnostics)
        self.compilation = compilation
        self.level = level
        self.disabled = tuple(disabled)
        self._spec: MachineSpec | None = None

    @property
    def spec(self) -> MachineSpec:
        """The runtime MachineSpec (the `MACHINE` of its runner)."""
        if self._spec is None:
            self._spec = runtime_machine(self.compilation, level=self.level, disabled=self.disabled)
        return self._spec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def path(self) -> str:
        assert self.compilation.source is not None
        return self.compilation.source.path

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """The warnings the file has (a machine with errors does not load)."""
        return list(self.compilation.diagnostics)

    def __repr__(self) -> str:
        return f"<statewright.Machine {self.name!r} from {self.path}>"

    def run(self, inputs: Mapping[str, Any] | None = None, *, trace: Any = None, trace_content: bool = False,
            checkpoint: Any = None, resume: str | None = None, answer: Any = None, run_id: str | None = None,
            model_map: Mapping[str, str] | None = None, workspace: str | None = None, script: Any = None,
            client: Any = None, model_client: str | None = None, tools: Any = None, unsafe_tools: bool = False,
            max_tokens: int | None = None, retries: int | None = None, retry_delay: float | None = None,
            timeout: float | None = None, listeners: Sequence[Any] = (), otel: Any = None,
            at: str | None = None) -> RunResult:
        """Run the machine to its end; a failed run is a RunResult too (see `arun` for the options)."""
        from .runtime.sync import run_sync

        return run_sync(self.arun(  # type: ignore[no-any-return]
            inputs, trace=trace, trace_content=trace_content, checkpoint=checkpoint, resume=resume,
            answer=answer, run_id=run_id, model_map=model_map, workspace=workspace, script=script,
            client=client, model_client=model_client, tools=tools, unsafe_tools=unsafe_tools,
            max_tokens=max_tokens, retries=retries, retry_delay=retry_delay, timeout=timeout, listeners=listeners,
            otel=otel, at=at))

    def resume(self, run_id: str, answer: Any = None, *, checkpoint: Any = None, **options: Any) -> RunResult:
        """Continue the checkpointed run `run_id` — one that waits for a person, with their `answer` (text,
        read as JSON for a typed question, or the value itself), or one that was interrupted. The other
        options are `run`'s. Raises AnswerError when the answer does not fit; the run keeps waiting."""
        return self.run(checkpoint=checkpoint, resume=run_id, answer=answer, **options)

    async def aresume(self, run_id: str, answer: Any = None, *, checkpoint: Any = None,
                      **options: Any) -> RunResult:
        """`resume` on the running event loop."""
        return await self.arun(checkpoint=checkpoint, resume=run_id, answer=answer, **options)

    async def arun(self, inputs: Mapping[str, Any] | None = None, *, trace: Any = None,
                   trace_content: bool = False, checkpoint: Any = None, resume: str | None = None,
                   answer: Any = None, run_id: str | None = None, model_map: Mapping[str, str] | None = None,
                   workspace: str | None = None, script: Any = None, client: Any = None,
                   model_client: str | None = None, tools: Any = None, unsafe_tools: bool = False,
                   max_tokens: int | None = None, retries: int | None = None, retry_delay: float | None = None,
                   timeout: float | None = None, listeners: Sequence[Any] = (), otel: Any = None,
                   at: str | None = None) -> RunResult:
        """Run the machine to its end on the running event loop.

        inputs: the machine's inputs by name. trace: a JSONL file (or an open Trace) to append the run's
        events to; trace_content: include messages and replies. checkpoint: a SQLite file (or an open
        CheckpointStore) written after every transition (a machine that asks a person uses
        .statewright/checkpoints.sqlite unless given one); resume: the id of a checkpointed run to continue;
        answer: with resume, the answer of the person the run waits for; at: the path of the question it
        answers (`investigate[2]/approve`), when the run waits in several places;
        run_id: the id of a new run. model_map: {spec model: model to call}, "*" for any other. workspace:
        where tools work. script: a Script or its JSON form answering every call instead of a model;
        client: a model client; model_client: "litellm" to send every call through litellm, "auto" (the
        default, or $STATEWRIGHT_MODEL_CLIENT) to call OpenAI-compatible models natively. tools: a tool
        registry. unsafe_tools: let std.python and std.shell run unconfined where their bubblewrap jail
        cannot run. max_tokens, retries, retry_delay, timeout: the
        model calls' limits and retry policy. listeners: called with (event, fields) as the run goes.
        otel: OpenTelemetry spans and metrics of the run — True (set up from the OTEL_* environment), a
        TracerProvider (spans to it, metrics to the global MeterProvider), or a
        `statewright.runtime.otel.OtelTelemetry(tracer_provider, meter_provider)`; prompts and replies go
        into spans with trace_content (docs/observability.md).

        Raises CheckpointError when a resume is impossible and AnswerError when an answer does not fit;
        any other problem is in the RunResult (a run that waits for a person has status "waiting")."""
        from .runtime.runner_cli import arun_machine

        return await arun_machine(
            self.spec, inputs, trace=trace, trace_content=trace_content, checkpoint=checkpoint, resume=resume,
            answer=answer, run_id=run_id, model_map=model_map, workspace=workspace, script=script, client=client,
            model_client=model_client, tools=tools, unsafe_tools=unsafe_tools, max_tokens=max_tokens,
            retries=retries, retry_delay=retry_delay, timeout=timeout, listeners=listeners, otel=otel, at=at)

    def test(self, name_filter: str | None = None, *, trace_dir: str | None = None,
             trace_content: bool = False, otel: Any = None) -> list[TestOutcome]:
        """Run the machine's test blocks with their scripted replies; one TestOutcome each (`.passed`);
        `otel` as for `run`."""
        from .runtime.runner_options import runner_telemetry
        from .runtime.testing import run_tests as run

        telemetry, made = runner_telemetry(otel, trace_content)
        try:
            return list(run(self.spec, trace_dir=trace_dir, trace_content=trace_content, name_filter=name_filter,
                            otel=telemetry))
        finally:
            if made:
                telemetry.shutdown()

    def compile(self, path: str | Path, *, force: bool = False, standalone: bool = False,
                runtime: str | None = None) -> Path:
        """Write the machine's runner to `path` and, unless `standalone`, the runtime package
        statewright_runtime/ beside it (what `statewright compile -o PATH [--standalone]` writes). Nothing
        is written when a file statewright did not write is in the way (RunnerOverwriteError), unless
        `force`. `runtime` is the older spelling of `standalone` ("inline"/"module"), kept for one release."""
        assert self.compilation.source is not None
        standalone = _standalone(standalone, runtime)
        if not standalone:
            check_runner_path(path)
        name = runner_source_name(self.compilation.source.path, path)
        comp = self.compilation if name == self.compilation.source.path and not self.compilation.uses else (
            check_for_runner(self.compilation.source.path, str(path), self.compilation.source.text))
        text = generate_runner(comp, level=self.level, disabled=self.disabled, standalone=standalone)
        if not standalone:
            check_overwrite(path, force=force)  # neither is written if either is refused
            write_runtime_package(runtime_package_path(path), force=force)
        write_runner(path, text, force=force)
        return Path(path)


def load(path: str | Path, *, level: int = 1, disabled: Sequence[str] = ()) -> Machine:
    """Check a `.fsm` file and return it as a Machine to run, test or compile.

    Raises CheckError (carrying every diagnostic) when the file does not check, and OSError when it cannot
    be read."""
    return Machine(check_file(path), level=level, disabled=disabled)


def load_text(text: str, path: str = "<string>", *, level: int = 1, disabled: Sequence[str] = ()) -> Machine:
    """`load` for source text (its diagnostics name `path`)."""
    return Machine(check_text(text, path), level=level, disabled=disabled)
# ---- importing other systems' specs --------------------------------------------------------------


def import_bytes(source_format: str, data: bytes, path: str, *, repair: bool = False, bound: int = 2,
                 output: str | None = None) -> ImportOutcome:
    """A MetaAgent FSM (JSON) or an AutoAgent workflow or agent form (XML) as canonical `.fsm` text.

    Literal by default; `repair` bounds back edges with `max bound` and more, each change listed in the
    file's header. Problems in the input come back as diagnostics on it (`text` is None after an error).
    `output`, where the result will be written, lets the header name the input by its path from there
    (without it, by its file name). An agent form whose agents hand the request on is several machines:
    `text` runs those in `files`, which go to a folder beside `output` named after it (`OUT.fsm` runs
    `OUT/NAME.fsm`); write_import writes them all.
    """
    from .importers import import_spec

    return import_spec(source_format, data, path, repair=repair, bound=bound, output=output)


def import_file(source_format: str, path: str | Path, *, repair: bool = False, bound: int = 2,
                output: str | None = None) -> ImportOutcome:
    """Import a file on disk, or for "crewai" a project folder (or its crew.py), read statically: its
    Python is parsed, never imported or run. A missing or unreadable file is an OSError for the caller to
    report; a CrewAI import without PyYAML raises MissingYamlReader (a RuntimeError) saying how to
    install it (`pip install 'statewright[crewai]'`). A file is read up to the size limit only (SW1021)."""
    from .grammar.parser import read_limited
    from .importers import FILE_FORMATS, import_project

    if source_format not in FILE_FORMATS:
        return import_project(source_format, str(path), repair=repair, bound=bound, output=output)
    with open(path, "rb") as f:
        return import_bytes(source_format, read_limited(f), str(path), repair=repair, bound=bound,
                            output=output)


def write_import(outcome: ImportOutcome, output: str | Path) -> list[str]:
    """Write an import to `output`, and the machines it runs (`outcome.files`, an AutoAgent agent form's) to
    their folder beside it, creating the folder; the paths written, `output` first. Nothing is written over a
    file `statewright import` did not write, nor through a symbolic link into the folder: such paths are
    an ImportOverwriteError (a FileExistsError) naming them all, raised before anything is written. Other
    failures are OSErrors."""
    from .importers.writing import ImportInTheWay
    from .importers.writing import write_import as write

    try:
        return write(outcome, str(output))
    except ImportInTheWay as e:
        raise ImportOverwriteError(e.problems) from None


class ImportOverwriteError(FileExistsError):
    """Paths in the way of write_import (files `statewright import` did not write, symbolic links, a file
    where a folder goes), one line each in `problems`; nothing was written."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("nothing was written: " + "; ".join(problems) + " (move them, or write the import "
                         "elsewhere)")


# ---- design and LLM-judged optimization ----------------------------------------------------------


def design(task: str, *, output: str, model: str | None = None, max_repairs: int = 3, optimize: bool = True,
           trace_path: str | None = None, client: Any = None, script: Any = None,
           listeners: Sequence[Any] = (), constrain: str = "auto", max_tokens: int | None = None,
           system_prompt: str | None = None, timeout: float | None = None) -> DesignOutcome:
    """Draft a machine from a task description; see designer.design. Returns a DesignOutcome.

    `script` (a Script, its JSON form, or the path of a JSON script file) answers the designer's calls
    instead of a model — `statewright design --script FILE`; `listeners` hear its events as they happen.
    `constrain` holds drafts to the grammar at decoding time (auto, grammar, none); `timeout`, the seconds
    each designer call may take (a slow local model)."""
    from .designer import design as run_design

    client = _scripted_client(script) if script is not None else client
    events = _events(trace_path, listeners)
    try:
        return run_design(task, output=output, model=model, max_repairs=max_repairs, optimize=optimize,
                          client=client, trace=events, constrain=constrain, max_tokens=max_tokens,
                          system_prompt=system_prompt, timeout=timeout)
    finally:
        if events is not None:
            events.close()


def optimize_with_llm(comp: Compilation, *, model: str, write: bool = False, trace_path: str | None = None,
                      client: Any = None, script: Any = None, listeners: Sequence[Any] = ()) -> MergeReport:
    """Propose LLM-judged merges for a checked file; returns a MergeReport with a unified diff."""
    from .designer.llm_merge import judge_and_merge

    assert comp.source is not None
    client = _scripted_client(script) if script is not None else client
    events = _events(trace_path, listeners)
    try:
        report = judge_and_merge(comp.source.text, comp.source.path, model=model, client=client, trace=events)
    finally:
        if events is not None:
            events.close()
    if write and report.ok and report.source != comp.source.text:
        Path(comp.source.path).write_text(report.source, encoding="utf-8")
        report.log.append(f"wrote {comp.source.path}")
    return report


class ScriptFileError(ValueError):
    """A `--script` file that cannot be read or does not have the documented shape."""


def read_script(path: str | Path) -> Any:
    """A JSON script file as a Script (see docs/execution.md for the format)."""
    from .runtime.scripted import Script, ScriptError

    try:
        return Script.from_file(str(path), f"the script {path}")
    except ScriptError as e:
        raise ScriptFileError(str(e)) from None


def _scripted_client(script: Any) -> Any:
    from .runtime.scripted import Script, ScriptedClient

    if isinstance(script, (str, Path)):
        script = read_script(script)
    elif not isinstance(script, Script):
        script = Script.from_json(script)
    return ScriptedClient(script)


class _DesignEvents:
    """Where a designer session's events go: its trace file, if any, and listeners (progress on a terminal).
    `llm_request` (a call starting) is for people watching; the trace records each call once, when done."""

    def __init__(self, trace: Trace | None, listeners: Sequence[Any]) -> None:
        self.trace = trace
        self.listeners = tuple(listeners)
        self.content = trace.content if trace is not None else False

    def emit(self, event: str, **fields: Any) -> None:
        if self.trace is not None and event != "llm_request":
            self.trace.emit(event, **fields)
        for listener in self.listeners:
            listener(event, fields)

    def close(self) -> None:
        if self.trace is not None:
            self.trace.close()


def _events(trace_path: str | None, listeners: Sequence[Any]) -> _DesignEvents | None:
    trace = _open_trace(trace_path)
    if trace is None and not listeners:
        return None
    return _DesignEvents(trace, listeners)


def _open_trace(path: str | None) -> Trace | None:
    if path is None:
        return None
    from .runtime.trace import Trace

    return Trace(path)
