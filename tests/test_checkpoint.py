"""Checkpoints: after every transition the run is committed; a resumed run finishes with the same result and
never repeats a completed step."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from pydantic import BaseModel
from support.fake_client import Crash, FakeClient
from support.machines import final, go, machine, otherwise, state, when

from statewright.runtime.checkpoint import CheckpointError, CheckpointStore
from statewright.runtime.client import ModelError
from statewright.runtime.engine import Engine
from statewright.runtime.snapshot import Changes, Delta, Head
from statewright.runtime.trace import Trace


class Review(BaseModel):
    score: int
    fixes: list[str]


def pipeline(sha: str = "sha-1"):
    return machine(
        state("draft", go("review"), tell=["critic"]),
        state("review", when(lambda s: s.output.score >= 80, "publish", "output.score >= 80"),
              go("revise", max=2), otherwise("publish"), agent="critic", output=Review),
        state("revise", go("review"), do="Apply {{ review.output.fixes }}.", tell=["critic"]),
        final("publish", "{{ revise.output or draft.output }}"),
        sha=sha,
    )


ANSWERS = {
    ("agent", "draft"): ["draft one"],
    ("agent", "review"): ['{"score": 40, "fixes": ["cite"]}', '{"score": 60, "fixes": ["shorten"]}',
                          '{"score": 90, "fixes": []}'],
    ("agent", "revise"): ["draft two", "draft three"],
}


def with_crash(at: tuple[str, str], seq: int):
    answers = {key: list(values) for key, values in ANSWERS.items()}
    answers[at][seq] = Crash("the process died")
    return answers


def test_a_crashed_run_resumes_and_finishes_with_the_same_result_without_repeating_steps(tmp_path):
    reference_client = FakeClient(ANSWERS)
    reference = Engine(pipeline(), client=reference_client).run({}, run_id="ref")

    store = CheckpointStore(str(tmp_path / "runs.db"))
    crashing = FakeClient(with_crash(("agent", "revise"), 1))
    with pytest.raises(Crash):
        Engine(pipeline(), client=crashing, checkpoint=store).run({}, run_id="r1")

    resumed_client = FakeClient(ANSWERS)
    result = Engine(pipeline(), client=resumed_client, checkpoint=CheckpointStore(str(tmp_path / "runs.db"))).run(
        {}, run_id="r1", resume=True)

    assert result.ok
    assert (result.result, result.path, result.final_state) == (reference.result, reference.path, "publish")
    assert result.result == "draft three"
    # the interrupted step is re-run; no completed step is
    assert resumed_client.call_keys() == [("agent", "revise", 1), ("agent", "review", 2)]
    # and it is asked exactly what the uninterrupted run asked: memories and outputs were restored
    assert [r.messages for r in resumed_client.requests] == [r.messages for r in reference_client.requests[-2:]]
    assert result.usage.llm_calls == reference.usage.llm_calls


def test_a_model_error_leaves_the_checkpoint_so_resume_retries_the_step(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs.db"))
    answers = {key: list(values) for key, values in ANSWERS.items()}
    answers[("agent", "review")][0] = ModelError("fake/model", "HTTP 503", attempts=4)
    failed = Engine(pipeline(), client=FakeClient(answers), checkpoint=store).run({}, run_id="r2")
    assert failed.failure.kind == "model"
    assert store.load("r2").head.status == "running"
    assert store.load("r2").head.state == "review"

    client = FakeClient(ANSWERS)
    result = Engine(pipeline(), client=client, checkpoint=store).run({}, run_id="r2", resume=True)
    assert result.ok
    assert client.call_keys()[0] == ("agent", "review", 0)
    assert ("agent", "draft", 0) not in client.call_keys()


def test_resuming_a_finished_run_returns_its_stored_result(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs.db"))
    first = Engine(pipeline(), client=FakeClient(ANSWERS), checkpoint=store).run({}, run_id="done")
    client = FakeClient()
    again = Engine(pipeline(), client=client, checkpoint=store).run({}, run_id="done", resume=True)
    assert client.requests == []
    assert (again.status, again.result, again.path, again.final_state) == (
        first.status, first.result, first.path, first.final_state)
    assert again.usage == first.usage


def test_a_failed_run_is_stored_with_its_failure(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs.db"))
    spec = machine(state("a", go("a", max=1)), final("never"))
    first = Engine(spec, client=FakeClient(default=lambda r: "x"), checkpoint=store).run({}, run_id="f")
    again = Engine(spec, client=FakeClient(), checkpoint=store).run({}, run_id="f", resume=True)
    assert first.failure.kind == again.failure.kind == "bound"
    assert again.failure.message == first.failure.message


def test_resuming_with_a_different_machine_is_a_clear_error(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs.db"))
    with pytest.raises(Crash):
        Engine(pipeline(), client=FakeClient(with_crash(("agent", "review"), 0)), checkpoint=store).run(
            {}, run_id="r3")
    with pytest.raises(CheckpointError, match="different version of machine 'm'"):
        Engine(pipeline(sha="sha-2"), client=FakeClient(ANSWERS), checkpoint=store).run(
            {}, run_id="r3", resume=True)


def test_unknown_runs_and_reused_run_ids_are_errors(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs.db"))
    with pytest.raises(CheckpointError, match="no checkpoint of run 'nope'"):
        Engine(pipeline(), client=FakeClient(), checkpoint=store).run({}, run_id="nope", resume=True)
    Engine(pipeline(), client=FakeClient(ANSWERS), checkpoint=store).run({}, run_id="once")
    with pytest.raises(CheckpointError, match="already exists"):
        Engine(pipeline(), client=FakeClient(ANSWERS), checkpoint=store).run({}, run_id="once")


def test_a_snapshot_is_committed_after_every_transition(tmp_path):
    path = str(tmp_path / "runs.db")
    seen = []

    def review_answer(request):
        # by the time review runs, the transition out of draft is committed and visible to other readers
        reader = CheckpointStore(path)
        seen.append(reader.load("r4"))
        reader.close()
        return '{"score": 95, "fixes": []}'

    answers = dict(ANSWERS)
    answers[("agent", "review")] = [review_answer]
    Engine(pipeline(), client=FakeClient(answers), checkpoint=CheckpointStore(path)).run({}, run_id="r4")
    snapshot = seen[0]
    assert snapshot.head.state == "review"
    assert snapshot.head.status == "running"
    assert snapshot.visits == {"draft": 1}
    assert snapshot.seqs == {"agent:draft": 1}
    assert snapshot.outputs == {"draft": "draft one"}
    assert snapshot.logs["path"] == ["draft"]
    assert snapshot.logs["memory:critic"] == [{"role": "user", "content": "[output of state 'draft']\ndraft one"}]
    assert snapshot.head.source_sha256 == "sha-1"


def test_the_store_uses_wal_and_lists_runs(tmp_path):
    path = str(tmp_path / "runs.db")
    store = CheckpointStore(path)
    Engine(pipeline(), client=FakeClient(ANSWERS), checkpoint=store).run({}, run_id="listed")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    runs = store.list_runs()
    assert [(r["run_id"], r["machine"], r["status"], r["state"]) for r in runs] == [
        ("listed", "m", "final", "publish")]


def record(status: str = "running", **changes):
    """A save's delta as a test writes it: mappings by name, logs ("path", "memory:NAME") by theirs."""
    logs = {name: items for name, items in changes.items() if name == "path" or name.startswith("memory:")}
    mappings = {name: value for name, value in changes.items() if name not in logs}
    return Delta(Head(machine="m", source_sha256="", status=status, state="s"), Changes(logs=logs, **mappings))


def test_pieces_are_read_back_whole_however_many_a_run_writes(tmp_path):
    path = str(tmp_path / "runs.db")
    store = CheckpointStore(path)
    log: list[dict] = []
    for i in range(500):
        log.append({"role": "user", "content": f"message {i}"})
        store.save("x", record(**{"memory:a": log[-1:], "path": ["s"], "visits": {"s": i + 1},
                                  "outputs": {f"state{i}": i}}))
    loaded = CheckpointStore(path).load("x")
    assert loaded.logs["memory:a"] == log
    assert loaded.logs["path"] == ["s"] * 500
    assert loaded.visits == {"s": 500} and len(loaded.outputs) == 500
    # a store that did not load the run continues its pieces where they stand
    other = CheckpointStore(path)
    other.save("x", record(**{"memory:a": [{"n": 1}]}))
    assert CheckpointStore(path).load("x").logs["memory:a"] == [*log, {"n": 1}]


def test_a_missing_or_unreadable_piece_is_found_and_the_run_refused(tmp_path):
    path = str(tmp_path / "runs.db")
    store = CheckpointStore(path)
    for i in range(3):  # each save's changes fill a piece of their own
        store.save("x", record(path=[f"s{i}" + "x" * 3000]))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM run_pieces WHERE run_id = 'x' AND piece = 1")
    with pytest.raises(CheckpointError, match="piece 1 of 3 is missing. It cannot be resumed"):
        CheckpointStore(path).load("x")
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO run_pieces VALUES ('x', 1, '{not json')")
    with pytest.raises(CheckpointError, match="piece 1 does not read as JSON. It cannot be resumed"):
        CheckpointStore(path).load("x")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET head = 'garbage' WHERE run_id = 'x'")
    with pytest.raises(CheckpointError, match="its record does not read as JSON. It cannot be resumed") as caught:
        CheckpointStore(path).load("x")
    assert "--resume" not in str(caught.value)  # no hint that could never work


def test_a_damaged_checkpoint_is_a_clear_refusal_of_the_resume(tmp_path):
    path = str(tmp_path / "runs.db")
    with pytest.raises(Crash):
        Engine(pipeline(), client=FakeClient(with_crash(("agent", "review"), 0)),
               checkpoint=CheckpointStore(path)).run({}, run_id="r9")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET tail = tail || char(10) || '{cut short' WHERE run_id = 'r9'")
    with pytest.raises(CheckpointError, match="damaged: the latest changes do not read as JSON"):
        Engine(pipeline(), client=FakeClient(ANSWERS), checkpoint=CheckpointStore(path)).run(
            {}, run_id="r9", resume=True)


def test_a_database_of_another_format_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, snapshot TEXT)")
    with pytest.raises(CheckpointError, match="another format .*checkpoint new runs to another file"):
        CheckpointStore(str(path))
    (tmp_path / "not.db").write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(CheckpointError, match="is not a checkpoint database"):
        CheckpointStore(str(tmp_path / "not.db"))


def test_one_owner_per_run_a_second_store_is_refused_until_the_lease_is_free(tmp_path):
    path = str(tmp_path / "runs.db")
    first, second = CheckpointStore(path), CheckpointStore(path)
    first.acquire("r")
    with pytest.raises(CheckpointError, match=r"run 'r' is being run by process \d+ on .*wait for that process"):
        second.acquire("r")
    first.release("r")
    second.acquire("r")  # free again
    second.release("r")


def test_a_lease_whose_holder_died_is_taken_over_at_once(tmp_path):
    path = str(tmp_path / "runs.db")
    holder = subprocess.run([sys.executable, "-c", (
        "import sys\nfrom statewright.runtime.checkpoint import CheckpointStore\n"
        f"CheckpointStore({path!r}).acquire('r')\n")], capture_output=True, text=True, check=False)
    assert holder.returncode == 0, holder.stderr
    CheckpointStore(path).acquire("r")  # the process that held it is gone: no wait


def test_a_resumed_run_traces_that_it_was_resumed(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs.db"))
    with pytest.raises(Crash):
        Engine(pipeline(), client=FakeClient(with_crash(("agent", "revise"), 0)), checkpoint=store).run(
            {}, run_id="r5")
    events: list[dict] = []
    Engine(pipeline(), client=FakeClient(ANSWERS), checkpoint=store, trace=Trace(sink=events)).run(
        {}, run_id="r5", resume=True)
    start = events[0]
    assert (start["event"], start["resumed"], start["state"]) == ("run_start", True, "revise")
    assert events[1] == {**events[1], "event": "state_enter", "state": "revise", "visit": 1}
