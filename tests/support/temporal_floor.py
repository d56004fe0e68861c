"""The hand-written floor a statewright run on Temporal is measured against (bench/temporal.py): a minimal
temporalio workflow that makes one activity call per step, the activity answering at once — what any
workflow that records each model call as an activity costs, with nothing of statewright in it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker


@activity.defn(name="floor.step")
async def floor_step(number: int) -> str:
    return f"reply {number}"


@workflow.defn(name="floor.run", sandboxed=False)
class FloorRun:
    @workflow.run
    async def run(self, steps: int) -> list[str]:
        replies = []
        for number in range(steps):
            replies.append(await workflow.execute_activity(floor_step, number,
                                                           start_to_close_timeout=timedelta(seconds=60)))
        return replies


async def floor_worker(client: Client, task_queue: str, stop: asyncio.Event, ready: str = "") -> None:
    """Serve the floor until `stop`; print `ready`, when given, once the worker polls."""
    async with Worker(client, task_queue=task_queue, workflows=[FloorRun], activities=[floor_step],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        if ready:
            print(ready, flush=True)
        await stop.wait()


def main() -> None:
    """`python -m support.temporal_floor --temporal HOST:PORT --task-queue Q`: a worker process serving only
    the floor (bench/temporal.py measures its memory against a statewright worker's); `serving` once it
    polls, until SIGTERM."""
    import argparse
    import signal

    parser = argparse.ArgumentParser()
    parser.add_argument("--temporal", required=True)
    parser.add_argument("--task-queue", required=True)
    args = parser.parse_args()

    async def serve() -> None:
        client = await Client.connect(args.temporal)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await floor_worker(client, args.task_queue, stop, ready="serving")

    asyncio.run(serve())


if __name__ == "__main__":
    main()
