"""Approval between tool calls through the Python API: a call that waits is answered on resume, and an answer
that does not fit — an edit whose arguments are not the tool's, another tool's answer — is refused with the
run still waiting, however the model named the tool (`std_shell` as models do, `std.shell` as scripts do);
an edited call runs with the person's arguments, and the agent's conversation shows them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT

import statewright
from statewright.runtime.result import AnswerError

EXAMPLE = ROOT / "examples" / "approved_steps.fsm"


def script(name: str) -> dict[str, Any]:
    call = {"tool_calls": [{"name": name, "arguments": {"command": "echo model > out.txt"}}]}
    return {"agent": {
        "plan": [{"steps": ["Write the file."]}],
        "execute": [call, {"step": "Write the file.", "ok": True, "summary": "written"}],
        "check": [{"finished": True, "answer": "written"}],
    }}


@pytest.mark.parametrize("name", ["std_shell", "std.shell"])
def test_an_edit_that_does_not_fit_the_tool_is_refused_and_the_run_keeps_waiting(tmp_path: Path, name: str) -> None:
    machine = statewright.load(EXAMPLE)
    db, workspace = str(tmp_path / "runs.db"), str(tmp_path / "work")
    first = machine.run({"task": "write"}, checkpoint=db, run_id="r1", script=script(name), workspace=workspace)
    assert first.status == "waiting" and first.waiting is not None
    assert (first.waiting.kind, first.waiting.tool) == ("approval", "std.shell")
    for answer, message in (
            ({"decision": "edit", "arguments": {"cmd": "ls"}}, "`command` is missing; `cmd` is not one of its"),
            ({"decision": "edit", "arguments": {"command": 7}}, "command"),
            ({"decision": "approve", "tool": "std.python"}, "the call that waits is of std.shell"),
            ('{"decision": "maybe"}', "approve, reject or edit")):
        with pytest.raises(AnswerError, match=message):
            machine.resume("r1", answer, checkpoint=db, script=script(name), workspace=workspace)
    still = machine.resume("r1", checkpoint=db, script=script(name), workspace=workspace)
    assert still.status == "waiting" and still.waiting is not None
    assert still.waiting.arguments == {"command": "echo model > out.txt"}
    done = machine.resume("r1", {"decision": "edit", "arguments": {"command": "echo person > out.txt"}},
                          checkpoint=db, script=script(name), workspace=workspace)
    assert done.ok, done.failure
    assert (Path(workspace) / "out.txt").read_text(encoding="utf-8") == "person\n"
    assert done.variables["past_steps"] == [{"step": "Write the file.", "ok": True, "summary": "written"}]
