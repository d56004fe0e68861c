"""What a runner is asked for: its options, inputs, script, client, telemetry and checkpoint."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shlex
import signal
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from .arguments import (
    count_argument,
    durability_option,
    positive_argument,
    positive_seconds_argument,
    seconds_argument,
)
from .checkpoint import CheckpointStore
from .client import ModelClient
from .core import InputError
from .engine import Engine, prepare_inputs, validate_input
from .result import RunResult
from .scripted import Script, ScriptError
from .spec import InputSpec, MachineSpec, every_machine
from .tool_secrets import SecretError, read_secrets
from .trace import printable, redact
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
def stopped_by_sigterm(engine: Engine) -> Iterator[None]:
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
def loaded_objects_frozen() -> Iterator[None]:
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


def trace_directory(path: str | None) -> None:
    """Make `--trace DIR` (where tests and a batch's cases write their traces) before anything runs, or say
    why it cannot be: a file there, or a directory that cannot be made, had been an internal error."""
    if not path:
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise RunnerUsageError(f"cannot write traces into --trace {path}: it is a file, not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise RunnerUsageError(f"cannot write traces into --trace {path}: {exc.strerror or exc}") from None


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


def runner_client(client: ModelClient | None, retries: int | None, retry_delay: float | None,
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


def runner_script(script: Script | Mapping[str, Any] | None) -> Script | None:
    if script is None or isinstance(script, Script):
        return script
    return Script.from_json(script)


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


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def runner_parser(machine: MachineSpec, prog: str | None) -> argparse.ArgumentParser:
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
    model_client_option(parser)
    parser.add_argument("--script", metavar="FILE",
                        help="answer every model call from the JSON script FILE instead of a model "
                             "(the format of docs/execution.md)")
    parser.add_argument("--unsafe-tools", action="store_true", help=UNSAFE_TOOLS_HELP)
    parser.add_argument("--selftest", action="store_true", help="run the machine's test blocks with scripted "
                                                                "replies and exit")
    parser.add_argument("--quiet", action="store_true",
                        help="print no progress on stderr (states, model calls, transitions)")
    temporal_options(parser)
    parser.add_argument("--detach", action="store_true",
                        help="with --temporal: print the run's id as soon as it starts, and do not wait")
    parser.add_argument("--otel", action="store_true", help=OTEL_HELP)
    return parser


def temporal_options(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument("--temporal", metavar="HOST:PORT", required=required,
                        help="run on this Temporal service instead of in this process (needs the "
                             "statewright[temporal] extra; see docs/temporal.md)")
    parser.add_argument("--task-queue", metavar="QUEUE",
                        help="the Temporal task queue (default: one per machine and source version)")
    parser.add_argument("--namespace", metavar="NS", default="default", help="the Temporal namespace (default)")
    if not required:  # (a run's option: a worker serves runs of either kind)
        durability_option(parser)


def model_client_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-client", choices=("auto", "litellm"), metavar="auto|litellm",
                        help="litellm: every model call through litellm; auto: OpenAI-compatible models over "
                             "statewright's own HTTP client, others through litellm (default: "
                             "$STATEWRIGHT_MODEL_CLIENT, else auto)")


def default_client(args: argparse.Namespace) -> ModelClient | None:
    """The client the command line asks for; an unknown STATEWRIGHT_MODEL_CLIENT is a usage error."""
    try:
        return runner_client(None, args.retries, args.retry_delay, args.timeout, args.model_client)
    except ValueError as exc:
        raise RunnerUsageError(str(exc)) from None


OTEL_HELP = ("send the run's spans and metrics (OpenTelemetry, GenAI conventions) where the OTEL_* "
              "environment says (on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set; with --trace-content "
              "they hold prompts and replies); needs statewright[otel]")


UNSAFE_TOOLS_HELP = ("let std.python and std.shell run with no confinement at all where their "
                              "bubblewrap jail cannot run (bubblewrap missing); recorded in the trace")


def read_script(path: str) -> Script:
    try:
        return Script.from_file(path, f"--script {path}")
    except ScriptError as exc:
        raise RunnerUsageError(str(exc)) from None


def runner_pairs(items: list[str], option: str) -> list[tuple[str, str]]:
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
    for key, raw in runner_pairs(pairs, "--input"):
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


def runner_otel(args: argparse.Namespace, *, planned: bool = False) -> Any:
    """The OtelTelemetry a command asks for (`--otel`, or the OTLP endpoint variable), or None."""
    from .otel_setup import OtelUnavailable, otel_for_command

    try:
        return otel_for_command(bool(getattr(args, "otel", False)), content=bool(getattr(args, "trace_content", False)),
                                planned=planned)
    except OtelUnavailable as exc:
        raise RunnerUsageError(str(exc)) from None


def started_with(args: argparse.Namespace) -> dict[str, str]:
    """What a checkpointed run records of how it was started, so that `statewright resume RUN_ID` alone
    continues it the same way: the script that answers its model calls."""
    return {"script": os.path.abspath(args.script)} if args.script else {}


def resume_command(run_id: str, args: argparse.Namespace, answer: bool = False) -> str:
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


def resume_hint(run_id: str, store: CheckpointStore | None, args: argparse.Namespace) -> str:
    if store is None:
        return ""
    return f"; continue it with: {resume_command(run_id, args)}"


def runner_summary(result: RunResult, store: CheckpointStore | None, args: argparse.Namespace) -> str:
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
        command = resume_command(result.run_id, args, answer=True)
        if len(waits) > 1:  # answered one at a time, each naming the question it answers
            return "\n".join([*lines, f"answer each with: {command} --at PATH"])
        return "\n".join([*lines, f"answer it with: {command}"])
    failure = result.failure
    assert failure is not None
    kind = f"limit {failure.limit}" if failure.kind == "limit" else failure.kind
    where = f" at {failure.origin}" if failure.origin else ""  # the .fsm line of the construct that failed
    hint = resume_hint(result.run_id, store, args) if failure.kind in ("model", "script") else ""
    return f"run failed ({kind}){where}: {failure.message} ({spent}){hint}"


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
