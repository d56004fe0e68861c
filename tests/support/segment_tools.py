"""User tools for the tests of Temporal segments (tests/test_temporal_segments.py): each call appends one
JSON line to $SEGMENT_TOOL_LOG, a side effect the tests count."""

from __future__ import annotations

import json
import os
import time


def _log(tool: str, text: str) -> None:
    with open(os.environ["SEGMENT_TOOL_LOG"], "a", encoding="utf-8") as out:
        out.write(json.dumps({"tool": tool, "text": text}) + "\n")


def record(text: str) -> str:
    _log("record", text)
    return f"recorded {text}"


def slow_record(text: str) -> str:
    time.sleep(1.0)
    _log("slow_record", text)
    return f"recorded {text}"


async def stall(text: str) -> str:
    """The first call blocks its worker's event loop past the heartbeat timeout (the worker looks dead)."""
    flag = os.environ["SEGMENT_TOOL_LOG"] + ".stalled"
    if not os.path.exists(flag):  # (blocking on purpose: the loop sends no heartbeat meanwhile)
        open(flag, "w").close()  # noqa: ASYNC230
        time.sleep(float(os.environ.get("SEGMENT_STALL", "6")))  # noqa: ASYNC251
    _log("stall", text)
    return f"stalled {text}"
