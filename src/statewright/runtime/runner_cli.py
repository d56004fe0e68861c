"""The runner's command-line face and its Python entry points: inputs in, a RunResult (as JSON) out."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .arguments import count_argument, positive_argument, positive_seconds_argument, seconds_argument
from .checkpoint import CheckpointError, CheckpointStore
from .client import ModelClient
from .engine import Engine, Listener, new_run_id
from .result import AnswerError, RunResult
from .runner_options import (
    EXIT_FAILED,
    EXIT_FINAL,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_WAITING,
    OTEL_HELP,
    UNSAFE_TOOLS_HELP,
    RunnerTerminated,
    RunnerUsageError,
    check_secrets,
    default_client,
    leave_after_temporal,
    loaded_objects_frozen,
    model_client_option,
    read_inputs,
    read_script,
    resume_command,
    resume_hint,
    run_checkpoint,
    runner_client,
    runner_otel,
    runner_pairs,
    runner_parser,
    runner_script,
    runner_summary,
    runner_telemetry,
    started_with,
    stopped_by_sigterm,
    temporal_options,
    trace_directory,
)
from .runner_temporal import (
    RUNNER_TEMPORAL_COMMANDS,
    runner_temporal_command,
    temporal_run,
    temporal_runner,
    temporal_selftest,
)
from .scripted import Script
from .spec import MachineSpec, every_machine
from .sync import run_sync
from .temporal import TemporalRunError, TemporalUnavailable
from .trace import Trace, printable, redact, sink_json


async def arun_machine(machine: MachineSpec, inputs: Mapping[str, Any] | None = None, *,
                       trace: Trace | str | None = None, trace_content: bool = False,
                       checkpoint: CheckpointStore | str | None = None, resume: str | None = None,
                       answer: Any = None, run_id: str | None = None, model_map: Mapping[str, str] | None = None,
                       workspace: str | None = None, script: Script | Mapping[str, Any] | None = None,
                       client: ModelClient | None = None, model_client: str | None = None, tools: Any = None,
                       unsafe_tools: bool = False, max_tokens: int | None = None, retries: int | None = None,
                       retry_delay: float | None = None, timeout: float | None = None,
                       listeners: Sequence[Listener] = (), otel: Any = None, at: str | None = None) -> RunResult:
    """Run `machine` once, to a final state or a typed failure (see RUN_OPTIONS for every option).

    Never raises for a failed run — the RunResult says how it failed; raises CheckpointError when a
    resume is impossible and AnswerError when `answer` does not fit, ValueError for a `model_client` that
    is neither "auto" nor "litellm". `retries`, `retry_delay` and `timeout` set the default client's
    policy and `model_client` which client it is (not a `client` given here). A machine that asks a
    person checkpoints to DEFAULT_CHECKPOINT unless given `checkpoint` (`run_checkpoint`)."""
    opened = Trace(trace, content=trace_content) if isinstance(trace, str) else None
    telemetry, made = runner_telemetry(otel, trace_content)
    checkpoint = run_checkpoint(machine, checkpoint)
    store = CheckpointStore(checkpoint) if isinstance(checkpoint, str) else checkpoint
    try:
        engine = Engine(machine, client=runner_client(client, retries, retry_delay, timeout, model_client),
                        trace=opened or trace, checkpoint=store, model_map=model_map,  # type: ignore[arg-type]
                        script=runner_script(script), workspace=workspace, tools=tools,
                        unsafe_tools=unsafe_tools, max_tokens=max_tokens, listeners=listeners, otel=telemetry)
        if resume:
            return await engine.arun(None, run_id=resume, resume=True, answer=answer, path=at)
        if answer is not None:
            raise AnswerError("`answer` is for a waiting run that is resumed: give `resume=RUN_ID` too")
        return await engine.arun(inputs or {}, run_id=run_id)
    finally:
        if opened is not None:
            opened.close()
        if store is not None and store is not checkpoint:
            store.close()
        if made:
            telemetry.shutdown()


def run_machine(machine: MachineSpec, inputs: Mapping[str, Any] | None = None, **options: Any) -> RunResult:
    """`arun_machine` for synchronous code: the same run, the same options."""
    return run_sync(arun_machine(machine, inputs, **options))  # type: ignore[no-any-return]


def main(machine: MachineSpec, argv: list[str] | None = None, *, prog: str | None = None,
         batch_prog: str | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]), run the machine, print the RunResult JSON on stdout.

    Exit status: 0 final state, 1 typed failure (or failing self-tests), 2 usage error."""
    if argv is None:  # the program's own command line: this process is the runner
        try:
            status = _dispatch(machine, list(sys.argv[1:]), prog, batch_prog)
        except BrokenPipeError:
            status = stdout_gone()
        return leave_after_temporal(status)
    return _dispatch(machine, argv, prog, batch_prog)


def stdout_gone() -> int:
    """The exit status when the reader of standard output went away (`| head`): what it did not read is not
    wanted, so no traceback and status 0. Standard output is pointed at /dev/null first, so that the
    interpreter's last flush of what was left in its buffer cannot fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0




def _dispatch(machine: MachineSpec, argv: list[str], prog: str | None, batch_prog: str | None) -> int:
    if argv[:1] == ["batch"]:
        return _batch(machine, argv[1:], batch_prog or f"{prog or os.path.basename(sys.argv[0])} batch")
    if argv[:1] and argv[0] in RUNNER_TEMPORAL_COMMANDS:
        return runner_temporal_command(machine, argv[0], argv[1:], f"{prog or os.path.basename(sys.argv[0])} {argv[0]}")
    parser = runner_parser(machine, prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or argparse's own usage error
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    args.prog = parser.prog  # for the commands a run prints to go on with it
    try:
        if args.selftest and args.temporal:
            return temporal_selftest(machine, args)
        if args.selftest:
            return _selftest(machine, args.trace, args.trace_content, runner_otel(args))
        if args.list_runs:
            return _list_runs(args.checkpoint)
        return _main(machine, args)
    except (RunnerUsageError, TemporalUnavailable) as exc:
        print(printable(f"{parser.prog}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except TemporalRunError as exc:
        print(printable(f"{parser.prog}: error: {exc}"), file=sys.stderr)
        return EXIT_FAILED


def _main(machine: MachineSpec, args: argparse.Namespace) -> int:
    model_map = dict(runner_pairs(args.model_map, "--model-map"))
    if args.script and model_map:
        raise RunnerUsageError("--script answers every model call; it cannot be combined with --model-map")
    script = read_script(args.script) if args.script else None
    if args.answer is not None and not args.resume:
        raise RunnerUsageError("--answer needs --resume RUN_ID: the run that waits for the answer")
    if args.temporal:
        if args.checkpoint or args.resume or args.list_runs:
            raise RunnerUsageError("with --temporal the cluster's history is the run's checkpoint: --checkpoint, "
                                   "--resume and --list-runs do not apply (see `status` and `resume`)")
        return temporal_run(machine, args, read_inputs(machine, args.input, args.inputs_file), script,
                             model_map, runner_otel(args))
    args.checkpoint = run_checkpoint(machine, args.checkpoint or None)
    if args.resume and not args.checkpoint:
        raise RunnerUsageError("--resume needs --checkpoint DB: the database the run was checkpointed to")
    if args.resume and (args.input or args.inputs_file):
        print("note: a resumed run uses its stored inputs; --input/--inputs-file are ignored", file=sys.stderr)
    inputs = {} if args.resume else read_inputs(machine, args.input, args.inputs_file)
    if args.detach:
        raise RunnerUsageError("--detach starts a run on a Temporal cluster: give --temporal HOST:PORT too")
    check_secrets(machine)
    run_id = args.resume or args.run_id or new_run_id()
    try:
        store = CheckpointStore(args.checkpoint) if args.checkpoint else None
    except Exception as exc:  # noqa: BLE001 - sqlite3 errors: not a database, unwritable directory
        raise RunnerUsageError(f"cannot open --checkpoint {args.checkpoint}: {exc}") from None
    try:
        trace = Trace(args.trace, content=args.trace_content) if args.trace else None
    except OSError as exc:
        raise RunnerUsageError(f"cannot write --trace {args.trace}: {exc.strerror or exc}") from None
    if store is not None and not args.quiet:
        print(printable(f"run {run_id} (checkpoints in {args.checkpoint})"), file=sys.stderr)
    telemetry = runner_otel(args)
    from .progress import Progress

    engine = Engine(machine, client=default_client(args), trace=trace, checkpoint=store,
                    model_map=model_map, workspace=args.workspace, script=script,
                    unsafe_tools=args.unsafe_tools, max_tokens=args.max_tokens,
                    listeners=() if args.quiet else (Progress(end=False),),
                    started_with=started_with(args), otel=telemetry)
    try:
        with stopped_by_sigterm(engine):
            result = engine.run(inputs, run_id=run_id, resume=bool(args.resume), answer=args.answer, path=args.at)
    except (CheckpointError, AnswerError) as exc:
        raise RunnerUsageError(str(exc)) from None
    except KeyboardInterrupt as stop:
        what = "stopped by SIGTERM" if isinstance(stop, RunnerTerminated) else "interrupted"
        print(printable(f"{what}{resume_hint(run_id, store, args)}"), file=sys.stderr)
        return EXIT_TERMINATED if isinstance(stop, RunnerTerminated) else EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a crash is reported in one line, with how to resume
        print(printable(f"error: the run stopped: {type(exc).__name__}: {redact(str(exc))}"
                        f"{resume_hint(run_id, store, args)}"), file=sys.stderr)
        return EXIT_FAILED
    finally:
        if trace is not None:
            trace.close()
        if telemetry is not None:
            telemetry.shutdown()
    print(sink_json(result.to_json(), indent=2))
    if not args.quiet:
        print(runner_summary(result, store, args), file=sys.stderr)
    if result.status == "waiting":
        return EXIT_WAITING
    return EXIT_FINAL if result.ok else EXIT_FAILED


def _list_runs(checkpoint: str | None) -> int:
    if not checkpoint:
        raise RunnerUsageError("--list-runs needs --checkpoint DB")
    print(sink_json(CheckpointStore(checkpoint).list_runs(), indent=2))
    return EXIT_FINAL


def _selftest(machine: MachineSpec, trace_dir: str | None = None, trace_content: bool = False,
              otel: Any = None) -> int:
    from .testing import format_outcome, run_tests

    # (issue 24, front end) the test blocks of every machine the runner holds: the machine's own, then those
    # of each machine it runs, each machine once (a called machine is tested alone, by its own file's tests)
    trace_directory(trace_dir)
    machines = list(every_machine(machine))
    total = sum(len(m.tests) for m in machines)
    if not total:
        print(f"machine '{machine.name}' has no test blocks", file=sys.stderr)
        return EXIT_FINAL
    failed = 0
    try:
        for tested in machines:
            # a called machine's tests are named after it: `PASS  research: drafts findings`
            named = "" if tested is machine else f"{tested.name}: "
            for outcome in run_tests(tested, trace_dir=trace_dir, trace_content=trace_content, otel=otel):
                failed += not outcome.passed
                line = format_outcome(outcome)
                print(line[:6] + named + line[6:])
    finally:
        if otel is not None:
            otel.shutdown()
    print(f"{total - failed} passed, {failed} failed", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_FINAL


def _batch_parser(prog: str) -> argparse.ArgumentParser:
    from .batch import MATCH_MODES  # batch's modules only for `batch` (a worker, a run never load them)

    parser = argparse.ArgumentParser(
        prog=prog, description="Run the machine once per line of a JSON Lines file of cases, concurrently.",
        epilog="a case: {\"inputs\": {...}, \"id\": \"...\", \"expect\": ...} (id and expect optional)\n\n"
               "exit status: 0 every case reached a final state (and matched its expect), 1 otherwise, "
               "2 usage error, 4 no case failed but some wait for a person's answer, 130 interrupted "
               "(finished cases are kept; --resume continues)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--inputs", required=True, metavar="CASES.jsonl", help="the cases, one JSON object per line")
    parser.add_argument("--concurrency", type=positive_argument, default=8, metavar="N",
                        help="cases running at the same time (default 8)")
    parser.add_argument("--out", metavar="FILE", help="write one JSON line per case to FILE (default: stdout)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the batch whose results are in --out: finished cases are skipped")
    parser.add_argument("--checkpoint", metavar="DB", help="checkpoint every case's run to DB (default with "
                                                           "--out: FILE.checkpoints.sqlite)")
    parser.add_argument("--match", choices=MATCH_MODES, default="exact",
                        help="how a result is compared with a case's expect (default exact)")
    parser.add_argument("--trace", metavar="DIR", help="write one trace file per case into DIR")
    parser.add_argument("--trace-content", action="store_true", help="include messages and replies in traces")
    parser.add_argument("--model-map", action="append", default=[], metavar="OLD=NEW",
                        help="call model NEW wherever the machine names OLD (repeatable)")
    parser.add_argument("--max-tokens", type=positive_argument, metavar="N", help="cap every model reply")
    parser.add_argument("--retries", type=count_argument, metavar="N", help="retries of a failed model call")
    parser.add_argument("--retry-delay", type=seconds_argument, metavar="S", help="seconds before the first retry")
    parser.add_argument("--timeout", type=positive_seconds_argument, metavar="S", help="seconds one model call may take")
    model_client_option(parser)
    parser.add_argument("--script", metavar="FILE", help="answer every model call from the JSON script FILE")
    parser.add_argument("--unsafe-tools", action="store_true", help=UNSAFE_TOOLS_HELP)
    parser.add_argument("--quiet", action="store_true", help="no progress bar or per-case lines on stderr")
    parser.add_argument("--otel", action="store_true", help=OTEL_HELP.replace("the run's", "every case's"))
    temporal_options(parser)
    return parser


def _batch(machine: MachineSpec, argv: list[str], prog: str) -> int:
    from .batch import BatchError

    parser = _batch_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    args.run_prog = prog.removesuffix(" batch")  # the command that runs (and resumes) one case
    try:
        return _batch_main(machine, args)
    except (RunnerUsageError, BatchError) as exc:
        print(printable(f"{prog}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except TemporalUnavailable as exc:
        print(printable(f"{prog}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE


def _batch_main(machine: MachineSpec, args: argparse.Namespace) -> int:
    from .batch import BatchSummary, default_batch_checkpoint, run_batch

    model_map = dict(runner_pairs(args.model_map, "--model-map"))
    if args.script and model_map:
        raise RunnerUsageError("--script answers every model call; it cannot be combined with --model-map")
    script = read_script(args.script) if args.script else None
    check_secrets(machine)
    checkpoint = run_checkpoint(machine, args.checkpoint or (default_batch_checkpoint(args.out) if args.out
                                                              else None), temporal=bool(args.temporal))
    if args.resume and args.out and not os.path.exists(args.out):
        raise RunnerUsageError(f"--resume: there is no results file {args.out} to continue")
    try:
        store = CheckpointStore(checkpoint) if checkpoint else None
    except Exception as exc:  # noqa: BLE001 - sqlite3 errors: not a database, unwritable directory
        raise RunnerUsageError(f"cannot open the checkpoint database {checkpoint}: {exc}") from None
    trace_directory(args.trace)
    engine: Any
    telemetry = runner_otel(args)
    if args.temporal:
        engine = temporal_runner(machine, args, script, model_map, attach=True, otel=telemetry)
    else:
        engine = Engine(machine, client=default_client(args), checkpoint=store, model_map=model_map,
                        script=script, unsafe_tools=args.unsafe_tools, max_tokens=args.max_tokens, otel=telemetry)
    summary = BatchSummary()
    if args.temporal:
        summary.resume_hint = f"statewright resume RUN_ID --temporal {args.temporal} --answer '...'"
    elif checkpoint:
        args.prog, args.checkpoint = args.run_prog, checkpoint
        summary.resume_hint = resume_command("RUN_ID", args, answer=True)
    terminated = False
    try:
        with stopped_by_sigterm(engine), loaded_objects_frozen():
            run_sync(run_batch(engine, args.inputs, out_path=args.out, concurrency=args.concurrency,
                               resume=args.resume, match=args.match, trace_dir=args.trace,
                               trace_content=args.trace_content, quiet=args.quiet, summary=summary))
    except KeyboardInterrupt as stop:
        summary.interrupted = True
        terminated = isinstance(stop, RunnerTerminated)
    finally:
        if store is not None:
            store.close()
        if telemetry is not None:
            telemetry.shutdown()
    print(summary.table(), file=sys.stderr)
    if summary.interrupted:
        hint = f"; continue with --out {args.out} --resume" if args.out else ""
        print(f"{'stopped by SIGTERM' if terminated else 'interrupted'}{hint}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    if summary.waiting and summary.ok_but_waiting:
        return EXIT_WAITING
    return EXIT_FINAL if summary.ok else EXIT_FAILED
