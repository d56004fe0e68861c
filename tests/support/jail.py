"""Whether the bubblewrap jail runs here, found out once: tests that run tool code skip without it — or fail,
where STATEWRIGHT_REQUIRE_BWRAP=1 says it must be there (CI)."""

from __future__ import annotations

import asyncio
import functools
import os
import tempfile

import pytest

REQUIRE_VARIABLE = "STATEWRIGHT_REQUIRE_BWRAP"


@functools.lru_cache(maxsize=1)
def jail_problem() -> str | None:
    """Why std.python and std.shell cannot run jailed on this machine; None when they can."""
    from statewright.runtime.sandbox import Sandbox, sandbox_give_to_tool_user

    with tempfile.TemporaryDirectory(prefix="statewright-jail-check-") as scratch:
        workspace = os.path.join(scratch, "workspace")
        os.mkdir(workspace)
        sandbox_give_to_tool_user(workspace)
        return asyncio.run(Sandbox().problem(workspace))


def jail_required() -> bool:
    return os.environ.get(REQUIRE_VARIABLE) == "1"


def need_jail() -> None:
    """Skip the calling test where the jail cannot run; fail it instead where the jail is required."""
    problem = jail_problem()
    if problem is None:
        return
    if jail_required():
        pytest.fail(f"{REQUIRE_VARIABLE}=1, but the bubblewrap jail cannot run here: {problem}")
    pytest.skip(f"the bubblewrap jail cannot run here: {problem}")
