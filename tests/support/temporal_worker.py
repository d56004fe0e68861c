"""A worker process for the Temporal tests: `python -m support.temporal_worker --temporal HOST:PORT --spec F`.

It serves the spec (as written and optimized) like `statewright worker`, printing `ready ...` once it
polls, so a test knows when to start runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from statewright import api
from statewright.runtime.temporal import TemporalMachines
from statewright.runtime.temporal_worker import temporal_serve


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--temporal", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--task-queue")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    comp = api.check_path(args.spec)
    registry = TemporalMachines()
    for machine in (api.runtime_machine(comp), api.runtime_machine(comp, level=0)):
        registry.add(machine)

    def announce(text: str) -> None:
        print(f"ready {text}", flush=True)

    asyncio.run(temporal_serve([], args.temporal, task_queue=args.task_queue, concurrency=args.concurrency,
                               registry=registry, announce=announce))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
