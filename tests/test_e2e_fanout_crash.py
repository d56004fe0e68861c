"""A run SIGKILLed while its branches (or a map's elements) are under way resumes with `--resume` and asks
the model again only for what had not finished: counted at a fake OpenAI-compatible server on 127.0.0.1,
reached through litellm's real HTTP path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from support.e2e_runs import wait_for
from support.fake_openai_server import FakeOpenAIServer, Reply, Slow

from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.snapshot import FanOutRecord

PARALLEL = '''machine panel {
    input draft: str

    agent reviewer {
        prompt "You review drafts."
    }

    start state review {
        parallel [quick, careful, slow]
        -> done
    }

    branch state quick {
        agent reviewer
        model "openai/quick"
        do "Review {{ draft }} quickly."
    }

    branch state careful {
        agent reviewer
        model "openai/careful"
        do "Review {{ draft }} carefully."
    }

    branch state slow {
        agent reviewer
        model "openai/slow"
        do "Review {{ draft }} slowly."
    }

    final state done {
        result "{{ quick.output }} / {{ careful.output }} / {{ slow.output }}"
    }
}
'''

MAP = '''machine chapters {
    input titles: list[str]

    agent writer {
        model "openai/writer"
        prompt "You write chapters."
    }

    start state write {
        for title in titles max 5 concurrency 3
        agent writer
        do "Write the chapter {{ title }}."
        -> done
    }

    final state done {
        result "{{ write.output | join(' | ') }}"
    }
}
'''


def environment(server: FakeOpenAIServer) -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": "sk-fake-key-for-tests", "OPENAI_API_BASE": server.url + "/v1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def fan_out(db: Path, run_id: str) -> FanOutRecord | None:
    if not db.exists():
        return None
    try:
        snapshot = CheckpointStore(str(db)).load(run_id)
    except Exception:  # noqa: BLE001 - a database still being created
        return None
    return snapshot.head.fanout if snapshot else None


def kill_and_resume(spec: Path, inputs: list[str], server: FakeOpenAIServer, finished: int,
                    tmp_path: Path) -> tuple[FanOutRecord, dict[str, Any], list[Any]]:
    """Start a run, SIGKILL it once `finished` of its branches are checkpointed as done, resume it; the
    checkpoint's fan-out at the kill, the resumed run's result, and the requests the resume made."""
    db = tmp_path / "runs.db"
    base = [sys.executable, "-m", "statewright", "run", str(spec), "--checkpoint", str(db), "--quiet"]
    env = environment(server)
    victim = subprocess.Popen([*base, *inputs, "--run-id", "r1"], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (record := fan_out(db, "r1")) is not None
                 and sum(t.done for t in record.tasks) >= finished, f"{finished} finished branches", 120)
        victim.send_signal(signal.SIGKILL)
    finally:
        victim.kill()
        victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    at_kill = fan_out(db, "r1")
    assert at_kill is not None
    time.sleep(0.3)  # a request the killed process had in flight reaches the server, or not, before we count
    before = len(server.requests)
    resumed = subprocess.run([*base, "--resume", "r1"], env=env, cwd=tmp_path, capture_output=True, text=True,
                             check=False, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    return at_kill, json.loads(resumed.stdout), server.requests[before:]


def test_a_run_killed_among_its_branches_resumes_only_the_unfinished_one(tmp_path: Path) -> None:
    spec = tmp_path / "panel.fsm"
    spec.write_text(PARALLEL, encoding="utf-8")
    with FakeOpenAIServer() as server:
        server.enqueue(Reply(text="quick: fine"), model="quick")
        server.enqueue(Slow(0.3, Reply(text="careful: fine")), model="careful")
        server.enqueue(Slow(60, Reply(text="never read")), Reply(text="slow: fine"), model="slow")
        at_kill, result, after = kill_and_resume(spec, ["--input", "draft=the draft"], server, 2, tmp_path)
        asked_before = [r.model for r in server.requests]
    done = {t.path[0] if t.path else t.state: t.done for t in at_kill.tasks}
    assert done == {"quick": True, "careful": True, "slow": False}
    assert [r.model for r in after] == ["slow"]  # nothing a finished branch asked is asked again
    assert sorted(asked_before) == ["careful", "quick", "slow", "slow"]
    assert result["status"] == "final"
    assert result["result"] == "quick: fine / careful: fine / slow: fine"
    assert result["path"] == ["review", "quick", "careful", "slow", "done"]


def test_a_run_killed_among_a_maps_elements_resumes_only_the_unfinished_one(tmp_path: Path) -> None:
    spec = tmp_path / "chapters.fsm"
    spec.write_text(MAP, encoding="utf-8")
    titles = ["one", "two", "three"]
    with FakeOpenAIServer() as server:
        # whichever element asks last waits: the other two finish and are checkpointed
        server.enqueue(Reply(text="chapter A"), Reply(text="chapter B"), Slow(60, Reply(text="never read")),
                       Reply(text="chapter C"), model="writer")
        at_kill, result, after = kill_and_resume(spec, ["--input", f"titles={json.dumps(titles)}"], server, 2,
                                                 tmp_path)
        first = server.requests[:3]
    unfinished = [i for i, t in enumerate(at_kill.tasks) if not t.done]
    assert len(unfinished) == 1
    slow_title = titles[unfinished[0]]
    assert len(after) == 1 and slow_title in after[0].body["messages"][-1]["content"]
    assert {r.body["messages"][-1]["content"] for r in first} == {f"Write the chapter {t}." for t in titles}
    chapters = result["result"].split(" | ")
    assert result["status"] == "final" and sorted(chapters) == ["chapter A", "chapter B", "chapter C"]
    assert chapters[unfinished[0]] == "chapter C"  # the resumed element's, in its place in the list
