"""Running the async runtime from synchronous code: one helper, used by every synchronous entry point."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def run_sync(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to its end from synchronous code, with or without an event loop in this thread.

    Inside a running loop (a notebook, an async framework) the coroutine gets a loop of its own in another
    thread: blocking the caller's loop would deadlock anything the coroutine waits for on it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False  # (not run from inside the except block: errors would carry this one as context)
    else:
        running = True
    if not running:
        return asyncio.run(coroutine)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
