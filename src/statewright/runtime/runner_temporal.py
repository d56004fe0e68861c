"""A runner's Temporal face: a run, its tests, a worker, its status and answers on a cluster."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .arguments import positive_argument
from .result import RunResult
from .runner_options import (
    EXIT_FAILED,
    EXIT_FINAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    OTEL_HELP,
    UNSAFE_TOOLS_HELP,
    RunnerUsageError,
    leave_after_temporal,
    model_client_option,
    runner_otel,
    runner_summary,
    stopped_by_sigterm,
    temporal_options,
)
from .scripted import Script
from .spec import MachineSpec
from .sync import run_sync
from .temporal import TemporalRunError, TemporalUnavailable
from .tool_secrets import SecretError
from .trace import Trace, printable, sink_json

RUNNER_TEMPORAL_COMMANDS = ("worker", "status", "resume")


def _temporal_address(text: str) -> str:
    from .temporal import temporal_address

    try:
        return temporal_address(text)
    except ValueError as exc:
        raise RunnerUsageError(str(exc)) from None


def temporal_runner(machine: MachineSpec, args: argparse.Namespace, script: Script | None,
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


def temporal_run(machine: MachineSpec, args: argparse.Namespace, inputs: dict[str, Any],
                  script: Script | None, model_map: Mapping[str, str], otel: Any = None) -> int:
    """Start the run on the cluster; wait for its result (or, with --detach, print its id)."""
    from .temporal import temporal_copy_trace, temporal_result

    runner = temporal_runner(machine, args, script, model_map, otel=otel)
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
        with stopped_by_sigterm(runner):
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
    print(runner_summary(result, None, args), file=sys.stderr)
    return EXIT_FINAL if result.ok else EXIT_FAILED


def temporal_selftest(machine: MachineSpec, args: argparse.Namespace) -> int:
    from .testing import format_outcome

    outcomes = run_tests_on_temporal(machine, _temporal_address(args.temporal), task_queue=args.task_queue,
                                     namespace=args.namespace, durability=getattr(args, "durability", "call"))
    failed = sum(not outcome.passed for outcome in outcomes)
    for outcome in outcomes:
        print(format_outcome(outcome))
    print(f"{len(outcomes) - failed} passed, {failed} failed", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_FINAL


def run_tests_on_temporal(machine: MachineSpec, address: str, *, task_queue: str | None = None,
                          namespace: str = "default", trace_dir: str | None = None, trace_content: bool = False,
                          name_filter: str | None = None, otel: Any = None, durability: str = "call") -> list[Any]:
    """The machine's test blocks run on the cluster (TestOutcomes, as `testing.run_tests` gives), each call
    recorded as `durability` says."""
    from .temporal import TemporalRunner, temporal_arun_tests, temporal_sdk

    temporal_sdk()
    runner = TemporalRunner(machine, address, task_queue=task_queue, namespace=namespace, otel=otel,
                            durability=durability)
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
        temporal_options(parser, required=True)
        parser.add_argument("--concurrency", type=positive_argument, default=64, metavar="N",
                            help="model and tool calls this worker makes at once (default 64)")
        parser.add_argument("--unsafe-tools", action="store_true", help=UNSAFE_TOOLS_HELP)
        model_client_option(parser)
        parser.add_argument("--otel", action="store_true", help=OTEL_HELP.replace("the run's", "its runs'"))
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
                                     model_client=args.model_client, otel=runner_otel(args, planned=True))
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
