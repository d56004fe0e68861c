"""The `statewright` command: a thin shell over api.py.

Exit codes, for every command: 0 ok, 1 the input has errors (a file that cannot be read included) or a
run / test failed, 2 usage error, 3 internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, NoReturn

from . import __version__

if TYPE_CHECKING:
    from .api import Compilation
    from .diagnostics import Diagnostic
    from .importers import ImportOutcome

EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A problem with how the command was called (exit 2)."""


# ---- output helpers ------------------------------------------------------------------------------


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def _printable(text: object) -> str:
    """An error's text for the terminal: what it quotes (a run id, a name a checkpoint or an imported file
    holds, a path) may carry escape sequences, shown escaped, never obeyed."""
    from .runtime.progress import printable

    return printable(text)


def use_color(choice: str, stream: IO[str]) -> bool:
    """Whether to colour what goes to `stream`: `--color always|never` decides; with `auto` (the default),
    NO_COLOR (set and not empty) turns colour off, FORCE_COLOR (set, not empty and not 0) turns it on, and
    otherwise a terminal that is not TERM=dumb gets colour and a pipe or a file does not."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _color(args: argparse.Namespace, stream: IO[str]) -> bool:
    return use_color(getattr(args, "color", "auto"), stream)


def _print_diagnostics(diags: Sequence[Diagnostic], args: argparse.Namespace, *, to_stdout: bool = False) -> None:
    from .diagnostics import render_text

    stream = sys.stdout if to_stdout else sys.stderr
    color = _color(args, stream)
    for d in diags:
        stream.write(render_text(d, color=color) + "\n\n")


def _report_internal_error(e: BaseException) -> None:
    import traceback

    _err(f"statewright: internal error: {type(e).__name__}: {_printable(e)}")
    _err("This is a bug in statewright. Please report it, with the input file and this message.")
    if os.environ.get("STATEWRIGHT_DEBUG"):
        _err("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip())
    else:
        _err("(set STATEWRIGHT_DEBUG=1 to include the Python traceback in the report)")


def _check_pass_names(args: argparse.Namespace) -> None:
    from .compiler.passes import PASSES

    known = [p.name for p in PASSES]
    for name in getattr(args, "no_pass", ()):
        if name not in known:
            raise UsageError(f"unknown pass {name!r}; the passes are: {', '.join(known)}")


def _one_file(path: str, command: str) -> str:
    """The PATH of a command that reads one spec: a directory is a usage error that names its specs."""
    if not os.path.isdir(path):
        return path
    from . import api

    found = api.spec_files([path]).files
    if not found:
        raise UsageError(f"{command} reads one .fsm file; {path} is a directory with no .fsm files in it")
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise UsageError(f"{command} reads one .fsm file; {path} is a directory (with {shown}): name one of them")


def _compile_or_report(path: str, args: argparse.Namespace, project: Any = None,
                       shown: set[int] | None = None) -> Compilation:
    """Check a file; print its diagnostics, and those of the files it uses, to stderr; return the
    Compilation (ir None on errors). A command that reads several files checks them in one `project`
    and prints each file's diagnostics once (`shown` holds the files printed)."""
    from . import api

    comp = api.check_path(path, project)
    shown = shown if shown is not None else set()
    for unit in (comp, *api.used_compilations(comp)):
        if id(unit) not in shown:
            shown.add(id(unit))
            _print_diagnostics(unit.diagnostics, args)
    return comp


def _spec_files(args: argparse.Namespace) -> tuple[list[str], list[Diagnostic]]:
    """The files PATH... stands for (directories expanded) and SW1022 for directories that cannot be read."""
    from . import api
    from .spec_paths import ExcludePatternError, unreadable_file

    try:
        found = api.spec_files(args.paths, args.exclude)
    except ExcludePatternError as e:
        raise UsageError(str(e)) from None
    for directory in found.empty_directories:
        _err(f"statewright: warning: no .fsm files under {directory}")
    return found.files, [unreadable_file(path, e) for path, e in found.unreadable]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


# ---- commands ------------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from . import api
    from .diagnostics import Diagnostic, Severity, paint, render_json, render_summary

    # Whatever happens to one file, the others are checked and, with --format json, exactly one document
    # is printed: a bug in the compiler becomes an SW9001 diagnostic for the file that showed it.
    # One project: a file that several files use is checked once, and reported once.
    files, diags = _spec_files(args)
    project = api.new_project()
    bugs = 0
    given = []
    for path in files:
        try:
            given.append(api.check_path(path, project))
        except Exception as e:  # noqa: BLE001 - reported, for this file only
            bugs += 1
            _report_internal_error(e)
            diags.append(Diagnostic("SW9001", f"internal compiler error while checking {path}: "
                                    f"{type(e).__name__}: {e}", None, severity=Severity.ERROR, file=path,
                                    help="this is a bug in statewright; please report it with the file"))
    checked = api.project_compilations(project, given)
    for comp in checked:
        diags.extend(comp.diagnostics)
    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    if args.format == "json":
        _out(render_json(diags))
    else:
        _print_diagnostics(diags, args, to_stdout=True)
        color = _color(args, sys.stderr)
        verdict = paint("failed", "error", color) if errors else paint("ok", "ok", color)
        _err(f"{verdict}: {_plural(max(len(files), len(checked)), 'file')} checked, "
             f"{render_summary(diags, color=color)}")
    if bugs:
        return EXIT_INTERNAL
    return EXIT_INPUT if errors else EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from .diagnostics.explain import all_codes, explain

    if args.list:
        if args.code is not None:
            raise UsageError("give a code or --list, not both")
        for info in all_codes():
            _out(f"{info.code}  {info.severity.value:<7}  {info.title}")
        return EXIT_OK
    if args.code is None:
        raise UsageError("give a code such as SW2002, or --list for every code")
    code = args.code.strip().upper()
    if not code.startswith("SW"):
        code = "SW" + code
    text = explain(code)
    if text is None:
        raise UsageError(f"unknown diagnostic code {args.code!r}; codes look like SW2002 "
                         "(`statewright explain --list` lists them)")
    _out(text)
    return EXIT_OK


def cmd_dump(args: argparse.Namespace) -> int:
    import json

    from . import api

    _check_pass_names(args)
    path = _one_file(args.path, "dump")
    if args.stage == "ast":  # the syntax tree needs a file that parses, not one that checks
        parsed = api.parse_file(path)
        _print_diagnostics(parsed.diagnostics.sorted(), args)
        if parsed.machine is None:
            return EXIT_INPUT
        _out(json.dumps(api.dump_ast(parsed), indent=2, ensure_ascii=False))
        return EXIT_OK
    comp = _compile_or_report(path, args)
    if not comp.ok:
        return EXIT_INPUT
    log: list[str] = []
    data = api.dump_ir(comp, optimized=args.stage == "optimized", disabled=args.no_pass,
                       level=args.opt_level, log=log)
    for line in log:
        _err(f"pass {line}")
    _out(json.dumps(data, indent=2, ensure_ascii=False))
    return EXIT_OK


def cmd_fmt(args: argparse.Namespace) -> int:
    from . import api

    if not args.paths:
        if sys.stdin.isatty():  # nothing piped in: waiting for a terminal to type a spec helps no one
            args.parser.print_usage(sys.stderr)
            _err("statewright fmt: give the files or directories to format, or '-' to read standard input")
            return EXIT_USAGE
        args.paths = ["-"]
    if "-" in args.paths:
        if len(args.paths) > 1:
            raise UsageError("'-' (standard input) cannot be combined with other paths")
        return _fmt_stdin(args)
    files, problems = _spec_files(args)
    _print_diagnostics(problems, args)
    status = EXIT_INPUT if problems else EXIT_OK
    for path in files:
        data, problems = api.read_spec(path)
        if data is None:
            _print_diagnostics(problems, args)
            status = EXIT_INPUT
            continue
        res = api.format_bytes(data, path)
        if res.text is None:
            _print_diagnostics(res.diagnostics, args)
            status = EXIT_INPUT
            continue
        old = data.decode("utf-8", errors="replace")
        changed = res.text != old
        if args.diff and changed:
            _out(api.unified_diff(old, res.text, path))
        if args.check:
            if changed:
                _err(f"would reformat {path}")
                status = EXIT_INPUT
            continue
        if changed and not args.diff:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(res.text)
            _err(f"formatted {path}")
    return status


def _fmt_stdin(args: argparse.Namespace) -> int:
    from . import api
    from .grammar.parser import read_limited

    data = read_limited(sys.stdin.buffer)
    res = api.format_bytes(data, "<stdin>")
    if res.text is None:
        _print_diagnostics(res.diagnostics, args)
        return EXIT_INPUT
    old = data.decode("utf-8", errors="replace")
    changed = res.text != old
    if args.diff and changed:
        _out(api.unified_diff(old, res.text, "<stdin>"))
    if args.check:
        if changed:
            _err("would reformat <stdin>")
            return EXIT_INPUT
        return EXIT_OK
    if not args.diff:
        sys.stdout.write(res.text)
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from . import api

    comp = _compile_or_report(_one_file(args.path, "graph"), args)
    if not comp.ok:
        return EXIT_INPUT
    text = api.render_graph(comp, args.format)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        _out(text)
    return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    from . import api

    _check_pass_names(args)
    standalone = _compile_standalone(args)
    if args.check and not args.output:
        raise UsageError("--check needs -o FILE: the runner on disk to compare with")
    if not args.output and not standalone:
        raise UsageError(f"without -o FILE, pass --standalone: standard output holds one file, and a runner "
                         f"imports the runtime package {api.RUNTIME_DIR}/ that -o writes beside it")
    if not standalone:
        try:
            api.check_runner_path(args.output)
        except ValueError as e:
            raise UsageError(str(e)) from None
    path = _one_file(args.path, "compile")
    comp = _compile_or_report(path, args)
    if not comp.ok or comp.source is None:
        return EXIT_INPUT
    name = api.runner_source_name(path, args.output)
    if name != comp.source.path or comp.uses:  # every file named from the runner's folder
        comp = api.check_for_runner(path, args.output)
    text = api.generate_runner(comp, disabled=args.no_pass, level=args.opt_level, standalone=standalone)
    again = f"statewright compile {path} -o {args.output}" + (" --standalone" if standalone else "")
    if args.check:
        return _check_compiled(args.output, text, again, standalone)
    if not args.output:
        sys.stdout.write(text)
        return EXIT_OK
    return _write_compiled(args.output, text, standalone, args.force)


def _compile_standalone(args: argparse.Namespace) -> bool:
    """--standalone, or what the older --runtime says instead (kept for one release, with a warning)."""
    if args.runtime is None:
        return bool(args.standalone)
    if args.standalone and args.runtime == "module":
        raise UsageError("--standalone and --runtime module contradict each other; pass --standalone alone")
    instead = ("--standalone" if args.runtime == "inline" else
               "nothing (a runner and its runtime package is the default)")
    _err(f"warning: --runtime {args.runtime} is deprecated and goes in the next release: pass {instead}")
    return args.runtime == "inline" or bool(args.standalone)


def _write_compiled(output: str, text: str, standalone: bool, force: bool) -> int:
    """Write the runner and, unless it is standalone, the runtime package beside it: neither when a file
    statewright did not write is in the way of either."""
    from . import api

    runtime = api.runtime_package_path(output)
    try:
        if standalone:
            api.write_runner(output, text, force=force)
            _err(f"wrote {output}")
            return EXIT_OK
        api.check_overwrite(output, force=force)
        written = api.write_runtime_package(runtime, force=force)
        api.write_runner(output, text, force=force)
    except api.RunnerOverwriteError as e:
        _err(f"error: {e}")
        return EXIT_INPUT
    except OSError as e:
        raise UsageError(f"cannot write {e.filename or output}: {e.strerror or e}") from None
    _err(f"wrote {output} and {runtime}{os.sep}" if written.written else
         f"wrote {output} ({runtime}{os.sep} is up to date)")
    if written.removed:
        _err(f"removed what an earlier runtime left beside it: {', '.join(written.removed)}")
    if written.left:
        _err(f"warning: {runtime}{os.sep} holds files statewright did not write, left alone (compile --check "
             f"reports them until they are moved out): {', '.join(written.left)}")
    stale = [r for r in written.stale if r != os.path.basename(output)]
    if stale:
        _err(f"warning: these runners beside it were generated for another runtime and will not import until "
             f"they are regenerated (statewright compile SPEC -o RUNNER): {', '.join(stale)}")
    return EXIT_OK


def _check_compiled(output: str, text: str, again: str, standalone: bool) -> int:
    """compile --check: whether the runner (and, unless it is standalone, the runtime package beside it)
    is current."""
    from . import api

    status = EXIT_OK
    if not os.path.exists(output):
        _err(f"{output} does not exist: run `{again}`")
        status = EXIT_INPUT
    elif api.runner_is_current(output, text):
        _err(f"{output} is up to date")
    else:
        _err(f"{output} is out of date: run `{again}`")
        status = EXIT_INPUT
    if not standalone:
        runtime = f"{api.runtime_package_path(output)}{os.sep}"
        state = api.check_runtime_package(runtime)
        if state.current:
            _err(f"{runtime} is up to date")
        else:
            _err(f"{runtime} {state.message}: run `{again}`, which rewrites it")
            status = EXIT_INPUT
    return status


def cmd_run(args: argparse.Namespace) -> int:
    from . import api

    path = _one_file(args.path, "run")
    comp = _compile_or_report(path, args)
    if not comp.ok:
        return EXIT_INPUT
    machine = api.runtime_machine(comp)
    from .runtime.runner_cli import main as runner_main

    prog = getattr(args, "prog", None) or f"statewright run {_printable(path)}"
    return runner_main(machine, args.runner_args, prog=prog)


def cmd_resume(args: argparse.Namespace) -> int:
    """`statewright resume RUN_ID`: continue a checkpointed run with the machine it was started with, or
    (with --temporal) send the answer to a run that waits on a Temporal cluster."""
    from .runtime.checkpoint import CheckpointError, CheckpointStore
    from .runtime.runner_cli import DEFAULT_CHECKPOINT

    _resume_own_options(args)
    if args.temporal:
        if args.answer is None:
            raise UsageError("resume --temporal sends a person's answer: give --answer TEXT (a run on the "
                             "cluster goes on by itself after a crash)")
        if args.runner_args or args.checkpoint:
            raise UsageError("resume --temporal takes only --answer, --at, --by and --namespace")
        from .runtime.runner_cli import runner_temporal_dispatch

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
    args.prog = f"statewright resume {_printable(args.run_id)}"
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


def cmd_batch(args: argparse.Namespace) -> int:
    from . import api

    path = _one_file(args.path, "batch")
    comp = _compile_or_report(path, args)
    if not comp.ok:
        return EXIT_INPUT
    machine = api.runtime_machine(comp)
    from .runtime.runner_cli import main as runner_main

    return runner_main(machine, ["batch", *args.runner_args], batch_prog=f"statewright batch {_printable(path)}")


def cmd_test(args: argparse.Namespace) -> int:
    files, problems = _spec_files(args)
    _print_diagnostics(problems, args)
    declared: list[tuple[str, str]] = []  # (test name, file) of every test block, for a filter that matches none
    telemetry = _telemetry(args)
    try:
        return _test_files(args, files, problems, declared, telemetry)
    finally:
        if telemetry is not None:
            telemetry.shutdown()


def _telemetry(args: argparse.Namespace) -> Any:
    """The OpenTelemetry a command asks for (`--otel`, or the OTLP endpoint variable), or None."""
    from .runtime.otel_setup import OtelUnavailable, otel_for_command

    try:
        return otel_for_command(bool(getattr(args, "otel", False)),
                                content=bool(getattr(args, "trace_content", False)),
                                planned=getattr(args, "func", None) is cmd_worker)
    except OtelUnavailable as e:
        raise UsageError(str(e)) from None


def _test_files(args: argparse.Namespace, files: list[str], problems: Sequence[Diagnostic],
                declared: list[tuple[str, str]], telemetry: Any) -> int:
    from . import api
    from .diagnostics import paint
    from .runtime.testing import format_outcome

    color = _color(args, sys.stdout)
    passed = failed = 0
    broken = len(problems)  # directories that could not be read
    project, shown = api.new_project(), set[int]()  # each file checked and reported once, however many use it
    for path in files:
        comp = _compile_or_report(path, args, project, shown)
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
            _out(line)
    unmatched = bool(args.filter) and passed + failed == 0
    if broken:
        _err(f"{_plural(broken, 'file')} did not check; {'its' if broken == 1 else 'their'} tests did not run")
    if unmatched:
        if declared:
            names = ", ".join(f"'{name}' ({path})" for name, path in declared[:20])
            more = f" and {len(declared) - 20} more" if len(declared) > 20 else ""
            _err(f"statewright: error: no test matches --filter {args.filter!r}; the tests are: {names}{more}")
        else:
            _err(f"statewright: error: no test matches --filter {args.filter!r}: there are no test blocks")
    color = _color(args, sys.stderr)
    _err(f"{paint(f'{passed} passed', 'ok', color and passed > 0 and not failed)}, "
         f"{paint(f'{failed} failed', 'error', color and failed > 0)}")
    return EXIT_INPUT if failed or broken or unmatched else EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    from . import api
    from .runtime.runner_cli import serve_on_temporal

    files, problems = _spec_files(args)
    _print_diagnostics(problems, args)
    machines = []
    project, shown = api.new_project(), set[int]()
    for path in files:
        comp = _compile_or_report(path, args, project, shown)
        if not comp.ok:
            return EXIT_INPUT
        # optimized (what `run` and `test` start) and as written (what they start with -O0)
        machines += [api.runtime_machine(comp), api.runtime_machine(comp, level=0)]
    if problems or not machines:
        if not problems:
            _err("statewright worker: no .fsm files to serve")
        return EXIT_INPUT
    return _temporal_call(lambda address: serve_on_temporal(
        machines, address, task_queue=args.task_queue, namespace=args.namespace, concurrency=args.concurrency,
        unsafe_tools=args.unsafe_tools, model_client=args.model_client, otel=_telemetry(args)),
        args.temporal)


def _temporal_call(call: Callable[[str], int], address: str) -> int:
    """Run `call(HOST:PORT)`, with Temporal's missing package or unreachable service as one clear line."""
    from .runtime.temporal import TemporalRunError, TemporalUnavailable, temporal_address

    try:
        address = temporal_address(address)
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        return call(address)
    except TemporalUnavailable as e:
        raise UsageError(str(e)) from None
    except TemporalRunError as e:
        _err(f"statewright: error: {_printable(e)}")
        return EXIT_INPUT


def cmd_status(args: argparse.Namespace) -> int:
    from .runtime.runner_cli import runner_temporal_dispatch

    return runner_temporal_dispatch(None, "status", args, "statewright status")


def _temporal_tests(comp: Compilation, args: argparse.Namespace, telemetry: Any = None) -> list:  # type: ignore[type-arg]
    """A spec's test blocks run on the cluster: each a workflow carrying its scripted replies."""
    from . import api
    from .runtime.runner_cli import run_tests_on_temporal

    machine = api.runtime_machine(comp, level=args.opt_level, disabled=args.no_pass)  # as locally
    outcomes: list = []  # type: ignore[type-arg]

    def call(address: str) -> int:
        outcomes.extend(run_tests_on_temporal(machine, address, task_queue=args.task_queue,
                                              namespace=args.namespace, trace_dir=args.trace,
                                              trace_content=args.trace_content, name_filter=args.filter,
                                              otel=telemetry))
        return EXIT_OK

    if _temporal_call(call, args.temporal) != EXIT_OK:
        raise UsageError("the tests could not run on the cluster")
    return outcomes


def cmd_import(args: argparse.Namespace) -> int:
    if args.bound is not None and not args.repair:
        raise UsageError("--bound needs --repair: a literal import bounds nothing")
    bound = 2 if args.bound is None else args.bound
    if bound < 1:
        raise UsageError(f"--bound must be at least 1, not {bound}")
    if args.format == "crewai":
        outcome, name = _import_project(args, bound), args.path
    else:
        outcome, name = _import_file(args, bound)
    _print_diagnostics(outcome.diagnostics, args)
    return _finish_import(args, outcome, name)


def _import_file(args: argparse.Namespace, bound: int) -> tuple[ImportOutcome, str]:
    from . import api
    from .grammar.parser import read_limited

    if args.path == "-":
        data, name = read_limited(sys.stdin.buffer), "<stdin>"
    else:
        try:
            with open(args.path, "rb") as f:
                data, name = read_limited(f), args.path
        except OSError as e:
            raise UsageError(f"cannot read {args.path}: {e.strerror or e}") from None
    return api.import_bytes(args.format, data, name, repair=args.repair, bound=bound,
                            output=args.output), name


def _import_project(args: argparse.Namespace, bound: int) -> ImportOutcome:
    """`statewright import crewai PATH`: a project folder, read where it lies."""
    from . import api
    from .importers.yaml_source import MissingYamlReader

    if args.path == "-":
        raise UsageError("a CrewAI project is a folder: give its path, not '-'")
    try:
        return api.import_file(args.format, args.path, repair=args.repair, bound=bound, output=args.output)
    except MissingYamlReader as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"cannot read {args.path}: {e.strerror or e}") from None


def _finish_import(args: argparse.Namespace, outcome: ImportOutcome, name: str) -> int:
    from . import api
    from .diagnostics import render_summary

    if outcome.text is None:
        _err(f"failed: {name} was not imported ({render_summary(outcome.diagnostics)})")
        return EXIT_INPUT
    output = args.output or "-"
    if output == "-":
        if outcome.files:  # several files, and standard output holds one: say so rather than mix them
            raise UsageError(f"{name} imports as {len(outcome.files) + 1} files (a machine and the machines it "
                             "runs, in a folder beside it), and standard output holds one: give -o OUT.fsm, "
                             "which writes OUT.fsm and OUT/NAME.fsm for each machine it runs")
        sys.stdout.write(outcome.text)
        checked = api.check_text(outcome.text, "<stdout>").diagnostics
        target = "the result"
    else:
        try:
            written = api.write_import(outcome, output)
        except api.ImportOverwriteError as e:
            _err(f"error: {_printable(e)}")
            return EXIT_INPUT
        except OSError as e:
            raise UsageError(f"cannot write {e.filename or output}: {e.strerror or e}") from None
        checked = [d for comp in api.check_files(written) for d in comp.diagnostics]
        called = len(written) - 1
        target = (output if not called else f"{output} and the machine it runs" if called == 1 else
                  f"{output} and the {called} machines it runs")
    mode = "repair" if args.repair else "literal"
    notes = render_summary(outcome.diagnostics).replace("no problems", "no notes")
    _err(f"imported {name} ({mode} mode, {notes}); `statewright check` on {target}: {render_summary(checked)}")
    has_errors = any(d.severity.value == "error" for d in checked)
    return EXIT_INPUT if args.repair and has_errors else EXIT_OK


def cmd_source_map(args: argparse.Namespace) -> int:
    import json

    from . import api
    from .compiler.codegen.source_map import NotARunner

    runner, _, number = args.location.rpartition(":")
    if not runner or not number.isdigit() or int(number) < 1:
        raise UsageError(f"{args.location!r} is not RUNNER.py:LINE (a runner's path, ':', a line number from 1)")
    line = int(number)
    try:
        found = api.runner_origin(runner, line)
    except OSError as e:
        _err(f"error: cannot read {runner}: {e.strerror or e}")
        return EXIT_INPUT
    except NotARunner as e:
        _err(f"error: {runner}: {e}")
        return EXIT_INPUT
    if args.format == "json":
        _out(json.dumps({"runner": runner, "runner_line": line, "found": found is not None,
                         **({"key": found.key, "file": found.path, "line": found.line, "column": found.column}
                            if found is not None else {})}))
    elif found is not None:
        _out(f"{found.label()}: {found.key}")
    if found is None:
        _err(f"{runner}:{line} comes from no one place of the spec (the runtime, an import or a type's class)")
        return EXIT_INPUT
    return EXIT_OK


def cmd_lsp(args: argparse.Namespace) -> int:
    try:
        from .lsp.server import serve  # pygls only here: no other command pays for it
    except ImportError as e:
        raise UsageError(f"the language server needs pygls and lsprotocol ({e}); install them with "
                         "pip install 'statewright[lsp]'") from None
    return serve()


def cmd_trace(args: argparse.Namespace) -> int:
    from .trace_show import render_trace

    try:
        _out(render_trace(args.file))
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e.strerror or e}") from None
    except ValueError as e:
        _err(f"error: {_printable(args.file)} is not a statewright trace: {_printable(e)}")
        return EXIT_INPUT
    return EXIT_OK


def cmd_trace_export(args: argparse.Namespace) -> int:
    from .trace_export import TraceExportError, export_trace

    try:
        report = export_trace(args.file, args.otlp, content=args.trace_content)
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e.strerror or e}") from None
    except ValueError as e:
        _err(f"error: {args.file} is not a statewright trace: {e}")
        return EXIT_INPUT
    except TraceExportError as e:
        _err(f"statewright: error: {e}")
        return EXIT_INPUT
    _err(f"sent {report.spans} spans of {_plural(report.runs, 'run segment')} ({_plural(report.traces, 'trace')}, "
         f"{report.events} events)")
    return EXIT_OK


def _progress(args: argparse.Namespace) -> list[object]:
    """The listeners that show a command's progress on stderr: none with --quiet."""
    if getattr(args, "quiet", False):
        return []
    from .runtime.progress import Progress

    return [Progress()]


def _design_progress(args: argparse.Namespace) -> list[object]:
    """The progress of a design session on stderr, each attempt with what it fixed: none with --quiet."""
    if args.quiet:
        return []
    from .designer.progress import DesignProgress

    return [DesignProgress()]


def cmd_design(args: argparse.Namespace) -> int:
    from . import api

    system_prompt = None
    if args.reference == "compact":  # for a model with a small context window
        from .stdlib.reference import compact_designer_system_prompt

        system_prompt = compact_designer_system_prompt()
    try:
        outcome = api.design(args.task, output=args.output, model=args.model, max_repairs=args.max_repairs,
                             optimize=not args.no_optimize, trace_path=args.trace, script=args.script,
                             listeners=_design_progress(args), constrain=args.constrain,
                             max_tokens=args.max_tokens, system_prompt=system_prompt, timeout=args.timeout)
    except api.ScriptFileError as e:
        raise UsageError(str(e)) from None
    lines = outcome.log
    if not args.quiet:  # each attempt's verdict was shown as it happened: the rest of the log is new
        lines = [line for line in lines if not line.startswith("attempt ")]
    for line in lines:
        _err(line)
    return EXIT_OK if outcome.ok else EXIT_INPUT


def cmd_grammar(args: argparse.Namespace) -> int:
    from . import api

    sys.stdout.write(api.decoding_grammar(args.format, draft=args.draft))
    return EXIT_OK


def cmd_optimize(args: argparse.Namespace) -> int:
    from . import api

    comp = _compile_or_report(_one_file(args.path, "optimize"), args)
    if not comp.ok:
        return EXIT_INPUT
    try:
        report = api.optimize_with_llm(comp, model=args.llm, write=args.write, trace_path=args.trace,
                                       script=args.script, listeners=_progress(args))
    except api.ScriptFileError as e:
        raise UsageError(str(e)) from None
    for line in report.log:
        _err(line)
    if report.diff and not args.write:
        _out(report.diff)
    return EXIT_OK if report.ok else EXIT_INPUT


# ---- argument parsing ----------------------------------------------------------------------------


def _count(text: str) -> int:
    """An argparse type: a whole number, zero or more.

    Not the runner's own validator: importing runtime.runner_cli would load pydantic on every command."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected zero or more, got {value}")
    return value


def _positive(text: str) -> int:
    """An argparse type: a whole number, one or more."""
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected one or more, got {value}")
    return value


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds more than 0, got {text}")
    return value


def _add_pass_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-O0", dest="opt_level", action="store_const", const=0, default=1,
                   help="turn off every optimization pass")
    p.add_argument("--no-pass", action="append", default=[], metavar="NAME",
                   help="turn off one optimization pass (repeatable)")


def _add_color_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="colour diagnostics and summaries: on a terminal (auto, the default; NO_COLOR and "
                        "FORCE_COLOR are honoured), always or never")


def _add_paths(p: argparse.ArgumentParser, nargs: str, help: str) -> None:
    p.add_argument("paths", nargs=nargs, metavar="PATH", help=help)
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="skip files and directories found under a directory PATH that match this "
                        ".gitignore-style pattern (repeatable)")


def _setup_check(p: argparse.ArgumentParser) -> None:
    _add_paths(p, "+", "a .fsm file, or a directory: every .fsm file under it")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text for people (the default) or one JSON document for tools")
    _add_color_option(p)
    p.set_defaults(func=cmd_check)


def _setup_explain(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", nargs="?", metavar="CODE", help="a diagnostic code: SW2002, sw2002 or 2002")
    p.add_argument("--list", action="store_true", help="list every code with its severity and summary")
    p.set_defaults(func=cmd_explain)


def _setup_dump(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stage", choices=["ast", "ir", "optimized"], default="ir")
    p.add_argument("path", metavar="PATH")
    _add_pass_options(p)
    _add_color_option(p)
    p.set_defaults(func=cmd_dump)


def _setup_fmt(p: argparse.ArgumentParser) -> None:
    _add_paths(p, "*", "a .fsm file, a directory (every .fsm file under it), or '-' for standard input")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    p.add_argument("--diff", action="store_true", help="print the changes as a unified diff instead of writing")
    _add_color_option(p)
    p.set_defaults(func=cmd_fmt, parser=p)


def _setup_graph(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="the .fsm file of the machine to draw")
    p.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    p.add_argument("-o", "--output", metavar="FILE")
    _add_color_option(p)
    p.set_defaults(func=cmd_graph)


def _setup_compile(p: argparse.ArgumentParser) -> None:
    p.description = ("Generate a runner: FILE, which carries only its machine, and beside it the runtime package "
                     "statewright_runtime/ it imports (shared by every runner there); with --standalone, one "
                     "file that carries the runtime.")
    p.add_argument("path", metavar="PATH")
    p.add_argument("-o", "--output", metavar="FILE", help="the runner to write (without it, --standalone prints "
                                                          "the runner)")
    p.add_argument("--standalone", action="store_true", help="one file that carries the runtime, instead of a "
                                                             "runner and the runtime package beside it")
    p.add_argument("--runtime", choices=["inline", "module"], default=None,
                   help=argparse.SUPPRESS)  # the older spelling: inline is --standalone, module the default
    p.add_argument("--check", action="store_true", help="exit 1 if FILE (and, unless --standalone, the "
                                                        "statewright_runtime/ beside it) is not what the "
                                                        "spec generates")
    p.add_argument("--force", action="store_true", help="overwrite files statewright did not write")
    _add_pass_options(p)
    _add_color_option(p)
    p.set_defaults(func=cmd_compile)


def _setup_run(p: argparse.ArgumentParser) -> None:
    p.usage = "statewright run [--color WHEN] PATH [RUNNER OPTION]..."
    p.description = "Check a machine and run it with real models."
    p.epilog = ("The options after PATH are those of a generated runner: `statewright run PATH --help` lists "
                "them, with the machine's inputs.")
    p.add_argument("path", metavar="PATH", help="the .fsm file of the machine to run")
    p.add_argument("runner_args", nargs=argparse.REMAINDER, metavar="RUNNER OPTION",
                   help="--input NAME=VALUE, --trace FILE, --checkpoint DB, ... (see below)")
    _add_color_option(p)
    p.set_defaults(func=cmd_run)



def _setup_resume(p: argparse.ArgumentParser) -> None:
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
    _add_color_option(p)
    p.set_defaults(func=cmd_resume)


def _setup_batch(p: argparse.ArgumentParser) -> None:
    p.usage = "statewright batch [--color WHEN] PATH [BATCH OPTION]..."
    p.description = "Check a machine and run it over many inputs concurrently."
    p.epilog = ("The options after PATH are those of a generated runner's `batch` command: "
                "`statewright batch PATH --help` lists them.")
    p.add_argument("path", metavar="PATH", help="the .fsm file of the machine to run")
    p.add_argument("runner_args", nargs=argparse.REMAINDER, metavar="BATCH OPTION",
                   help="the inputs file, concurrency and the rest (see below)")
    _add_color_option(p)
    p.set_defaults(func=cmd_batch)


def _setup_test(p: argparse.ArgumentParser) -> None:
    _add_paths(p, "+", "a .fsm file, or a directory: every .fsm file under it")
    p.add_argument("--trace", metavar="DIR", help="write one trace file per test block into DIR")
    p.add_argument("--trace-content", action="store_true", help="include messages and replies in traces")
    p.add_argument("--filter", metavar="TEXT",
                   help="run only the tests whose name contains TEXT (or matches it as a glob); "
                        "matching none is an error")
    p.add_argument("--otel", action="store_true", help=_OTEL_HELP)
    _add_pass_options(p)
    _add_temporal_options(p, required=False)
    _add_color_option(p)
    p.set_defaults(func=cmd_test)


_OTEL_HELP = ("send the runs' spans and metrics (OpenTelemetry, GenAI conventions) where the OTEL_* environment "
              "says; on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set; needs statewright[otel] "
              "(docs/observability.md)")


def _add_temporal_options(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--temporal", metavar="HOST:PORT", required=required,
                   help="the Temporal service" + ("" if required else " to run on (instead of in this process)")
                        + "; needs the statewright[temporal] extra (docs/temporal.md)")
    p.add_argument("--task-queue", metavar="QUEUE",
                   help="the Temporal task queue (default: one per machine and source version)")
    p.add_argument("--namespace", metavar="NS", default="default", help="the Temporal namespace (default)")


def _setup_worker(p: argparse.ArgumentParser) -> None:
    p.description = ("Serve machines' runs from a Temporal cluster until SIGTERM or Ctrl-C: every model, verifier "
                     "and tool call of a run is an activity this worker (or another) performs.")
    _add_paths(p, "+", "a .fsm file, or a directory: every .fsm file under it")
    _add_temporal_options(p, required=True)
    p.add_argument("--concurrency", type=_positive, default=64, metavar="N",
                   help="model and tool calls this worker makes at once (default 64)")
    p.add_argument("--unsafe-tools", action="store_true",
                   help="let std.python and std.shell run unconfined where their bubblewrap jail cannot run")
    p.add_argument("--model-client", choices=("auto", "litellm"), metavar="auto|litellm",
                   help="litellm: every model call through litellm; auto: OpenAI-compatible models over "
                        "statewright's own HTTP client, others through litellm (default: "
                        "$STATEWRIGHT_MODEL_CLIENT, else auto)")
    p.add_argument("--otel", action="store_true", help=_OTEL_HELP)
    p.add_argument("--trace-content", action="store_true", help="with --otel: prompts and replies in the spans")
    _add_color_option(p)
    p.set_defaults(func=cmd_worker)


def _add_run_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID", help="the run's id (its workflow id)")
    p.add_argument("--temporal", metavar="HOST:PORT", required=True, help="the Temporal service")
    p.add_argument("--namespace", metavar="NS", default="default", help="the Temporal namespace (default)")


def _setup_status(p: argparse.ArgumentParser) -> None:
    p.description = ("Show what a run on a Temporal cluster is doing: its state, path and usage, its result, or "
                     "the answer it waits for.")
    _add_run_id(p)
    p.add_argument("--trace", metavar="FILE", help="also write the run's trace so far to FILE (when it was "
                                                   "started with a trace)")
    p.set_defaults(func=cmd_status)


def _setup_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["metaagent", "autoagent", "crewai"], metavar="FORMAT",
                   help="the input's format: metaagent, autoagent or crewai")
    p.add_argument("path", metavar="PATH", help="the file to import ('-' for standard input); for crewai, the "
                   "project's folder (or its crew.py)")
    p.add_argument("-o", "--output", metavar="OUT", help="where to write the .fsm file (default, or '-': "
                   "standard output); an AutoAgent agent form's other machines go to OUT/NAME.fsm beside it")
    p.add_argument("--repair", action="store_true", help="bound back edges, drop duplicate and self "
                   "listeners and more, each change listed in the header")
    p.add_argument("--bound", type=int, default=None, metavar="N",
                   help="with --repair: the bound put on each back edge (default 2)")
    _add_color_option(p)
    p.set_defaults(func=cmd_import)


def _setup_trace(p: argparse.ArgumentParser) -> None:
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


def _setup_lsp(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stdio", action="store_true", help="talk over stdin and stdout (the only way; editors' "
                   "clients pass it)")
    p.set_defaults(func=cmd_lsp)


def _setup_source_map(p: argparse.ArgumentParser) -> None:
    p.add_argument("location", metavar="RUNNER.py:LINE", help="a generated runner and a line of it (from 1)")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: FILE:LINE:COL: KEY (the default); json: one object")
    p.set_defaults(func=cmd_source_map)


def _setup_design(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", metavar="TASK")
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.add_argument("--model", default=None, help="the designer model (default: $STATEWRIGHT_DESIGNER_MODEL "
                   "or openai/gpt-4o-mini)")
    p.add_argument("--max-repairs", type=_count, default=3, metavar="N",
                   help="how many times the designer may repair its source (default 3)")
    p.add_argument("--no-optimize", action="store_true")
    p.add_argument("--trace", metavar="FILE", help="write the designer's calls to a trace file")
    p.add_argument("--script", metavar="FILE", help="answer the designer's calls from a JSON script file "
                                                    "instead of a model (try the designer without a key)")
    p.add_argument("--quiet", action="store_true", help="print no progress while designing")
    p.add_argument("--constrain", choices=["auto", "grammar", "none"], default="auto",
                   help="constrain drafts to the grammar at decoding time: auto (when the model's server is "
                   "known to take a grammar), grammar (always) or none (default auto)")
    p.add_argument("--max-tokens", type=_positive, default=None, metavar="N",
                   help="cap each designer reply at N tokens")
    p.add_argument("--reference", choices=["full", "compact"], default="full",
                   help="what the designer reads: full (the guide, the grammar and every example, about "
                   "11,000 tokens; the default) or compact (the guide and one example, about 2,000 tokens, "
                   "for a model with a small context window)")
    p.add_argument("--timeout", type=_seconds, default=None, metavar="S",
                   help="seconds each designer call may take, its retries included (default 60): a slow "
                   "local model needs more")
    _add_color_option(p)
    p.set_defaults(func=cmd_design)


def _setup_grammar(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["gbnf", "lark"], default="gbnf",
                   help="gbnf for llama.cpp's grammar field, lark for decoders that take Lark (default gbnf)")
    p.add_argument("--draft", action="store_true",
                   help="the form a model writes into: no comments, and (gbnf) bounded whitespace")
    p.set_defaults(func=cmd_grammar)


def _setup_optimize(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH")
    p.add_argument("--llm", required=True, metavar="MODEL")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="apply accepted merges to the file")
    mode.add_argument("--diff", action="store_true", help="print the diff (the default)")
    p.add_argument("--trace", metavar="FILE")
    p.add_argument("--script", metavar="FILE", help="answer the judge's calls from a JSON script file")
    p.add_argument("--quiet", action="store_true", help="print no progress while judging")
    _add_color_option(p)
    p.set_defaults(func=cmd_optimize)


# name -> (one-line help, what declares its arguments)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "check": ("check .fsm files and report every problem", _setup_check),
    "explain": ("explain a diagnostic code, with a wrong and a right example", _setup_explain),
    "dump": ("print the syntax tree, the IR or the optimized IR as JSON", _setup_dump),
    "fmt": ("format .fsm files in the one canonical layout", _setup_fmt),
    "graph": ("draw the machine as a Mermaid or Graphviz graph", _setup_graph),
    "compile": ("generate a Python runner (with the runtime package beside it, or --standalone)", _setup_compile),
    "run": ("run a machine (options as for a generated runner; see --help after PATH)", _setup_run),
    "batch": ("run a machine over many inputs concurrently (options: batch PATH --help)", _setup_batch),
    "resume": ("continue a checkpointed run: answer a person, or go on after a crash", _setup_resume),
    "test": ("run the test blocks of .fsm files with scripted replies", _setup_test),
    "worker": ("serve machines' runs from a Temporal cluster", _setup_worker),
    "status": ("show what a run on a Temporal cluster is doing", _setup_status),
    "import": ("import a MetaAgent FSM (JSON), an AutoAgent workflow or agent form (XML) or a CrewAI project",
               _setup_import),
    "trace": ("read trace files", _setup_trace),
    "design": ("draft a machine from a task description with a designer model", _setup_design),
    "grammar": ("print the grammar as a decoding constraint (GBNF or Lark)", _setup_grammar),
    "optimize": ("propose LLM-judged state merges as a reviewable source diff", _setup_optimize),
    "source-map": ("map a line of a generated runner back to its .fsm position", _setup_source_map),
    "lsp": ("serve the language server over stdin and stdout, for editors", _setup_lsp),
}

# Commands that only read specs and write whole files: see console_main.
SHORT_LIVED = frozenset({"check", "explain", "dump", "fmt", "graph", "compile", "source-map"})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With `only`, the name of a command, that command alone is declared:
    argparse is slow to declare eleven commands and forty options, and only one of them runs. (An unknown
    name declares every command, without their options, for the error message that lists them.)"""
    parser = argparse.ArgumentParser(
        prog="statewright",
        description="Compile and run multi-agent LLM systems written as finite-state machines.",
    )
    parser.add_argument("--version", action="version", version=f"statewright {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (summary, declare) in COMMANDS.items():
        if only in COMMANDS and name != only:
            continue
        p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
        if only is None or only == name:
            declare(p)
    return parser


def command_name(argv: Sequence[str]) -> str | None:
    """The command an argument list names: its first word that is not an option (the program's own
    options take no values)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=command_name(args_list))
    try:
        args = parser.parse_args(args_list)
    except SystemExit as e:  # argparse: --help/--version exit 0, usage errors exit 2
        return int(e.code or 0)
    try:
        return int(args.func(args))
    except UsageError as e:
        _err(f"statewright: error: {_printable(e)}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        from .runtime.runner_cli import stdout_gone

        return stdout_gone()
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a bare traceback
        _report_internal_error(e)
        return EXIT_INTERNAL


def console_main() -> NoReturn:
    """The `statewright` program: the console script and `python -m statewright` call this.

    The commands that only read specs and write whole files (SHORT_LIVED) run with the cyclic garbage
    collector off, and end by flushing their output and leaving without tearing the interpreter down:
    collecting while modules load, collecting again at exit and unloading every module cost about a fifth
    of `statewright check`'s time, for nothing (mypy ends the same way, for the same reason). Every file
    such a command writes is closed before it returns; the other commands end normally."""
    quick = command_name(sys.argv[1:]) in SHORT_LIVED
    if quick:
        import gc

        gc.disable()
    status = main()
    if "temporalio" in sys.modules:  # see runner_cli.leave_after_temporal
        from .runtime.runner_cli import leave_after_temporal

        leave_after_temporal(status)
    if quick:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe (`| head`): what was not read is not wanted
                pass
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    console_main()
