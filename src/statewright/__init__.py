"""statewright: a declarative language and compiler for multi-agent LLM systems shaped as finite-state machines.

    machine = statewright.load("flow.fsm")       # CheckError, with every diagnostic, if it does not check
    result = machine.run({"topic": "FSMs"})      # or: await machine.arun(...)
    machine.test(); machine.compile("flow_runner.py")

Everything else is in `statewright.api`. Importing this package loads nothing heavy: the names below are
imported on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API_NAMES = ("CheckError", "Machine", "load", "load_text")
__all__ = ["CheckError", "Machine", "RunResult", "load", "load_text"]


def __getattr__(name: str) -> Any:
    if name in _API_NAMES:
        from . import api

        return getattr(api, name)
    if name == "RunResult":
        from .runtime.result import RunResult

        return RunResult
    raise AttributeError(f"module 'statewright' has no attribute {name!r}")
