"""The runner's command-line face and its Python entry points: inputs in, a RunResult (as JSON) out."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shlex
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .arguments import count_argument, positive_argument, positive_seconds_argument, seconds_argument
from .batch import MATCH_MODES, BatchError, BatchSummary, default_batch_checkpoint, run_batch
from .checkpoint import CheckpointError, CheckpointStore
from .client import ModelClient
from .core import InputError
from .engine import Engine, Listener, new_run_id, prepare_inputs, validate_input
from .progress import Progress, printable
from .result import AnswerError, RunResult
from .scripted import Script, ScriptError
from .spec import InputSpec, MachineSpec, every_machine
from .sync import run_sync
from .temporal import TemporalRunError, TemporalUnavailable
from .tool_secrets import SecretError, read_secrets
from .trace import Trace, redact, sink_json
from .untrusted import MAX_DEPTH, BorderError, read_json, read_json_file

EXIT_FINAL = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_WAITING = 4  # the run waits for a person's answer: resume it with --resume RUN_ID --answer '...'
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM


class RunnerTerminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, so it stops as Ctrl-C stops it: every task is cancelled, each
    tool's process group killed on the way out, the lease released and the last transition committed."""


@contextlib.contextmanager
def _stopped_by_sigterm(engine: Engine) -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        engine.kill_tool_processes()  # at once, before the run unwinds: no tool outlives the runner
        raise RunnerTerminated(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: the embedding program handles its own signals
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _loaded_objects_frozen() -> Iterator[None]:
    """The batch command's runs, with every object loaded before them (the machine, the modules, the
    model client's own) out of the cyclic collector's sight.

    A model client allocates many short-lived objects a call, and each full collection scans every
    object the process holds: with the compiled machine and the modules a command loads, a batch of a
    few hundred cases spent a sixth of its time there. Frozen objects are still freed by reference
    counting; they are thawed when the batch ends. A process that froze objects itself is left alone.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class RunnerUsageError(Exception):
    """The command line asks for something that cannot be done; exit status 2."""


# ---- the Python entry points ---------------------------------------------------------------------

# Every option of `run_machine`/`arun_machine` (and of a generated runner's own `run`/`arun`, whose
# signature and docstring are written from this table): name, annotation, default, what it does.
RUN_OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("trace", "str | Trace | None", "None", "append the run's JSONL trace to this file (or an open Trace)"),
    ("trace_content", "bool", "False", "include messages, replies and tool arguments/results in the trace"),
    ("checkpoint", "str | CheckpointStore | None", "None",
     "checkpoint after every transition to this SQLite file (or an open CheckpointStore)"),
    ("resume", "str | None", "None", "the id of a checkpointed run to continue (its stored inputs are used)"),
    ("answer", "Any", "None",
     "with resume: the answer of the person the run waits for (text, read as JSON for a typed question)"),
    ("run_id", "str | None", "None", "the id of a new run (default: a random one)"),
    ("model_map", "Mapping[str, str] | None", "None",
     "call model NEW wherever the machine names OLD; the key '*' maps every other model"),
    ("workspace", "str | None", "None",
     "the directory tools work in (default: a fresh .statewright/runs/RUN_ID/workspace)"),
    ("script", "Script | Mapping[str, Any] | None", "None",
     "answer every model call from this script (a Script or its JSON form) instead of a model"),
    ("client", "ModelClient | None", "None", "the model client (default: the one `model_client` names)"),
    ("model_client", "str | None", "None",
     ("'auto': OpenAI-compatible models over statewright's own HTTP, others through litellm; 'litellm': "
      "every model through litellm (default: $STATEWRIGHT_MODEL_CLIENT, else auto)")),
    ("tools", "Any", "None", "a tool registry to use instead of the machine's own tools"),
    ("unsafe_tools", "bool", "False",
     "run std.python and std.shell unconfined where their bubblewrap jail cannot run (the trace says so)"),
    ("max_tokens", "int | None", "None", "cap every model reply at this many tokens"),
    ("retries", "int | None", "None", "retries of a failed model call before a fallback takes over (default 3)"),
    ("retry_delay", "float | None", "None", "seconds before the first retry, doubling for each next one"),
    ("timeout", "float | None", "None", "seconds one model call may take (default 60)"),
    ("listeners", "Sequence[Callable[[str, dict[str, Any]], None]]", "()",
     "called with (event, fields) for every event of the run, as it happens"),
    ("otel", "Any", "None", "spans and metrics: True (from the OTEL_* environment), a TracerProvider, an OtelTelemetry"),
    ("at", "str | None", "None",
     "with resume and answer: the question it answers, by its path (investigate[2]/approve)"),
)


def _client(client: ModelClient | None, retries: int | None, retry_delay: float | None,
            timeout: float | None = None, model_client: str | None = None) -> ModelClient | None:
    """The model client a run uses: the one given, else the default client (`model_client` names which,
    model_client.py) with the retry policy asked for."""
    if client is not None:
        return client
    from .model_client import default_model_client, model_client_choice

    choice = model_client_choice(model_client)  # ValueError: neither the option nor the variable is known
    if retries is None and retry_delay is None and timeout is None and model_client is None:
        return None  # the engine makes the default client when the first call needs it
    from .model_calls import RetryPolicy

    policy = RetryPolicy()
    delay = retry_delay if retry_delay is not None else policy.initial_delay
    return default_model_client(RetryPolicy(max_retries=retries if retries is not None else policy.max_retries,
                                            initial_delay=delay, max_delay=max(policy.max_delay, delay),
                                            timeout=timeout if timeout is not None else policy.timeout), choice)


def _script(script: Script | Mapping[str, Any] | None) -> Script | None:
    if script is None or isinstance(script, Script):
        return script
    return Script.from_json(script)


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
        engine = Engine(machine, client=_client(client, retries, retry_delay, timeout, model_client),
                        trace=opened or trace, checkpoint=store, model_map=model_map,  # type: ignore[arg-type]
                        script=_script(script), workspace=workspace, tools=tools,
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


def runner_telemetry(otel: Any, content: bool = False) -> tuple[Any, bool]:
    """The OtelTelemetry a run's `otel` option asks for, and whether it was made here (then it is shut
    down after the run): True sets it up from the OTEL_* environment; a TracerProvider sends spans to it."""
    if otel is None or otel is False:
        return None, False
    from .otel import OtelTelemetry

    if isinstance(otel, OtelTelemetry):
        return otel, False
    if otel is True:
        from .otel_setup import otel_from_environment

        return otel_from_environment(content=content or None), True
    return OtelTelemetry(otel, content=content or None), False


DEFAULT_CHECKPOINT = os.path.join(".statewright", "checkpoints.sqlite")


def default_checkpoint() -> str:
    """Where the runs of a machine that asks a person are checkpointed unless told otherwise."""
    os.makedirs(os.path.dirname(DEFAULT_CHECKPOINT), exist_ok=True)
    return DEFAULT_CHECKPOINT


def asks_people(machine: MachineSpec) -> bool:
    """Whether a run of `machine` can pause for a person's answer: a state that asks, or a tool call that
    waits for approval, in it or in a machine it runs."""
    return any(state.kind == "human" or state.ask_before for each in every_machine(machine)
               for state in each.states.values())


def run_checkpoint(machine: MachineSpec, given: Any, *, temporal: bool = False) -> Any:
    """The checkpoint a run keeps, the one rule every face follows: the one given; else, for a machine that
    asks a person, DEFAULT_CHECKPOINT — a run that pauses for an answer must be able to resume — except on
    a Temporal cluster, whose history is every run's checkpoint (None there)."""
    if temporal:
        return None
    if given is None and asks_people(machine):
        return default_checkpoint()
    return given


def run_machine(machine: MachineSpec, inputs: Mapping[str, Any] | None = None, **options: Any) -> RunResult:
    """`arun_machine` for synchronous code: the same run, the same options."""
    return run_sync(arun_machine(machine, inputs, **options))  # type: ignore[no-any-return]


# ---- the command line ----------------------------------------------------------------------------


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _parser(machine: MachineSpec, prog: str | None) -> argparse.ArgumentParser:
    lines = []
    for spec in machine.inputs:
        default = "" if spec.required else f" (default {json.dumps(spec.default, default=str)})"
        lines.append(f"  {spec.name}: {_type_text(spec.annotation)}{default}")
    epilog = ("inputs:\n" + "\n".join(lines)) if lines else "this machine takes no inputs"
    epilog += ("\n\nexit status: 0 the run ended in a final state, 1 it failed (in a failing final state "
               "too; the failure is in the JSON result), 2 usage or configuration error (bad inputs, a secret not "
               "set, a bad --answer: the run keeps waiting), 4 the run waits for a person's answer, 130 "
               "interrupted, 143 stopped by SIGTERM\n\n"
               "The command `batch` runs the machine over a file of many inputs at once (see `batch --help`).\n"
               "On a Temporal cluster (pip install 'statewright[temporal]'): --temporal HOST:PORT runs it there; "
               "`worker` serves the machine; `status RUN_ID` follows a run and `resume RUN_ID` answers it.")
    parser = argparse.ArgumentParser(
        prog=prog, description=f"Run the state machine '{machine.name}'. {machine.description}".strip(),
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--input", action="append", default=[], metavar="KEY=VALUE",
                        help="an input value (repeatable); VALUE is read as JSON when it parses, else as text")
    parser.add_argument("--inputs-file", metavar="FILE", help="a JSON object of inputs (--input overrides it)")
    parser.add_argument("--trace", metavar="FILE", help="append the run's JSONL trace to FILE (with --selftest: a "
                                                      "directory, one trace per test block, as `statewright test "
                                                      "--trace DIR` writes)")
    parser.add_argument("--trace-content", action="store_true",
                        help="include messages, replies and tool arguments/results in the trace")
    parser.add_argument("--checkpoint", metavar="DB", help="checkpoint the run after every transition to the "
                                                           "SQLite database DB")
    parser.add_argument("--resume", metavar="RUN_ID", help="continue the checkpointed run RUN_ID "
                                                           "(needs --checkpoint; uses the run's stored inputs)")
    parser.add_argument("--answer", metavar="TEXT",
                        help="with --resume: the answer of the person the run waits for (read as JSON when the "
                             "question's type is not text and it parses)")
    parser.add_argument("--at", metavar="PATH",
                        help="with --answer: the question it answers, by its path (`approve`, or "
                             "`investigate[2]/approve` in a machine the run runs), when the run waits in "
                             "several places")
    parser.add_argument("--run-id", metavar="ID", help="the id of a new run (default: a random one)")
    parser.add_argument("--list-runs", action="store_true", help="list the runs in --checkpoint DB and exit")
    parser.add_argument("--model-map", action="append", default=[], metavar="OLD=NEW",
                        help="call model NEW wherever the machine names OLD (repeatable; OLD '*' maps every "
                             "model not mapped otherwise)")
    parser.add_argument("--workspace", metavar="DIR", help="the directory tools work in (default: a fresh "
                                                           ".statewright/runs/RUN_ID/workspace)")
    parser.add_argument("--max-tokens", type=positive_argument, metavar="N",
                        help="cap every model reply at N tokens")
    parser.add_argument("--retries", type=count_argument, metavar="N",
                        help="retries of a failed model call before a fallback takes over (default 3)")
    parser.add_argument("--retry-delay", type=seconds_argument, metavar="S",
                        help="seconds before the first retry, doubling for each next one (default 0.5)")
    parser.add_argument("--timeout", type=positive_seconds_argument, metavar="S",
                        help="seconds a model call may take on each model, every attempt and retry "
                             "together (default 60)")
    _model_client_option(parser)
    parser.add_argument("--script", metavar="FILE",
                        help="answer every model call from the JSON script FILE instead of a model "
                             "(the format of docs/execution.md)")
    parser.add_argument("--unsafe-tools", action="store_true", help=_UNSAFE_TOOLS_HELP)
    parser.add_argument("--selftest", action="store_true", help="run the machine's test blocks with scripted "
                                                                "replies and exit")
    parser.add_argument("--quiet", action="store_true",
                        help="print no progress on stderr (states, model calls, transitions)")
    _temporal_options(parser)
    parser.add_argument("--detach", action="store_true",
                        help="with --temporal: print the run's id as soon as it starts, and do not wait")
    parser.add_argument("--otel", action="store_true", help=_OTEL_HELP)
    return parser


def _temporal_options(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument("--temporal", metavar="HOST:PORT", required=required,
                        help="run on this Temporal service instead of in this process (needs the "
                             "statewright[temporal] extra; see docs/temporal.md)")
    parser.add_argument("--task-queue", metavar="QUEUE",
                        help="the Temporal task queue (default: one per machine and source version)")
    parser.add_argument("--namespace", metavar="NS", default="default", help="the Temporal namespace (default)")
    if not required:  # (a run's option: a worker serves runs of either kind)
        parser.add_argument("--durability", choices=("call", "task"), default="call", metavar="call|task",
                            help="with --temporal: record every model and tool call in the run's history before "
                                 "it goes on (call, the default: a killed worker makes no completed call again), "
                                 "or with the workflow task that made it (task: local activities, fewer round "
                                 "trips; a worker killed before its task completes makes that task's calls again)")


def _model_client_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-client", choices=("auto", "litellm"), metavar="auto|litellm",
                        help="litellm: every model call through litellm; auto: OpenAI-compatible models over "
                             "statewright's own HTTP client, others through litellm (default: "
                             "$STATEWRIGHT_MODEL_CLIENT, else auto)")


def _default_client(args: argparse.Namespace) -> ModelClient | None:
    """The client the command line asks for; an unknown STATEWRIGHT_MODEL_CLIENT is a usage error."""
    try:
        return _client(None, args.retries, args.retry_delay, args.timeout, args.model_client)
    except ValueError as exc:
        raise RunnerUsageError(str(exc)) from None


_OTEL_HELP = ("send the run's spans and metrics (OpenTelemetry, GenAI conventions) where the OTEL_* "
              "environment says (on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set; with --trace-content "
              "they hold prompts and replies); needs statewright[otel]")
_UNSAFE_TOOLS_HELP = ("let std.python and std.shell run with no confinement at all where their "
                              "bubblewrap jail cannot run (bubblewrap missing); recorded in the trace")








def _read_script(path: str) -> Script:
    try:
        return Script.from_file(path, f"--script {path}")
    except ScriptError as exc:
        raise RunnerUsageError(str(exc)) from None


def _pairs(items: list[str], option: str) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RunnerUsageError(f"{option} takes KEY=VALUE, not {item!r}")
        pairs.append((key.strip(), value))
    return pairs


def _cli_value(spec: InputSpec, raw: str) -> Any:
    """A command-line value: JSON when it parses and fits the input's type, else the text itself."""
    try:
        parsed: Any = read_json(raw, "the value")
    except ValueError:  # not JSON, or too deep to be read as JSON: the text itself
        return validate_input(spec, raw)
    try:
        return validate_input(spec, parsed)
    except ValueError as first:
        try:
            return validate_input(spec, raw)
        except ValueError:
            raise first from None


def read_inputs(machine: MachineSpec, pairs: list[str], inputs_file: str | None) -> dict[str, Any]:
    """The inputs a command line gives, checked against the machine's declarations (RunnerUsageError)."""
    given: dict[str, Any] = {}
    if inputs_file:
        try:
            data = read_json_file(inputs_file, f"--inputs-file {inputs_file}", max_depth=MAX_DEPTH + 1)  # {name: value}
        except OSError as exc:
            raise RunnerUsageError(f"cannot read --inputs-file {inputs_file}: {exc.strerror or exc}") from None
        except BorderError as exc:
            raise RunnerUsageError(str(exc)) from None
        except ValueError as exc:
            raise RunnerUsageError(f"--inputs-file {inputs_file} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise RunnerUsageError(f"--inputs-file {inputs_file} must hold a JSON object of inputs")
        given.update(data)
    specs = {spec.name: spec for spec in machine.inputs}
    problems = []
    unusable = set()
    for key, raw in _pairs(pairs, "--input"):
        spec = specs.get(key)
        if spec is None:
            given[key] = raw  # reported as unknown, with a suggestion, below
            continue
        try:
            given[key] = _cli_value(spec, raw)
        except ValueError as exc:
            problems.append(f"input '{key}': {exc}")
            unusable.add(key)
    values: dict[str, Any] = {}
    try:
        values = prepare_inputs(machine, {k: v for k, v in given.items() if k not in unusable})
    except InputError as exc:
        problems += [p for p in exc.problems if not any(f"input '{key}'" in p for key in unusable)]
    if problems:
        raise RunnerUsageError("invalid inputs:\n  " + "\n  ".join(problems))
    return values


def check_secrets(machine: MachineSpec) -> None:
    """Every secret the machine's tools name is set in the environment (RunnerUsageError naming each one
    that is not): a configuration error, found before the run starts."""
    try:
        read_secrets(machine, os.environ)
    except SecretError as exc:
        raise RunnerUsageError("the machine's secrets are not available:\n  " + "\n  ".join(exc.problems)) from None


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


def leave_after_temporal(status: int) -> int:
    """`status`, or — when the Temporal SDK was used — the end of the process with it: the SDK's native
    threads can still be winding down while the interpreter finalizes, which aborts the process (a
    command that used the cluster has written all it writes; nothing is left to clean up)."""
    if "temporalio" in sys.modules:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)
    return status


def _dispatch(machine: MachineSpec, argv: list[str], prog: str | None, batch_prog: str | None) -> int:
    if argv[:1] == ["batch"]:
        return _batch(machine, argv[1:], batch_prog or f"{prog or os.path.basename(sys.argv[0])} batch")
    if argv[:1] and argv[0] in RUNNER_TEMPORAL_COMMANDS:
        return runner_temporal_command(machine, argv[0], argv[1:], f"{prog or os.path.basename(sys.argv[0])} {argv[0]}")
    parser = _parser(machine, prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or argparse's own usage error
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    args.prog = parser.prog  # for the commands a run prints to go on with it
    try:
        if args.selftest and args.temporal:
            return _temporal_selftest(machine, args)
        if args.selftest:
            return _selftest(machine, args.trace, args.trace_content, _otel(args))
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
    model_map = dict(_pairs(args.model_map, "--model-map"))
    if args.script and model_map:
        raise RunnerUsageError("--script answers every model call; it cannot be combined with --model-map")
    script = _read_script(args.script) if args.script else None
    if args.answer is not None and not args.resume:
        raise RunnerUsageError("--answer needs --resume RUN_ID: the run that waits for the answer")
    if args.temporal:
        if args.checkpoint or args.resume or args.list_runs:
            raise RunnerUsageError("with --temporal the cluster's history is the run's checkpoint: --checkpoint, "
                                   "--resume and --list-runs do not apply (see `status` and `resume`)")
        return _temporal_run(machine, args, read_inputs(machine, args.input, args.inputs_file), script,
                             model_map, _otel(args))
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
    telemetry = _otel(args)
    engine = Engine(machine, client=_default_client(args), trace=trace, checkpoint=store,
                    model_map=model_map, workspace=args.workspace, script=script,
                    unsafe_tools=args.unsafe_tools, max_tokens=args.max_tokens,
                    listeners=() if args.quiet else (Progress(end=False),),
                    started_with=_started_with(args), otel=telemetry)
    try:
        with _stopped_by_sigterm(engine):
            result = engine.run(inputs, run_id=run_id, resume=bool(args.resume), answer=args.answer, path=args.at)
    except (CheckpointError, AnswerError) as exc:
        raise RunnerUsageError(str(exc)) from None
    except KeyboardInterrupt as stop:
        what = "stopped by SIGTERM" if isinstance(stop, RunnerTerminated) else "interrupted"
        print(printable(f"{what}{_resume_hint(run_id, store, args)}"), file=sys.stderr)
        return EXIT_TERMINATED if isinstance(stop, RunnerTerminated) else EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a crash is reported in one line, with how to resume
        print(printable(f"error: the run stopped: {type(exc).__name__}: {redact(str(exc))}"
                        f"{_resume_hint(run_id, store, args)}"), file=sys.stderr)
        return EXIT_FAILED
    finally:
        if trace is not None:
            trace.close()
        if telemetry is not None:
            telemetry.shutdown()
    print(sink_json(result.to_json(), indent=2))
    if not args.quiet:
        print(_summary(result, store, args), file=sys.stderr)
    if result.status == "waiting":
        return EXIT_WAITING
    return EXIT_FINAL if result.ok else EXIT_FAILED


def _otel(args: argparse.Namespace, *, planned: bool = False) -> Any:
    """The OtelTelemetry a command asks for (`--otel`, or the OTLP endpoint variable), or None."""
    from .otel_setup import OtelUnavailable, otel_for_command

    try:
        return otel_for_command(bool(getattr(args, "otel", False)), content=bool(getattr(args, "trace_content", False)),
                                planned=planned)
    except OtelUnavailable as exc:
        raise RunnerUsageError(str(exc)) from None


def _started_with(args: argparse.Namespace) -> dict[str, str]:
    """What a checkpointed run records of how it was started, so that `statewright resume RUN_ID` alone
    continues it the same way: the script that answers its model calls."""
    return {"script": os.path.abspath(args.script)} if args.script else {}


def _resume_command(run_id: str, args: argparse.Namespace, answer: bool = False) -> str:
    """The command that continues run `run_id` as it was started (its checkpoint database, its script)."""
    if args.prog.startswith("statewright "):  # the run records its script and file: `resume` finds them
        parts = ["statewright", "resume", shlex.quote(run_id)]
        if os.path.abspath(args.checkpoint) != os.path.abspath(DEFAULT_CHECKPOINT):
            parts += ["--checkpoint", shlex.quote(args.checkpoint)]
    else:
        prog = args.prog if not args.prog.endswith(".py") else f"python {shlex.quote(args.prog)}"
        parts = [prog, "--checkpoint", shlex.quote(args.checkpoint), "--resume", shlex.quote(run_id)]
        if args.script:
            parts += ["--script", shlex.quote(args.script)]
    if answer:
        parts += ["--answer", "'...'"]
    return " ".join(parts)


def _resume_hint(run_id: str, store: CheckpointStore | None, args: argparse.Namespace) -> str:
    if store is None:
        return ""
    return f"; continue it with: {_resume_command(run_id, args)}"


def _summary(result: RunResult, store: CheckpointStore | None, args: argparse.Namespace) -> str:
    """The line (two, for a waiting run) a run ends with on stderr; every name and message in it, and the
    paths, escaped for the terminal, and the environment's keys redacted (a question quotes outputs)."""
    return printable(redact(_summary_text(result, store, args)))


def _summary_text(result: RunResult, store: CheckpointStore | None, args: argparse.Namespace) -> str:
    usage = result.usage
    spent = f"{len(result.path)} states, {usage.tokens} tokens, ${usage.cost_usd:.4f}"
    if result.ok:
        return f"final state {result.final_state} ({spent})"
    if result.waiting is not None:
        waits = result.waits or [result.waiting]
        lines = [f"waiting for {'approval of a tool call' if w.kind == 'approval' else 'an answer'} at state "
                 f"{w.path or w.state}: {w.question}" for w in waits]
        lines[0] += f" ({spent})"
        command = _resume_command(result.run_id, args, answer=True)
        if len(waits) > 1:  # answered one at a time, each naming the question it answers
            return "\n".join([*lines, f"answer each with: {command} --at PATH"])
        return "\n".join([*lines, f"answer it with: {command}"])
    failure = result.failure
    assert failure is not None
    kind = f"limit {failure.limit}" if failure.kind == "limit" else failure.kind
    where = f" at {failure.origin}" if failure.origin else ""  # the .fsm line of the construct that failed
    hint = _resume_hint(result.run_id, store, args) if failure.kind in ("model", "script") else ""
    return f"run failed ({kind}){where}: {failure.message} ({spent}){hint}"


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


# ---- batch: one machine over many inputs -----------------------------------------------------------


def _batch_parser(prog: str) -> argparse.ArgumentParser:
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
    _model_client_option(parser)
    parser.add_argument("--script", metavar="FILE", help="answer every model call from the JSON script FILE")
    parser.add_argument("--unsafe-tools", action="store_true", help=_UNSAFE_TOOLS_HELP)
    parser.add_argument("--quiet", action="store_true", help="no progress bar or per-case lines on stderr")
    parser.add_argument("--otel", action="store_true", help=_OTEL_HELP.replace("the run's", "every case's"))
    _temporal_options(parser)
    return parser


def _batch(machine: MachineSpec, argv: list[str], prog: str) -> int:
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
    model_map = dict(_pairs(args.model_map, "--model-map"))
    if args.script and model_map:
        raise RunnerUsageError("--script answers every model call; it cannot be combined with --model-map")
    script = _read_script(args.script) if args.script else None
    check_secrets(machine)
    checkpoint = run_checkpoint(machine, args.checkpoint or (default_batch_checkpoint(args.out) if args.out
                                                              else None), temporal=bool(args.temporal))
    if args.resume and args.out and not os.path.exists(args.out):
        raise RunnerUsageError(f"--resume: there is no results file {args.out} to continue")
    try:
        store = CheckpointStore(checkpoint) if checkpoint else None
    except Exception as exc:  # noqa: BLE001 - sqlite3 errors: not a database, unwritable directory
        raise RunnerUsageError(f"cannot open the checkpoint database {checkpoint}: {exc}") from None
    if args.trace:
        os.makedirs(args.trace, exist_ok=True)
    engine: Any
    telemetry = _otel(args)
    if args.temporal:
        engine = _temporal_runner(machine, args, script, model_map, attach=True, otel=telemetry)
    else:
        engine = Engine(machine, client=_default_client(args), checkpoint=store, model_map=model_map,
                        script=script, unsafe_tools=args.unsafe_tools, max_tokens=args.max_tokens, otel=telemetry)
    summary = BatchSummary()
    if args.temporal:
        summary.resume_hint = f"statewright resume RUN_ID --temporal {args.temporal} --answer '...'"
    elif checkpoint:
        args.prog, args.checkpoint = args.run_prog, checkpoint
        summary.resume_hint = _resume_command("RUN_ID", args, answer=True)
    terminated = False
    try:
        with _stopped_by_sigterm(engine), _loaded_objects_frozen():
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


# ---- Temporal: runs on a cluster, workers, a run's status and a person's answer -------------------------------

RUNNER_TEMPORAL_COMMANDS = ("worker", "status", "resume")


def _temporal_address(text: str) -> str:
    from .temporal import temporal_address

    try:
        return temporal_address(text)
    except ValueError as exc:
        raise RunnerUsageError(str(exc)) from None


def _temporal_runner(machine: MachineSpec, args: argparse.Namespace, script: Script | None,
                     model_map: Mapping[str, str], attach: bool = False, otel: Any = None) -> Any:
    from .temporal import TemporalRunner, temporal_sdk

    if getattr(args, "unsafe_tools", False):
        raise RunnerUsageError("with --temporal, tools run on the workers: --unsafe-tools is a worker's option "
                               "(`worker --unsafe-tools`)")
    if getattr(args, "model_client", None):
        raise RunnerUsageError("with --temporal, the workers call the models: --model-client is a worker's option "
                               "(`worker --model-client`)")
    temporal_sdk()  # says how to install temporalio when it is missing
    return TemporalRunner(machine, _temporal_address(args.temporal), task_queue=args.task_queue,
                          namespace=args.namespace, model_map=model_map, script=script,
                          workspace=getattr(args, "workspace", None), max_tokens=args.max_tokens,
                          retries=args.retries, retry_delay=args.retry_delay, timeout=args.timeout, attach=attach,
                          otel=otel, durability=getattr(args, "durability", "call"))


def _temporal_run(machine: MachineSpec, args: argparse.Namespace, inputs: dict[str, Any],
                  script: Script | None, model_map: Mapping[str, str], otel: Any = None) -> int:
    """Start the run on the cluster; wait for its result (or, with --detach, print its id)."""
    from .temporal import temporal_copy_trace, temporal_result

    runner = _temporal_runner(machine, args, script, model_map, otel=otel)
    try:
        trace = Trace(args.trace, content=args.trace_content) if args.trace else None
    except OSError as exc:
        raise RunnerUsageError(f"cannot write --trace {args.trace}: {exc.strerror or exc}") from None

    started: list[str] = []  # the run's id, for the hint when waiting is interrupted

    async def go() -> RunResult | None:
        handle = await runner.start(inputs, run_id=args.run_id, trace=trace is not None,
                                    trace_content=args.trace_content)
        started.append(handle.id)
        if args.detach:
            print(handle.id)
            return None
        if not args.quiet:
            print(f"run {handle.id} on Temporal at {runner.address}, task queue {runner.task_queue}",
                  file=sys.stderr)
        try:
            result = await temporal_result(handle)
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
        if trace is not None:
            await temporal_copy_trace(handle, trace)
        return result

    try:
        with _stopped_by_sigterm(runner):
            result = run_sync(go())
    except KeyboardInterrupt:
        run_id = started[0] if started else args.run_id or "RUN_ID"
        print(f"stopped waiting; the run goes on on the cluster (status: `status {run_id} "
              f"--temporal {args.temporal}`)", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if trace is not None:
            trace.close()
        if otel is not None:
            otel.shutdown()
    if result is None:
        return EXIT_FINAL
    print(sink_json(result.to_json(), indent=2))
    print(_summary(result, None, args), file=sys.stderr)
    return EXIT_FINAL if result.ok else EXIT_FAILED


def _temporal_selftest(machine: MachineSpec, args: argparse.Namespace) -> int:
    from .testing import format_outcome

    outcomes = run_tests_on_temporal(machine, _temporal_address(args.temporal), task_queue=args.task_queue,
                                     namespace=args.namespace)
    failed = sum(not outcome.passed for outcome in outcomes)
    for outcome in outcomes:
        print(format_outcome(outcome))
    print(f"{len(outcomes) - failed} passed, {failed} failed", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_FINAL


def run_tests_on_temporal(machine: MachineSpec, address: str, *, task_queue: str | None = None,
                          namespace: str = "default", trace_dir: str | None = None, trace_content: bool = False,
                          name_filter: str | None = None, otel: Any = None) -> list[Any]:
    """The machine's test blocks run on the cluster (TestOutcomes, as `testing.run_tests` gives)."""
    from .temporal import TemporalRunner, temporal_arun_tests, temporal_sdk

    temporal_sdk()
    runner = TemporalRunner(machine, address, task_queue=task_queue, namespace=namespace, otel=otel)
    return list(run_sync(temporal_arun_tests(machine, runner, trace_dir=trace_dir, trace_content=trace_content,
                                             name_filter=name_filter)))


def _temporal_parser(command: str, prog: str) -> argparse.ArgumentParser:
    descriptions = {
        "worker": "Serve this machine's runs from a Temporal task queue, until SIGTERM or Ctrl-C.",
        "status": "Show what a run on the cluster is doing: its state, its path, whether it waits for a person.",
        "resume": "Send a person's answer to a run that waits for one (a Temporal signal).",
    }
    parser = argparse.ArgumentParser(prog=prog, description=descriptions[command],
                                     epilog="needs the statewright[temporal] extra; see docs/temporal.md")
    if command == "worker":
        _temporal_options(parser, required=True)
        parser.add_argument("--concurrency", type=positive_argument, default=64, metavar="N",
                            help="model and tool calls this worker makes at once (default 64)")
        parser.add_argument("--unsafe-tools", action="store_true", help=_UNSAFE_TOOLS_HELP)
        _model_client_option(parser)
        parser.add_argument("--otel", action="store_true", help=_OTEL_HELP.replace("the run's", "its runs'"))
        parser.add_argument("--trace-content", action="store_true",
                            help="with --otel: prompts, replies and tool arguments in the spans")
    else:
        parser.add_argument("run_id", metavar="RUN_ID", help="the run's id (its workflow id)")
        parser.add_argument("--temporal", metavar="HOST:PORT", required=True, help="the Temporal service")
        parser.add_argument("--namespace", metavar="NS", default="default", help="the Temporal namespace (default)")
    if command == "status":
        parser.add_argument("--trace", metavar="FILE", help="also write the run's trace so far to FILE (when it "
                                                            "was started with a trace)")
    if command == "resume":
        parser.add_argument("--answer", required=True, metavar="TEXT", help="the person's answer")
        parser.add_argument("--at", "--state", dest="state", metavar="PATH",
                            help="the question the answer is for, by its path (a state, or investigate[2]/approve "
                                 "in a machine the run runs; default: the one the run waits on)")
        parser.add_argument("--by", metavar="NAME", help="who answers (recorded in the trace)")
    return parser


def runner_temporal_command(machine: MachineSpec | None, command: str, argv: list[str], prog: str) -> int:
    """`worker`, `status RUN_ID` or `resume RUN_ID --answer TEXT`; `machine` is the one a worker serves."""
    parser = _temporal_parser(command, prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    return runner_temporal_dispatch(machine, command, args, prog)


def runner_temporal_dispatch(machine: MachineSpec | None, command: str, args: argparse.Namespace, prog: str) -> int:
    """`runner_temporal_command` with its arguments parsed already (`statewright status` declares its own)."""
    try:
        address = _temporal_address(args.temporal)
        if command == "worker":
            if machine is None:
                raise RunnerUsageError("a worker needs a machine to serve")
            return serve_on_temporal([machine], address, task_queue=args.task_queue, namespace=args.namespace,
                                     concurrency=args.concurrency, unsafe_tools=args.unsafe_tools,
                                     model_client=args.model_client, otel=_otel(args, planned=True))
        if command == "status":
            return _temporal_status(address, args)
        return _temporal_resume(address, args)
    except (RunnerUsageError, TemporalUnavailable) as exc:
        print(printable(f"{prog}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except TemporalRunError as exc:
        print(printable(f"{prog}: error: {exc}"), file=sys.stderr)
        return EXIT_FAILED


def serve_on_temporal(machines: Sequence[MachineSpec], address: str, *, task_queue: str | None = None,
                      namespace: str = "default", concurrency: int = 64, unsafe_tools: bool = False,
                      model_client: str | None = None, otel: Any = None) -> int:
    """Run a worker for `machines` until SIGTERM or Ctrl-C (in-flight calls are handed back to the cluster).

    `model_client` ("auto" or "litellm") is the worker's choice of client for every call it makes: it is
    set as STATEWRIGHT_MODEL_CLIENT in this process, where the worker's activities read it."""
    from .model_client import MODEL_CLIENT_ENV, model_client_choice
    from .temporal import temporal_sdk
    from .temporal_worker import temporal_serve

    try:
        os.environ[MODEL_CLIENT_ENV] = model_client_choice(model_client)
    except ValueError as exc:
        print(f"worker: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    temporal_sdk()

    def announce(text: str) -> None:
        print(f"worker: {text}", file=sys.stderr, flush=True)

    try:
        run_sync(temporal_serve(machines, address, task_queue=task_queue, namespace=namespace,
                                concurrency=concurrency, announce=announce, unsafe_tools=unsafe_tools, otel=otel))
    except KeyboardInterrupt:
        pass
    except SecretError as exc:  # this worker could not run the tools of a machine it serves
        print(f"worker: error: {exc}", file=sys.stderr)
        return leave_after_temporal(EXIT_USAGE)
    finally:
        if otel is not None:
            otel.shutdown()
    print("worker: stopped", file=sys.stderr)
    return leave_after_temporal(EXIT_FINAL)


def _temporal_status(address: str, args: argparse.Namespace) -> int:
    from .temporal import temporal_status

    data = run_sync(temporal_status(address, args.run_id, args.namespace))
    if args.trace:
        _temporal_fetch_trace(address, args)
    print(sink_json(data, indent=2))
    waiting = data.get("waiting")
    line = f"run {args.run_id}: {data.get('status') or data.get('workflow_status')}"
    if data.get("state"):
        line += f" in state {data['state']} after {data.get('steps', 0)} steps"
    if waiting:
        line += f"; waiting for an answer since {waiting.get('since')} (resume {args.run_id} --answer TEXT)"
    print(printable(line), file=sys.stderr)
    return EXIT_FINAL


def _temporal_fetch_trace(address: str, args: argparse.Namespace) -> None:
    from .temporal import temporal_connect, temporal_copy_trace

    async def fetch() -> int:
        client = await temporal_connect(address, args.namespace)
        trace = Trace(args.trace)
        try:
            return await temporal_copy_trace(client.get_workflow_handle(args.run_id), trace)
        finally:
            trace.close()

    print(f"wrote {run_sync(fetch())} events to {args.trace}", file=sys.stderr)


def _temporal_resume(address: str, args: argparse.Namespace) -> int:
    from .temporal import temporal_answer

    refused = run_sync(temporal_answer(address, args.run_id, args.answer, state=args.state, by=args.by,
                                       namespace=args.namespace))
    if refused is not None:
        print(f"the run refused the answer and keeps waiting: {printable(refused)}", file=sys.stderr)
        return EXIT_USAGE
    print(f"sent the answer to run {args.run_id}", file=sys.stderr)
    return EXIT_FINAL
