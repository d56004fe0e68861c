"""A worker process for the Temporal tests: `python -m support.temporal_worker --temporal HOST:PORT --spec F`.

It serves the spec (as written and optimized) like `statewright worker`, and with `--ask STATE` runs it on a
core in which STATE waits for a person's answer instead of calling its agent: the effect the language's
human states will yield, so the workflow's signal path can be proven before the core has one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from statewright import api
from statewright.runtime.core import RunCore
from statewright.runtime.temporal import TemporalMachines, temporal_serve


class AwaitAnswer:
    """The stand-in effect: wait for a person's answer in `state` (the workflow handles it by this name)."""

    def __init__(self, state: str, prompt: str, timeout: float | None) -> None:
        self.state = state
        self.prompt = prompt
        self.timeout = timeout


def asking_core(ask: str, timeout: float | None) -> type[RunCore]:
    class AskingCore(RunCore):
        def _agent_step(self, run: Any, plan: Any, feedback: str | None) -> Any:
            if plan.name != ask:
                return (yield from super()._agent_step(run, plan, feedback))
            instruction = self._render(run, plan.instruction, plan.name)
            try:
                answer = yield AwaitAnswer(plan.name, instruction, timeout)
            except Exception as exc:  # noqa: BLE001 - the stand-in's timeout: the answer says so
                answer = f"no answer: {exc}"
            return answer, instruction

    return AskingCore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--temporal", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--task-queue")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--ask")
    parser.add_argument("--ask-timeout", type=float)
    args = parser.parse_args()
    comp = api.check_path(args.spec)
    machines = [api.runtime_machine(comp), api.runtime_machine(comp, level=0)]
    registry = TemporalMachines()
    for machine in machines:
        if args.ask:
            registry.add(machine, core_class=asking_core(args.ask, args.ask_timeout))
        else:
            registry.add(machine)

    def announce(text: str) -> None:
        print(f"ready {text}", flush=True)

    asyncio.run(temporal_serve([], args.temporal, task_queue=args.task_queue, concurrency=args.concurrency,
                               registry=registry, announce=announce))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
