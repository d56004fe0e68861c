"""Maps over a list: a state runs once per element, `concurrency` at a time, its element and position in
its templates and tool call, the outputs collected in the list's order; an empty list gives [] and a list
over `max` ends the run (failure `bound`); a run stopped among the elements resumes only the unfinished
ones — through the Python API, `statewright run`, test blocks and a generated runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli

import statewright
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.client import ModelError, ModelRequest, ModelResponse
from statewright.runtime.scripted import Script, ScriptedClient
from statewright.runtime.trace import Trace

SPEC = '''machine team {
    input task: str

    type File {
        path: str
        purpose: str
    }

    type Plan {
        files: list[File]
    }

    type Code {
        path: str
        text: str
    }

    agent architect {
        prompt "You plan software."
    }

    agent engineer {
        prompt "You write one file at a time."
    }

    start state plan {
        agent architect
        do "Plan the files for {{ task }}."
        output Plan
        -> build
    }

    state build {
        for i, file in plan.output.files max 4 concurrency 2
        agent engineer
        do "Write {{ file.path }} ({{ file.purpose }}), file {{ i + 1 }} of {{ plan.output.files | length }}."
        output Code
        when len(output) == 0 -> nothing
        otherwise -> done
    }

    final state done {
        result "{% for c in build.output %}{{ c.path }} {% endfor %}"
    }

    final state nothing
}
'''

FILES = [{"path": f"f{n}.py", "purpose": f"part {n}"} for n in range(4)]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # runs make their workspaces here


def spec(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "team.fsm"
    path.write_text(text, encoding="utf-8")
    return path


def script(files: list[dict[str, Any]], delays: list[float] | None = None) -> dict[str, Any]:
    delays = delays or [0.0] * len(files)
    return {"agent": {"plan": [{"files": files}],
                      "build": [{"value": {"path": f["path"], "text": f"# {f['path']}"}, "delay": d}
                                for f, d in zip(files, delays)]}}


def run(path: Path, data: dict[str, Any], **options: Any) -> tuple[Any, list[dict[str, Any]], ScriptedClient]:
    client = ScriptedClient(Script.from_json(data))
    events: list[dict[str, Any]] = []
    result = statewright.load(path).run({"task": "a CLI"}, client=client, trace=Trace(sink=events), **options)
    return result, events, client


def test_each_element_gets_its_own_step_and_the_outputs_come_in_the_lists_order(tmp_path: Path) -> None:
    # the first element finishes last: the list keeps the elements' order
    result, events, client = run(spec(tmp_path), script(FILES, [0.4, 0.0, 0.1, 0.0]))
    assert result.ok and result.final_state == "done"
    assert [c.path for c in result.outputs["build"]] == ["f0.py", "f1.py", "f2.py", "f3.py"]
    assert result.result == "f0.py f1.py f2.py f3.py "
    assert result.path == ["plan", "build", "done"]
    asked = [m["messages"][-1]["content"] for m in client.received if m["state"] == "build"]
    assert sorted(asked) == [f"Write f{n}.py (part {n}), file {n + 1} of 4." for n in range(4)]
    ends = [e["item"] for e in events if e["event"] == "item_end"]
    assert ends == [0, 1, 2, 3]  # the trace keeps the elements in order, whichever finished first
    fan_out = next(e for e in events if e["event"] == "fan_out")
    assert (fan_out["kind"], fan_out["items"], fan_out["max"], fan_out["concurrency"]) == ("map", 4, 4, 2)


def test_no_more_than_concurrency_elements_run_at_once(tmp_path: Path) -> None:
    result, _, client = run(spec(tmp_path), script(FILES, [0.4] * 4))
    assert result.ok
    at = sorted(t for m, t in zip(client.received, client.arrivals, strict=True) if m["state"] == "build")
    assert at[1] - at[0] < 0.3  # two at once
    assert at[2] - at[0] >= 0.35 and at[3] - at[1] >= 0.35  # the next two wait for a free place
    assert at[3] - at[2] < 0.3


def test_an_empty_list_gives_an_empty_output_and_the_states_transitions_decide(tmp_path: Path) -> None:
    result, _events, client = run(spec(tmp_path), script([]))
    assert result.ok and result.final_state == "nothing" and result.outputs["build"] == []
    assert [m["state"] for m in client.received] == ["plan"]


def test_a_list_longer_than_max_ends_the_run_with_a_bound_failure_before_any_element_runs(tmp_path: Path) -> None:
    five = [*FILES, {"path": "f4.py", "purpose": "one too many"}]
    result, _, client = run(spec(tmp_path), script(five))
    assert result.failure is not None and result.failure.kind == "bound" and result.failure.state == "build"
    assert "has 5 elements, more than its max 4" in result.failure.message
    assert result.failure.origin.endswith(":34:9")  # the `for` line
    assert [m["state"] for m in client.received] == ["plan"]


def test_every_element_counts_as_a_step_against_the_limit(tmp_path: Path) -> None:
    limited = SPEC.replace("    input task: str\n", "    input task: str\n    limits {\n        steps 4\n    }\n")
    result, _, _ = run(spec(tmp_path, limited), script(FILES))
    assert result.failure is not None and result.failure.limit == "steps" and result.failure.state == "build"


def test_an_action_state_maps_its_tool_call_over_the_list(tmp_path: Path) -> None:
    text = '''machine fetch {
    input urls: list[str]

    tool std.http_get {
        allow ["example.com"]
    }

    start state get {
        for url in urls max 3
        call std.http_get(url = url)
        -> done
    }

    final state done {
        result "{{ get.output | length }} pages"
    }

    test "two pages" {
        input {
            urls ["https://example.com/a", "https://example.com/b"]
        }
        reply get {
            status 200
            body "a"
        }
        reply get {
            status 200
            body "b"
        }
        expect result "2 pages"
    }
}
'''
    path = spec(tmp_path, text)
    done = cli("test", str(path), "--color", "never")
    assert done.returncode == 0, done.stdout + done.stderr
    machine = statewright.load(path)
    result = machine.run({"urls": ["https://example.com/a", "https://example.com/b"]},
                         script={"tool": {"get": [{"status": 200, "body": "a"}, {"status": 200, "body": "b"}]}})
    assert result.ok and [page["body"] for page in result.outputs["get"]] == ["a", "b"]


def test_test_blocks_give_one_reply_per_element_in_the_lists_order(tmp_path: Path) -> None:
    text = SPEC.rstrip().rstrip("}") + '''
    test "three files" {
        input {
            task "a CLI"
        }
        reply plan {
            files [
                {
                    path "a.py"
                    purpose "entry"
                },
                {
                    path "b.py"
                    purpose "core"
                },
            ]
        }
        reply build {
            path "a.py"
            text "A"
        }
        reply build {
            path "b.py"
            text "B"
        }
        expect path [plan, build, done]
        expect result "a.py b.py "
    }
}
'''
    done = cli("test", str(spec(tmp_path, text)), "--color", "never")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_script_can_answer_each_element_on_its_own_by_number(tmp_path: Path) -> None:
    data = script(FILES[:2])
    # element 1 gets a reply that does not fit first, then a good one: its own list, `build[1]`
    data["agent"]["build[1]"] = [{"value": "not code", "delay": 0}, {"value": {"path": "f1.py", "text": "x"},
                                                                       "delay": 0}]
    result, events, _ = run(spec(tmp_path), data)
    assert result.ok and [c.text for c in result.outputs["build"]] == ["# f0.py", "x"]
    assert [(e["state"], e["attempt"]) for e in events if e["event"] == "reask"] == [("build", 1)]


@pytest.mark.slow
def test_statewright_run_the_python_api_and_a_generated_runner_give_the_same_result(tmp_path: Path) -> None:
    path = spec(tmp_path)
    data = script(FILES, [0.1] * 4)
    (tmp_path / "script.json").write_text(json.dumps(data), encoding="utf-8")
    api = statewright.load(path).run({"task": "a CLI"}, script=data).to_json()
    done = cli("run", str(path), "--input", "task=a CLI", "--script", str(tmp_path / "script.json"), "--quiet",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    runner = tmp_path / "runner.py"
    assert cli("compile", str(path), "-o", str(runner)).returncode == 0
    ran = subprocess.run([sys.executable, str(runner), "--input", "task=a CLI", "--script",
                          str(tmp_path / "script.json")], capture_output=True, text=True, check=False, cwd=tmp_path,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr

    def same(result: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in result.items() if k not in ("run_id", "workspace")}

    assert same(json.loads(done.stdout)) == same(api) == same(json.loads(ran.stdout))
    assert api["result"] == "f0.py f1.py f2.py f3.py "


class FailOnce:
    """A scripted client whose first call for one element fails, as a provider that is down would."""

    def __init__(self, data: dict[str, Any], item: int) -> None:
        self.inner = ScriptedClient(Script.from_json(data))
        self.item = item
        self.failed = False
        self.calls: list[tuple[str, Any]] = []

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        identity = request.metadata["statewright"]
        self.calls.append((identity["state"], identity.get("item")))
        if identity.get("item") == self.item and not self.failed:
            self.failed = True
            raise ModelError(request.model, "the provider is down", 1)
        return await self.inner.acomplete(request)

    def estimate(self, request: ModelRequest) -> tuple[int, float]:
        return self.inner.estimate(request)


def test_a_run_that_failed_in_one_element_resumes_only_the_unfinished_elements(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    client = FailOnce(script(FILES, [0.0, 0.0, 0.3, 0.0]), item=2)
    machine = statewright.load(spec(tmp_path))
    first = machine.run({"task": "a CLI"}, client=client, checkpoint=db, run_id="m1")
    assert first.failure is not None and first.failure.kind == "model"
    snapshot = CheckpointStore(db).load("m1")
    assert snapshot is not None and snapshot.head.state == "build"
    done = [t.done for t in snapshot.head.fanout.tasks]
    assert done[:2] == [True, True] and done[2] is False
    before = len(client.calls)
    second = machine.resume("m1", checkpoint=db, client=client)
    assert second.ok and [c.path for c in second.outputs["build"]] == ["f0.py", "f1.py", "f2.py", "f3.py"]
    again = {item for _, item in client.calls[before:]}
    assert 0 not in again and 1 not in again and 2 in again  # no finished element is asked again
