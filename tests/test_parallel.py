"""Parallel states: branches run their model calls at once and join in the order they are written; `join
first` cancels the branches it no longer waits for; limits and budgets count every branch; a run stopped
among its branches resumes only the unfinished ones — through the Python API, `statewright run`, test blocks
and a generated runner."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli, normalized_event, read_events

import statewright
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.client import ModelError, ModelRequest, ModelResponse
from statewright.runtime.scripted import Script, ScriptedClient
from statewright.runtime.trace import Trace

SPEC = '''machine reviews {
    input draft: str

    type Review {
        approve: bool
        note: str
    }

    agent critic {
        prompt "You review drafts."
    }

    agent checker {
        prompt "You check facts."
    }

    start state review {
        parallel [style, facts, tone]
        join JOIN
        when count(output) >= 2 -> publish
        otherwise -> revise
    }

    branch state style {
        agent critic
        model "openai/style"
        do "Review the style of {{ draft }}"
        output Review
    }

    branch state facts {
        agent checker
        do "Check the facts of {{ draft }}"
        -> facts_note
    }

    branch state facts_note {
        agent checker
        do "Sum up: {{ facts.output }}"
        output Review
    }

    branch state tone {
        agent critic
        model "openai/tone"
        do "Review the tone of {{ draft }}"
        output Review
    }

    state revise {
        agent critic
        do "Revise {{ draft }}: {{ review.output }}"
        -> publish
    }

    final state publish {
        result "{{ review.output | length }} reviews; style: {{ style.output.note if style.output }}"
    }
}
'''

YES = {"approve": True, "note": "fine"}
NO = {"approve": False, "note": "no"}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # runs make their workspaces here


def spec(tmp_path: Path, join: str = "all", guard: str = "len(output) >= 2") -> Path:
    path = tmp_path / "reviews.fsm"
    path.write_text(SPEC.replace("JOIN", join).replace("count(output) >= 2", guard), encoding="utf-8")
    return path


def script(delays: dict[str, float] | None = None, **replies: list[Any]) -> dict[str, Any]:
    """A script: each state's replies, each delayed by that state's delay."""
    delays = delays or {}
    base: dict[str, list[Any]] = {"style": [YES], "facts": ["the facts hold"], "facts_note": [YES], "tone": [NO],
                                  "revise": ["revised"]}
    base.update(replies)
    return {"agent": {state: [{"value": r, "delay": delays.get(state, 0.0)} for r in items]
                      for state, items in base.items()}}


def run(path: Path, data: dict[str, Any], **options: Any) -> tuple[statewright.RunResult, list[dict[str, Any]],  # type: ignore[name-defined]
                                                                     ScriptedClient]:
    client = ScriptedClient(Script.from_json(data))
    events: list[dict[str, Any]] = []
    result = statewright.load(path).run({"draft": "a draft"}, client=client, trace=Trace(sink=events), **options)
    return result, events, client


def arrivals(client: ScriptedClient) -> dict[str, float]:
    return {entry["state"]: at for entry, at in zip(client.received, client.arrivals, strict=True)}


# ---- branches run at once ------------------------------------------------------------------------


def test_three_branches_call_their_models_at_once_and_the_join_lists_their_outputs_in_written_order(
        tmp_path: Path) -> None:
    delays = {"style": 0.5, "facts": 0.5, "tone": 0.5}
    result, _events, client = run(spec(tmp_path), script(delays))
    assert result.ok and result.final_state == "publish"
    assert result.path == ["review", "style", "facts", "facts_note", "tone", "publish"]
    assert [r.model_dump() for r in result.outputs["review"]] == [YES, YES, NO]  # style, facts (its last), tone
    assert result.result == "3 reviews; style: fine"
    at = arrivals(client)
    # the three first calls are made before any of them is answered (each takes 0.5 s)
    assert max(at["style"], at["facts"], at["tone"]) - min(at["style"], at["facts"], at["tone"]) < 0.4
    # and the second step of the facts branch follows its first
    assert at["facts_note"] - at["facts"] >= 0.45
    assert result.usage.llm_calls == 4


def test_the_trace_holds_each_branch_together_in_written_order_whichever_finishes_first(tmp_path: Path) -> None:
    path = spec(tmp_path)
    fast_first = run(path, script({"style": 0.4, "facts": 0.0, "facts_note": 0.0, "tone": 0.2}))[1]
    slow_first = run(path, script({"style": 0.0, "facts": 0.3, "facts_note": 0.1, "tone": 0.0}))[1]

    def comparable(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # `finished` records the order the branches happened to finish in; everything else is the same
        return [{k: v for k, v in normalized_event(e).items() if k != "finished"} for e in events]

    assert comparable(fast_first) == comparable(slow_first)
    names = [(e["event"], e.get("state"), e.get("branch")) for e in fast_first]
    start = names.index(("fan_out", "review", None))
    assert names[start + 1:start + 4] == [("branch_start", "review", "style"), ("state_enter", "style", None),
                                          ("llm_call", "style", None)]
    ends = [e["branch"] for e in fast_first if e["event"] == "branch_end"]
    assert ends == ["style", "facts", "tone"]
    join = next(e for e in fast_first if e["event"] == "join")
    assert join["joined"] == ["style", "facts", "tone"] and join["cancelled"] == []
    assert join["finished"] == ["facts", "tone", "style"]  # the order they finished in
    # the events keep the times they happened at: the style branch's call ends after the others started
    calls = {e["state"]: e["time"] for e in fast_first if e["event"] == "llm_call"}
    assert calls["style"] > calls["tone"] > calls["facts"]


def test_join_first_two_cancels_the_branch_still_running_and_counts_what_it_used(tmp_path: Path) -> None:
    # facts finishes its first step at once and is in its second (2 s) when style and tone finish
    result, events, _client = run(spec(tmp_path, "first 2"), script({"style": 0.3, "facts": 0.0,
                                                                     "facts_note": 2.0, "tone": 0.3}))
    assert result.ok
    join = next(e for e in events if e["event"] == "join")
    assert join["joined"] == ["style", "tone"] and join["cancelled"] == ["facts"]
    assert [r.model_dump() for r in result.outputs["review"]] == [YES, NO]
    # facts ran its first step, and was cancelled in its second: its call counts, the cancelled one does not
    assert result.path == ["review", "style", "facts", "facts_note", "tone", "publish"]
    assert "facts_note" not in result.outputs
    assert result.usage.llm_calls == 3
    ended = {e["branch"]: e["status"] for e in events if e["event"] == "branch_end"}
    assert ended == {"style": "done", "facts": "cancelled", "tone": "done"}
    assert max(e.get("latency_ms", 0) for e in events if e["event"] == "llm_call") < 1500


def test_join_first_where_takes_the_first_branch_whose_output_passes_and_cancels_the_rest(tmp_path: Path) -> None:
    path = spec(tmp_path, "first where output.approve", "len(output) == 1")
    result, events, _ = run(path, script({"style": 0.3, "facts": 0.0, "facts_note": 1.5, "tone": 0.0}))
    assert result.ok
    join = next(e for e in events if e["event"] == "join")
    assert join["finished"] == ["tone", "style"]  # tone finished first, but does not approve
    assert join["joined"] == ["style"] and join["cancelled"] == ["facts"]
    guards = [(e["branch"], e["value"]) for e in events if e["event"] == "guard" and "branch" in e]
    assert guards == [("style", True), ("tone", False)]  # written with each branch's events, in branch order
    assert [r.model_dump() for r in result.outputs["review"]] == [YES]


def test_a_join_guard_no_branch_passes_joins_an_empty_list_and_the_state_moves_on(tmp_path: Path) -> None:
    path = spec(tmp_path, "first 2 where output.approve", "len(output) >= 2")
    result, events, _ = run(path, script(style=[NO], facts_note=[NO]))
    assert result.ok and result.path[-2:] == ["revise", "publish"]
    assert result.outputs["review"] == []
    assert next(e for e in events if e["event"] == "join")["joined"] == []


# ---- limits count every branch -------------------------------------------------------------------------


def test_the_step_limit_counts_the_steps_of_every_branch(tmp_path: Path) -> None:
    path = spec(tmp_path)
    path.write_text(path.read_text().replace("    input draft: str\n", "    input draft: str\n    limits {\n"
                                             "        steps 4\n    }\n"), encoding="utf-8")
    result, _, _ = run(path, script({"facts": 0.2}))
    assert result.failure is not None and result.failure.limit == "steps"
    # review, style, facts and tone took the four steps; facts_note would have been the fifth
    assert result.failure.state == "facts_note"


def test_a_token_budget_counts_the_calls_other_branches_have_in_flight(tmp_path: Path) -> None:
    path = spec(tmp_path)
    unlimited, _, _ = run(path, script())
    per_call = unlimited.usage.tokens / unlimited.usage.llm_calls
    # room for about two calls: the three first calls are estimated (and reserved) before any answer
    limited = path.read_text().replace("    input draft: str\n", "    input draft: str\n    limits {\n        "
                                       f"tokens {int(per_call * 2.5) + 20}\n    }}\n")
    path.write_text(limited, encoding="utf-8")
    result, _events, client = run(path, script({"style": 0.3, "facts": 0.3, "tone": 0.3}))
    assert result.failure is not None and result.failure.limit == "tokens", result.failure
    assert "would be exceeded by the next model call" in result.failure.message
    assert len(client.received) < 3  # the third branch's call was refused before it was made


# ---- every face ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_statewright_run_the_python_api_and_a_generated_runner_give_the_same_result(tmp_path: Path) -> None:
    path = spec(tmp_path)
    data = script({"style": 0.5, "facts": 0.5, "tone": 0.5})
    (tmp_path / "script.json").write_text(json.dumps(data), encoding="utf-8")
    api = statewright.load(path).run({"draft": "a draft"}, script=data).to_json()
    done = cli("run", str(path), "--input", "draft=a draft", "--script", str(tmp_path / "script.json"), "--quiet",
               "--trace", str(tmp_path / "trace.jsonl"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # the three branches' first calls, each answered after half a second, ended together: they overlapped
    ended = {e["state"]: datetime.fromisoformat(e["time"]).timestamp() for e in read_events(tmp_path / "trace.jsonl")
             if e["event"] == "llm_call"}
    assert max(ended[s] for s in ("style", "facts", "tone")) - min(ended[s] for s in ("style", "facts", "tone")) < 0.35
    runner = tmp_path / "runner.py"
    assert cli("compile", str(path), "-o", str(runner)).returncode == 0
    ran = subprocess.run([sys.executable, str(runner), "--input", "draft=a draft", "--script",
                          str(tmp_path / "script.json")], capture_output=True, text=True, check=False, cwd=tmp_path,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr

    def same(result: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in result.items() if k not in ("run_id", "workspace")}

    assert same(json.loads(done.stdout)) == same(api) == same(json.loads(ran.stdout))
    assert api["outputs"]["review"] == [YES, YES, NO] if "outputs" in api else True


def test_test_blocks_script_the_replies_of_branch_states(tmp_path: Path) -> None:
    path = spec(tmp_path)
    path.write_text(path.read_text().rstrip().rstrip("}") + '''
    test "two approvals publish" {
        input {
            draft "a draft"
        }
        reply style {
            approve true
            note "fine"
        }
        reply facts "the facts hold"
        reply facts_note {
            approve true
            note "checked"
        }
        reply tone {
            approve false
            note "harsh"
        }
        expect path [review, style, facts, facts_note, tone, publish]
        expect result "3 reviews; style: fine"
    }
}
''', encoding="utf-8")
    done = cli("test", str(path), "--color", "never")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  two approvals publish" in done.stdout


# ---- a run stopped among its branches ---------------------------------------------------------------


class FailOnce:
    """A scripted client whose first call for one state fails, as a provider that is down would."""

    def __init__(self, data: dict[str, Any], state: str) -> None:
        self.inner = ScriptedClient(Script.from_json(data))
        self.state = state
        self.failed = False
        self.calls: list[tuple[str, int]] = []

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        identity = request.metadata["statewright"]
        self.calls.append((identity["state"], identity["seq"]))
        if identity["state"] == self.state and not self.failed:
            self.failed = True
            raise ModelError(request.model, "the provider is down", 1)
        return await self.inner.acomplete(request)

    def estimate(self, request: ModelRequest) -> tuple[int, float]:
        return self.inner.estimate(request)


def test_a_run_that_failed_in_one_branch_resumes_only_the_unfinished_branches(tmp_path: Path) -> None:
    path = spec(tmp_path)
    db = str(tmp_path / "runs.sqlite")
    client = FailOnce(script({"facts_note": 0.3}), "facts_note")
    machine = statewright.load(path)
    first = machine.run({"draft": "a draft"}, client=client, checkpoint=db, run_id="r1")
    assert first.failure is not None and first.failure.kind == "model"
    snapshot = CheckpointStore(db).load("r1")
    assert snapshot is not None and snapshot.head.status == "running" and snapshot.head.state == "review"
    tasks = {t.path[0] if t.path else t.state: t for t in snapshot.head.fanout.tasks}
    assert tasks["style"].done and tasks["tone"].done and not tasks["facts"].done
    assert tasks["facts"].state == "facts_note"  # its first step was committed
    before = list(client.calls)
    second = machine.resume("r1", checkpoint=db, client=client)
    assert second.ok and second.final_state == "publish"
    assert client.calls[len(before):] == [("facts_note", 0)]  # only the unfinished step is asked again
    uninterrupted = machine.run({"draft": "a draft"}, script=script())
    assert {k: v for k, v in second.to_json().items() if k not in ("run_id", "workspace")} == {
        k: v for k, v in uninterrupted.to_json().items() if k not in ("run_id", "workspace")}
    # the branches that had finished before the checkpoint are in the join's output as they were
    assert second.outputs["review"] == uninterrupted.outputs["review"]
    assert None not in second.outputs["review"]


def test_a_failure_in_a_branch_ends_the_run_with_every_branchs_events_in_the_trace(tmp_path: Path) -> None:
    result, events, _ = run(spec(tmp_path), script(tone=["not a review"] * 3))
    assert result.failure is not None and result.failure.kind == "output" and result.failure.state == "tone"
    states = [e["state"] for e in events if e["event"] == "state_enter"]
    assert states == ["review", "style", "facts", "facts_note", "tone"]
    assert events[-1]["event"] == "run_end"


def test_a_parallel_state_entered_again_runs_its_branches_again_with_the_next_replies(tmp_path: Path) -> None:
    path = spec(tmp_path, "all", "style.output.approve")
    path.write_text(path.read_text().replace("        otherwise -> revise\n", "        otherwise -> review max 1\n"
                                             "        otherwise -> revise\n"), encoding="utf-8")
    data = script(style=[NO, YES], facts=["f1", "f2"], facts_note=[NO, YES], tone=[NO, NO])
    result, events, _ = run(path, data)
    assert result.ok
    assert result.path == ["review", "style", "facts", "facts_note", "tone"] * 2 + ["publish"]
    assert [r.model_dump() for r in result.outputs["review"]] == [YES, YES, NO]
    assert [e["visit"] for e in events if e["event"] == "state_enter" and e["state"] == "facts_note"] == [1, 2]


def test_a_branch_whose_entry_has_used_its_visits_stops_the_run_with_a_bound_failure(tmp_path: Path) -> None:
    path = spec(tmp_path, "all", "style.output.approve")
    text = path.read_text().replace("        otherwise -> revise\n", "        otherwise -> review max 1\n"
                                    "        otherwise -> revise\n")
    text = text.replace('''        model "openai/style"\n''', '''        model "openai/style"\n        visits 1\n''')
    path.write_text(text, encoding="utf-8")
    result, _, _ = run(path, script(style=[NO], facts=["f1"], facts_note=[NO], tone=[NO]))
    assert result.failure is not None and result.failure.kind == "bound" and result.failure.state == "review"
    assert "branch 'style' has used its visits 1" in result.failure.message
