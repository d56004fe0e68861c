"""Commands that run machines: run, resume, batch, test, worker, status and trace."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..runtime.arguments import durability_option, positive_argument
from .common import (
    EXIT_INPUT,
    EXIT_OK,
    OTEL_HELP,
    UsageError,
    add_color_option,
    add_pass_options,
    add_paths,
    add_run_id,
    add_temporal_options,
    color_for,
    compile_or_report,
    one_file,
    plural,
    print_diagnostics,
    safe_text,
    spec_files,
    temporal_call,
    write_err,
    write_out,
)

if TYPE_CHECKING:
    from ..api import Compilation
    from ..diagnostics import Diagnostic


def setup_run(p: argparse.ArgumentParser) -> None:
    p.usage = "statewright run [--color WHEN] PATH [RUNNER OPTION]..."
    p.description = "Check a machine and run it with real models."
    p.epilog = ("The options after PATH are those of a generated runner: `statewright run PATH --help` lists "
                "them, with the machine's inputs.")
    p.add_argument("path", metavar="PATH", help="the .fsm file of the machine to run")
    p.add_argument("runner_args", nargs=argparse.REMAINDER, metavar="RUNNER OPTION",
                   help="--input NAME=VALUE, --trace FILE, --checkpoint DB, ... (see below)")
    add_color_option(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    path = one_file(args.path, "run")
    machine = _checked_machine(path, args)
    if machine is None:
        return EXIT_INPUT
    from ..runtime.runner_cli import main as runner_main

    prog = getattr(args, "prog", None) or f"statewright run {safe_text(path)}"
    return runner_main(machine, args.runner_args, prog=prog)


def _checked_machine(path: str, args: argparse.Namespace) -> Any:
    """The machine of the .fsm file at `path`, to run; None (its problems printed) when it does not check."""
    from .. import api

    comp = compile_or_report(path, args)
    return api.runtime_machine(comp) if comp.ok else None


def setup_resume(p: argparse.ArgumentParser) -> None:
    p.usage = ("statewright resume [--color WHEN] RUN_ID [--checkpoint DB] [--answer TEXT] [RUNNER OPTION]...\n"
               "       statewright resume RUN_ID --temporal HOST:PORT --answer TEXT [--at PATH] [--by NAME] "
               "[--namespace NS]")
    p.description = ("Continue a checkpointed run — one that waits for a person's answer, or one that was "
                     "interrupted — with the .fsm file it was started from; with --temporal, send the answer "
                     "to a run that waits on a Temporal cluster.")
    p.add_argument("run_id", metavar="RUN_ID", help="the run to continue")
    p.add_argument("--checkpoint", metavar="DB",
                   help="the checkpoint database of the run (default: .statewright/checkpoints.sqlite)")
    p.add_argument("--answer", metavar="TEXT",
                   help="the answer of the person the run waits for (read as JSON when the question's type "
                        "is not text and it parses); a bad answer is an error and the run keeps waiting")
    p.add_argument("--temporal", metavar="HOST:PORT", help="the Temporal service the run is on")
    p.add_argument("--namespace", metavar="NS", default="default", help="with --temporal: the namespace")
    p.add_argument("--at", "--state", dest="state", metavar="PATH",
                   help="the question the answer is for, by its path (a state, or investigate[2]/approve in a "
                        "machine the run runs), when the run waits in several places")
    p.add_argument("--by", metavar="NAME", help="with --temporal: who answers (recorded in the trace)")
    p.add_argument("runner_args", nargs=argparse.REMAINDER, metavar="RUNNER OPTION",
                   help="--trace FILE, --model-map OLD=NEW, ... (those of `statewright run`)")
    add_color_option(p)
    p.set_defaults(func=cmd_resume)


def cmd_resume(args: argparse.Namespace) -> int:
    """`statewright resume RUN_ID`: continue a checkpointed run with the machine it was started with, or
    (with --temporal) send the answer to a run that waits on a Temporal cluster."""
    from ..runtime.checkpoint import CheckpointError, CheckpointStore
    from ..runtime.runner_options import DEFAULT_CHECKPOINT

    _resume_own_options(args)
    if args.temporal:
        if args.answer is None:
            raise UsageError("resume --temporal sends a person's answer: give --answer TEXT (a run on the "
                             "cluster goes on by itself after a crash)")
        if args.runner_args or args.checkpoint:
            raise UsageError("resume --temporal takes only --answer, --at, --by and --namespace")
        from ..runtime.runner_temporal import runner_temporal_dispatch

        return runner_temporal_dispatch(None, "resume", args, "statewright resume")
    if args.by:
        raise UsageError("--by is for a run on a Temporal cluster (with --temporal HOST:PORT)")

    db = args.checkpoint or DEFAULT_CHECKPOINT
    if not os.path.exists(db):
        raise UsageError(f"no checkpoint database {db}" + ("" if args.checkpoint else
                         " (the default; name another with --checkpoint DB)"))
    try:
        store = CheckpointStore(db)
        try:
            snapshot = store.load(args.run_id)
        finally:
            store.close()
    except CheckpointError as exc:
        raise UsageError(str(exc)) from None
    if snapshot is None:
        raise UsageError(f"no run '{args.run_id}' in {db} (`statewright run PATH --checkpoint {db} "
                         "--list-runs` lists them)")
    path = snapshot.head.source_path
    if not path:
        raise UsageError(f"run '{args.run_id}' does not record its machine's file; resume it with "
                         f"`statewright run PATH --checkpoint {db} --resume {args.run_id}`")
    if not os.path.isfile(path):
        raise UsageError(f"run '{args.run_id}' was started from {path}, which is not there from here; resume "
                         f"it with `statewright run PATH --checkpoint {db} --resume {args.run_id}`")
    forwarded = ["--checkpoint", db, "--resume", args.run_id]
    if args.answer is not None:
        forwarded += ["--answer", args.answer]
    if args.state:
        forwarded += ["--at", args.state]
    script = snapshot.head.options.get("script")
    if script and "--script" not in args.runner_args:  # a scripted run goes on answered by its script
        if not os.path.isfile(script):
            raise UsageError(f"run '{args.run_id}' was started with --script {script}, which is not there from "
                             "here; give the script again with --script FILE")
        forwarded += ["--script", script]
    args.path, args.runner_args = path, [*forwarded, *args.runner_args]
    args.prog = f"statewright resume {safe_text(args.run_id)}"
    return cmd_run(args)


def _resume_own_options(args: argparse.Namespace) -> None:
    """The runner options after RUN_ID are gathered whole, so resume's own options may sit among them
    (`resume ID --answer yes --temporal H:P`): take those back out, in any order."""
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for flag in ("--checkpoint", "--answer", "--temporal", "--namespace", "--state", "--by"):
        own.add_argument(flag, dest=flag[2:])
    own.add_argument("--at", dest="state")
    found, rest = own.parse_known_args(args.runner_args)
    for name, value in vars(found).items():
        if value is not None:
            setattr(args, name, value)
    args.runner_args = rest


def setup_batch(p: argparse.ArgumentParser) -> None:
    p.usage = "statewright batch [--color WHEN] PATH [BATCH OPTION]..."
    p.description = "Check a machine and run it over many inputs concurrently."
    p.epilog = ("The options after PATH are those of a generated runner's `batch` command: "
                "`statewright batch PATH --help` lists them.")
    p.add_argument("path", metavar="PATH", help="the .fsm file of the machine to run")
    p.add_argument("runner_args", nargs=argparse.REMAINDER, metavar="BATCH OPTION",
                   help="the inputs file, concurrency and the rest (see below)")
    add_color_option(p)
    p.set_defaults(func=cmd_batch)


def cmd_batch(args: argparse.Namespace) -> int:
    path = one_file(args.path, "batch")
    machine = _checked_machine(path, args)
    if machine is None:
        return EXIT_INPUT
    from ..runtime.runner_cli import main as runner_main

    return runner_main(machine, ["batch", *args.runner_args], batch_prog=f"statewright batch {safe_text(path)}")


def setup_test(p: argparse.ArgumentParser) -> None:
    add_paths(p, "+", "a .fsm file, or a directory: every .fsm file under it")
    p.add_argument("--trace", metavar="DIR", help="write one trace file per test block into DIR")
    p.add_argument("--trace-content", action="store_true", help="include messages and replies in traces")
    p.add_argument("--filter", metavar="TEXT",
                   help="run only the tests whose name contains TEXT (or matches it as a glob); "
                        "matching none is an error")
    p.add_argument("--otel", action="store_true", help=OTEL_HELP)
    add_pass_options(p)
    add_temporal_options(p, required=False)
    durability_option(p)
    add_color_option(p)
    p.set_defaults(func=cmd_test)


def cmd_test(args: argparse.Namespace) -> int:
    files, problems = spec_files(args)
    print_diagnostics(problems, args)
    declared: list[tuple[str, str]] = []  # (test name, file) of every test block, for a filter that matches none
    telemetry = telemetry_for(args)
    try:
        return _test_files(args, files, problems, declared, telemetry)
    finally:
        if telemetry is not None:
            telemetry.shutdown()


def _test_files(args: argparse.Namespace, files: list[str], problems: Sequence[Diagnostic],
                declared: list[tuple[str, str]], telemetry: Any) -> int:
    from .. import api
    from ..diagnostics import paint
    from ..runtime.runner_options import RunnerUsageError, trace_directory
    from ..runtime.testing import format_outcome

    try:
        trace_directory(args.trace)
    except RunnerUsageError as exc:
        raise UsageError(str(exc)) from None
    color = color_for(args, sys.stdout)
    passed = failed = 0
    broken = len(problems)  # directories that could not be read
    project, shown = api.new_project(), set[int]()  # each file checked and reported once, however many use it
    for path in files:
        comp = compile_or_report(path, args, project, shown)
        if not comp.ok or comp.ir is None:
            broken += 1  # its diagnostics are printed; its tests cannot run
            continue
        declared.extend((t.name, path) for t in comp.ir.tests)
        if args.temporal:
            outcomes = _temporal_tests(comp, args, telemetry)
        else:
            outcomes = api.run_tests(comp, trace_dir=args.trace, trace_content=args.trace_content,
                                     name_filter=args.filter, level=args.opt_level, disabled=args.no_pass,
                                     otel=telemetry)
        for outcome in outcomes:
            if outcome.passed:
                passed += 1
            else:
                failed += 1
            line = format_outcome(outcome)
            for word, style in (("PASS", "ok"), ("FAIL", "error")):
                if line.startswith(word):
                    line = paint(word, style, color) + line[len(word):]
            write_out(line)
    unmatched = bool(args.filter) and passed + failed == 0
    if broken:
        write_err(f"{plural(broken, 'file')} did not check; {'its' if broken == 1 else 'their'} tests did not run")
    if unmatched:
        if declared:
            names = ", ".join(f"'{name}' ({path})" for name, path in declared[:20])
            more = f" and {len(declared) - 20} more" if len(declared) > 20 else ""
            write_err(f"statewright: error: no test matches --filter {args.filter!r}; the tests are: {names}{more}")
        else:
            write_err(f"statewright: error: no test matches --filter {args.filter!r}: there are no test blocks")
    color = color_for(args, sys.stderr)
    write_err(f"{paint(f'{passed} passed', 'ok', color and passed > 0 and not failed)}, "
         f"{paint(f'{failed} failed', 'error', color and failed > 0)}")
    return EXIT_INPUT if failed or broken or unmatched else EXIT_OK


def setup_worker(p: argparse.ArgumentParser) -> None:
    p.description = ("Serve machines' runs from a Temporal cluster until SIGTERM or Ctrl-C: every model, verifier "
                     "and tool call of a run is an activity this worker (or another) performs.")
    add_paths(p, "+", "a .fsm file, or a directory: every .fsm file under it")
    add_temporal_options(p, required=True)
    p.add_argument("--concurrency", type=positive_argument, default=64, metavar="N",
                   help="model and tool calls this worker makes at once (default 64)")
    p.add_argument("--unsafe-tools", action="store_true",
                   help="let std.python and std.shell run unconfined where their bubblewrap jail cannot run")
    p.add_argument("--model-client", choices=("auto", "litellm"), metavar="auto|litellm",
                   help="litellm: every model call through litellm; auto: OpenAI-compatible models over "
                        "statewright's own HTTP client, others through litellm (default: "
                        "$STATEWRIGHT_MODEL_CLIENT, else auto)")
    p.add_argument("--otel", action="store_true", help=OTEL_HELP)
    p.add_argument("--trace-content", action="store_true", help="with --otel: prompts and replies in the spans")
    add_color_option(p)
    # the worker's own set-up, in a process of its own (see cmd_worker)
    p.add_argument("--set-up-only", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace) -> int:
    """Check the files and load their machines, then serve them. The checking runs in a child process
    (`--set-up-only`), which prints the diagnostics and hands back each machine's module (the machine part
    of its runner, as `run` loads it); this process loads those and never imports the compiler: a worker
    serving for days does not keep the grammar, the checks and code generation it used once."""
    if args.set_up_only:
        return _write_served_modules(args)
    from ..compiler.codegen.load import load_machine_module
    from ..runtime.runner_temporal import serve_on_temporal

    modules = _served_modules(args)
    if isinstance(modules, int):
        return modules
    machines = [load_machine_module(text, path).MACHINE for path, text in modules]
    del modules
    return temporal_call(lambda address: serve_on_temporal(
        machines, address, task_queue=args.task_queue, namespace=args.namespace, concurrency=args.concurrency,
        unsafe_tools=args.unsafe_tools, model_client=args.model_client, otel=telemetry_for(args)),
        args.temporal)


def _served_modules(args: argparse.Namespace) -> list[tuple[str, str]] | int:
    """The (source path, module text) of each machine the worker serves, from the set-up process; its exit
    status when it fails (its diagnostics are on stderr already)."""
    import json
    import subprocess

    command = [sys.executable, "-m", "statewright", "worker", "--set-up-only", "--temporal", args.temporal,
               "--color", args.color, *(f"--exclude={pattern}" for pattern in args.exclude), "--", *args.paths]
    # the child imports what this process imports: its module path, even where a program set it itself
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry)}
    done = subprocess.run(command, stdout=subprocess.PIPE, env=env, check=False)
    if done.returncode != EXIT_OK:
        return done.returncode
    return [(str(entry["path"]), str(entry["text"])) for entry in json.loads(done.stdout)]


def _write_served_modules(args: argparse.Namespace) -> int:
    """`worker --set-up-only`: check every file (diagnostics to stderr) and write, as JSON to stdout, the
    module of each machine served — optimized (what `run` and `test` start) and as written (what they start
    with -O0) — or exit 1 as `check` does."""
    import json

    modules = _served_machine_modules(args)
    if modules is None:
        return EXIT_INPUT
    sys.stdout.write(json.dumps([{"path": path, "text": text} for path, text in modules]))
    return EXIT_OK


def _served_machine_modules(args: argparse.Namespace) -> list[tuple[str, str]] | None:
    """Each machine's (source path, module text); None, with the diagnostics printed, when a file does not
    check or there is none."""
    from .. import api

    files, problems = spec_files(args)
    print_diagnostics(problems, args)
    modules = []
    project, shown = api.new_project(), set[int]()
    for path in files:
        comp = compile_or_report(path, args, project, shown)
        if not comp.ok:
            return None
        assert comp.source is not None
        modules += [(comp.source.path, api.runtime_machine_text(comp)),
                    (comp.source.path, api.runtime_machine_text(comp, level=0))]
    if problems or not modules:
        if not problems:
            write_err("statewright worker: no .fsm files to serve")
        return None
    return modules


def setup_status(p: argparse.ArgumentParser) -> None:
    p.description = ("Show what a run on a Temporal cluster is doing: its state, path and usage, its result, or "
                     "the answer it waits for.")
    add_run_id(p)
    p.add_argument("--trace", metavar="FILE", help="also write the run's trace so far to FILE (when it was "
                                                   "started with a trace)")
    p.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    from ..runtime.runner_temporal import runner_temporal_dispatch

    return runner_temporal_dispatch(None, "status", args, "statewright status")


def _temporal_tests(comp: Compilation, args: argparse.Namespace, telemetry: Any = None) -> list:  # type: ignore[type-arg]
    """A spec's test blocks run on the cluster: each a workflow carrying its scripted replies."""
    from .. import api
    from ..runtime.runner_temporal import run_tests_on_temporal

    machine = api.runtime_machine(comp, level=args.opt_level, disabled=args.no_pass)  # as locally
    outcomes: list = []  # type: ignore[type-arg]

    def call(address: str) -> int:
        outcomes.extend(run_tests_on_temporal(machine, address, task_queue=args.task_queue,
                                              namespace=args.namespace, trace_dir=args.trace,
                                              trace_content=args.trace_content, name_filter=args.filter,
                                              otel=telemetry, durability=args.durability))
        return EXIT_OK

    if temporal_call(call, args.temporal) != EXIT_OK:
        raise UsageError("the tests could not run on the cluster")
    return outcomes


def setup_trace(p: argparse.ArgumentParser) -> None:
    tsub = p.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    tsub.required = True
    t = tsub.add_parser("show", help="print a readable timeline of a trace with totals")
    t.add_argument("file", metavar="FILE")
    t.set_defaults(func=cmd_trace)
    e = tsub.add_parser("export", help="send a trace to an OpenTelemetry collector as spans (docs/observability.md)",
                        description="Send a recorded trace to an OpenTelemetry collector (OTLP over HTTP) as the "
                                    "spans its run would have sent live, at the times it recorded.")
    e.add_argument("file", metavar="FILE")
    e.add_argument("--otlp", metavar="URL", help="the collector: its base URL (http://HOST:4318) or its "
                                                 "/v1/traces endpoint (default: OTEL_EXPORTER_OTLP_ENDPOINT)")
    e.add_argument("--trace-content", action="store_true",
                   help="send the messages, replies and tool arguments the trace holds (left out by default)")
    e.set_defaults(func=cmd_trace_export)


def cmd_trace(args: argparse.Namespace) -> int:
    from ..trace_show import render_trace

    try:
        write_out(render_trace(args.file))
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e.strerror or e}") from None
    except ValueError as e:
        write_err(f"error: {safe_text(args.file)} is not a statewright trace: {safe_text(e)}")
        return EXIT_INPUT
    return EXIT_OK


def cmd_trace_export(args: argparse.Namespace) -> int:
    from ..trace_export import TraceExportError, export_trace

    try:
        report = export_trace(args.file, args.otlp, content=args.trace_content)
    except OSError as e:
        raise UsageError(f"cannot read {safe_text(args.file)}: {safe_text(e.strerror or e)}") from None
    except ValueError as e:
        write_err(f"error: {safe_text(args.file)} is not a statewright trace: {safe_text(e)}")
        return EXIT_INPUT
    except TraceExportError as e:
        write_err(f"statewright: error: {safe_text(e)}")
        return EXIT_INPUT
    lines = ", ".join(str(number) for number in report.left_out) + (", ..." if report.unreadable > 20 else "")
    left_out = (f"; {plural(report.unreadable, 'event')} not as a run records it, left out "
                f"({'line' if report.unreadable == 1 else 'lines'} {lines})" if report.unreadable else "")
    write_err(f"sent {report.spans} spans of {plural(report.runs, 'run segment')} ({plural(report.traces, 'trace')}, "
              f"{report.events} events{left_out})")
    return EXIT_OK


def telemetry_for(args: argparse.Namespace) -> Any:
    """The OpenTelemetry a command asks for (`--otel`, or the OTLP endpoint variable), or None."""
    from ..runtime.otel_setup import OtelUnavailable, otel_for_command

    try:
        return otel_for_command(bool(getattr(args, "otel", False)),
                                content=bool(getattr(args, "trace_content", False)),
                                planned=getattr(args, "func", None) is cmd_worker)
    except OtelUnavailable as e:
        raise UsageError(str(e)) from None
