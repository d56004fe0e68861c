"""`statewright batch`: one machine over many inputs, concurrently — cases, results, summary, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT, cli, wait_for
from support.fake_openai_server import FakeOpenAIServer, Reply, Slow

from statewright import api
from statewright.runtime.batch import BadLine, BatchCase, read_cases, result_matches
from statewright.runtime.runner_cli import main as runner_main

EVALUATOR = ROOT / "examples" / "evaluator_optimizer.fsm"
SCRIPT = {
    "agent": {"outline": ["1. Intro (25 min)"],
              "evaluate": [{"decision": "accept", "strengths": ["short"], "problems": []}]},
    "verifier": {"outline": [{"choice": "every section has a length in minutes", "reason": "", "feedback": ""}]},
}

CHAIN = """\
machine chain {
    input topic: str
    model "openai/chain-model"

    agent worker {
        prompt "You answer briefly."
        memory none
    }

    start state first {
        agent worker
        do "First step for {{ topic }}."
        -> second
    }

    state second {
        agent worker
        do "Second step for {{ topic }}."
        -> done
    }

    final state done {
        result "{{ second.output }}"
    }
}
"""


def write_lines(path: Path, *lines: Any) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                    encoding="utf-8")
    return path


def batch(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    machine = api.runtime_machine(api.check_file(EVALUATOR))
    code = runner_main(machine, ["batch", "--script", str(script), *args])
    captured = capsys.readouterr()
    out = [json.loads(line) for line in captured.out.splitlines() if line.strip()]
    return code, out, captured.err


# ---- cases -------------------------------------------------------------------------------------------


def test_a_cases_file_gives_cases_and_says_what_is_wrong_with_each_bad_line(tmp_path: Path) -> None:
    cases = write_lines(
        tmp_path / "cases.jsonl",
        {"id": "a", "inputs": {"subject": "FSMs"}, "expect": "x"},
        "not json",
        "",
        {"inputs": {"subject": "Parsers"}},
        [1, 2],
        {"subject": "forgot the inputs key"},
        {"id": "a", "inputs": {}},
        {"id": True, "inputs": {}},
        {"inputs": "text"},
    )
    read = list(read_cases(str(cases)))
    assert read[0] == BatchCase(1, "a", {"subject": "FSMs"}, "x", True)
    assert read[2] == BatchCase(4, "line-4", {"subject": "Parsers"})
    bad = {item.line: item.message for item in read if isinstance(item, BadLine)}
    assert set(bad) == {2, 5, 6, 7, 8, 9}
    assert bad[2].startswith("not a JSON object")
    assert "unknown key 'subject'" in bad[6] and "under \"inputs\"" in bad[6]
    assert bad[7] == "the id 'a' is also the id of line 1"


@pytest.mark.parametrize(("result", "expected", "mode", "matches"), [
    ("Paris", "Paris", "exact", True),
    ("paris", "Paris", "exact", False),
    ("  Paris is  the capital ", "paris is the capital", "text", True),
    ("The answer is Paris.", "paris", "contains", True),
    ("90", 90, "exact", True),  # a result template renders text: a number matches its text
    ("true", True, "exact", True),
    (1, True, "exact", False),  # types count: true is not 1, 1 is not 1.0
    (1, 1.0, "exact", False),
    ({"a": [1, 2]}, {"a": [1, 2]}, "exact", True),
    ({"a": [1, 2]}, {"a": [2, 1]}, "exact", False),
])
def test_a_result_is_compared_with_the_expect_the_documented_way(result: Any, expected: Any, mode: str,
                                                                 matches: bool) -> None:
    assert result_matches(result, expected, mode) is matches


# ---- a batch through the runner's command line ------------------------------------------------------


def test_a_batch_reports_a_malformed_line_by_number_and_runs_every_other_case(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = write_lines(tmp_path / "cases.jsonl",
                        {"id": "one", "inputs": {"subject": "FSMs"}, "expect": "1. Intro (25 min)"},
                        "{broken",
                        {"id": "two", "inputs": {"subject": "Parsers"}, "expect": "something else"},
                        {"id": "three", "inputs": {"nope": 1}})
    code, lines, err = batch(tmp_path, capsys, "--inputs", str(cases), "--concurrency", "2")
    assert code == 1  # a failed case and a missed expect
    by_id = {line["id"]: line for line in lines}
    assert by_id["one"]["status"] == "final" and by_id["one"]["matched"] is True
    assert by_id["two"]["status"] == "final" and by_id["two"]["matched"] is False
    assert by_id["three"]["status"] == "failed" and by_id["three"]["failure"]["kind"] == "input"
    [invalid] = [line for line in lines if line["status"] == "invalid"]
    assert invalid["line"] == 2 and "not a JSON object" in invalid["error"]
    assert "line 2: skipped: not a JSON object" in err
    for line in (by_id["one"], by_id["two"]):
        assert {"inputs", "result", "path_length", "tokens", "cost_usd", "latency_s"} <= set(line)
        assert line["path_length"] == 3 and line["tokens"] > 0
    # the summary table: done / failed by kind, accuracy, tokens and cost, latency percentiles
    assert "done      2 reached a final state" in err
    assert "failed    1 (input 1)" in err
    assert "invalid   1 line(s) skipped" in err
    assert "accuracy  50.0% (1 of 2 cases with an expect)" in err
    assert "latency   p50 " in err and "p95 " in err


def test_every_case_ending_in_a_final_state_and_matching_exits_0(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cases = write_lines(tmp_path / "cases.jsonl",
                        *({"inputs": {"subject": f"topic {n}"}, "expect": "1. intro (25 MIN)"} for n in range(6)))
    code, lines, err = batch(tmp_path, capsys, "--inputs", str(cases), "--match", "text", "--concurrency", "6")
    assert code == 0, err
    assert sorted(line["id"] for line in lines) == [f"line-{n}" for n in range(1, 7)]
    assert all(line["matched"] for line in lines)


def test_a_results_file_is_never_overwritten_and_resume_skips_its_finished_cases(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = write_lines(tmp_path / "cases.jsonl", *({"id": f"c{n}", "inputs": {"subject": "s"}} for n in range(3)))
    out = tmp_path / "results.jsonl"
    assert batch(tmp_path, capsys, "--inputs", str(cases), "--out", str(out))[0] == 0
    assert len(out.read_text().splitlines()) == 3
    assert (tmp_path / "results.jsonl.checkpoints.sqlite").exists()
    code, _, err = batch(tmp_path, capsys, "--inputs", str(cases), "--out", str(out))
    assert code == 2 and "exists; continue the batch with --resume" in err
    code, _, err = batch(tmp_path, capsys, "--inputs", str(cases), "--out", str(out), "--resume")
    assert code == 0 and err.count("finished before, skipped") == 3
    assert "cases     3 (3 done by an earlier run of the batch)" in err and "done      3 reached a final state" in err
    assert len(out.read_text().splitlines()) == 3


def test_case_ids_that_clean_to_one_name_or_are_too_long_for_one_run_each_in_a_file_of_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "a/b" and "a b" both became the run id "a_b": the second case stopped the batch with an internal error
    # (its run "already exists" in the checkpoint), and with --resume would have taken up the first's run;
    # a 300-character id was a trace file name the system refused (another internal error).
    ids = ["a/b", "a b", "a_b", "x" * 300, "../up"]
    cases = write_lines(tmp_path / "cases.jsonl", *({"id": i, "inputs": {"subject": i}} for i in ids))
    out, traces = tmp_path / "results.jsonl", tmp_path / "traces"
    code, _, err = batch(tmp_path, capsys, "--inputs", str(cases), "--out", str(out), "--trace", str(traces),
                         "--concurrency", "1")
    assert code == 0, err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == ids and all(line["status"] == "final" for line in lines)
    run_ids = [line["run_id"] for line in lines]
    assert len(set(run_ids)) == len(ids) and run_ids[2] == "a_b"  # a safe id is its own run id
    assert all(len(r) <= 100 and "/" not in r and not r.startswith(".") for r in run_ids)
    assert sorted(p.name for p in traces.iterdir()) == sorted(f"{r}.jsonl" for r in run_ids)
    code, _, err = batch(tmp_path, capsys, "--inputs", str(cases), "--out", str(out), "--resume")
    assert code == 0 and err.count("finished before, skipped") == len(ids)


def test_an_id_written_as_another_cases_run_id_is_a_bad_line(tmp_path: Path) -> None:
    taken = BatchCase(1, "a b", {}).run_id
    cases = write_lines(tmp_path / "cases.jsonl", {"id": "a b", "inputs": {}}, {"id": taken, "inputs": {}})
    read = list(read_cases(str(cases)))
    assert isinstance(read[1], BadLine) and read[1].message == f"the id {taken!r} is the run id of line 1: choose another"


def test_a_new_batch_never_takes_up_the_runs_an_earlier_one_left_in_its_checkpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = write_lines(tmp_path / "cases.jsonl", *({"id": f"c{n}", "inputs": {"subject": "s"}} for n in range(4)))
    out = tmp_path / "results.jsonl"
    assert batch(tmp_path, capsys, "--inputs", str(cases), "--out", str(out))[0] == 0
    out.unlink()  # the results are gone, the checkpoint database of their runs is not
    code, _, err = batch(tmp_path, capsys, "--inputs", str(cases), "--out", str(out))
    assert code == 2 and not out.exists()
    assert "already holds runs of cases 'c0', 'c1', 'c2' and 1 more from an earlier batch" in err
    assert "--resume" in err
    (tmp_path / "results.jsonl.checkpoints.sqlite").unlink()
    assert batch(tmp_path, capsys, "--inputs", str(cases), "--out", str(out))[0] == 0
    assert len(out.read_text().splitlines()) == 4


def test_bad_batch_options_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    machine = api.runtime_machine(api.check_file(EVALUATOR))
    assert runner_main(machine, ["batch"]) == 2
    assert "--inputs" in capsys.readouterr().err
    assert runner_main(machine, ["batch", "--inputs", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read the cases file" in capsys.readouterr().err
    assert runner_main(machine, ["batch", "--inputs", "x", "--resume"]) == 2
    assert "needs --out" in capsys.readouterr().err
    assert runner_main(machine, ["batch", "--inputs", "x", "--concurrency", "0"]) == 2


def test_statewright_batch_and_a_generated_runner_take_the_same_options(tmp_path: Path) -> None:
    cases = write_lines(tmp_path / "cases.jsonl", {"id": "a", "inputs": {"subject": "FSMs"}})
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    common = ["--inputs", str(cases), "--script", str(script), "--quiet"]
    done = cli("batch", str(EVALUATOR), *common, "--out", str(tmp_path / "a.jsonl"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    runner = tmp_path / "runner.py"
    assert cli("compile", str(EVALUATOR), "-o", str(runner)).returncode == 0
    ran = subprocess.run([sys.executable, str(runner), "batch", *common, "--out", str(tmp_path / "b.jsonl")],
                         capture_output=True, text=True, check=False, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr

    def comparable(path: Path) -> list[dict[str, Any]]:
        return [{k: v for k, v in json.loads(line).items() if k != "latency_s"} for line in path.read_text().splitlines()]

    assert comparable(tmp_path / "a.jsonl") == comparable(tmp_path / "b.jsonl")


# ---- a batch killed and resumed, counted at a real HTTP server ----------------------------------------


def case_of(request: Any) -> tuple[str, str]:
    """(case topic, step) of a request the fake server recorded: what the user message asks."""
    text = request.body["messages"][-1]["content"]
    step = "first" if text.startswith("First") else "second"
    return text.rsplit(" ", 1)[-1].rstrip("."), step


@pytest.mark.slow
def test_a_batch_killed_midway_resumes_without_repeating_any_finished_cases_model_call(tmp_path: Path) -> None:
    spec = tmp_path / "chain.fsm"
    spec.write_text(CHAIN, encoding="utf-8")
    topics = [f"topic{n}" for n in range(12)]
    cases = write_lines(tmp_path / "cases.jsonl", *({"id": t, "inputs": {"topic": t}} for t in topics))
    out = tmp_path / "results.jsonl"
    with FakeOpenAIServer(default=Slow(0.25, Reply(text="ok"))) as server:
        env = {**os.environ, "OPENAI_API_KEY": "sk-fake-key-for-tests", "OPENAI_API_BASE": server.url + "/v1",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        command = [sys.executable, "-m", "statewright", "batch", str(spec), "--inputs", str(cases), "--out",
                   str(out), "--concurrency", "3", "--retries", "0"]
        victim = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: out.exists() and len(out.read_text().splitlines()) >= 4, "four finished cases", 120)
            victim.send_signal(signal.SIGKILL)
        finally:
            victim.kill()
            victim.communicate(timeout=30)
        finished = {json.loads(line)["id"] for line in out.read_text().splitlines() if line.endswith("}")}
        assert 4 <= len(finished) < len(topics)

        time.sleep(0.3)  # requests the killed process had in flight reach the server, or not, before we count
        before = len(server.requests)
        resumed = subprocess.run([*command, "--resume"], env=env, cwd=tmp_path, capture_output=True, text=True,
                                 check=False, timeout=180)
        assert resumed.returncode == 0, resumed.stderr
        after = [case_of(r) for r in server.requests[before:]]

    lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip().endswith("}")]
    assert sorted(line["id"] for line in lines) == sorted(topics)
    assert all(line["status"] == "final" and line["result"] == "ok" for line in lines)
    # no finished case made a single call after the resume
    assert not [call for call in after if call[0] in finished], after
    # and an interrupted case whose first step was checkpointed continued with its second step only
    assert all(after.count(call) == 1 for call in after)
    assert "finished before, skipped" in resumed.stderr


@pytest.mark.parametrize("frozen_before", [False, True])
def test_the_batch_command_keeps_what_was_loaded_out_of_the_collectors_sight(
    frozen_before: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The objects loaded before the runs are frozen while the batch runs and thawed after it; a process
    that froze objects itself keeps them as it froze them."""
    import gc

    from statewright.runtime import batch as batch_module

    seen: list[int] = []
    real = batch_module.run_batch

    async def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_freeze_count())
        return await real(*args, **kwargs)

    monkeypatch.setattr(batch_module, "run_batch", watched)  # (the batch command imports it when it runs)
    cases = write_lines(tmp_path / "cases.jsonl", {"inputs": {"subject": "FSMs"}})
    if frozen_before:
        gc.freeze()
    try:
        before = gc.get_freeze_count()
        code, lines, _ = batch(tmp_path, capsys, "--inputs", str(cases), "--quiet")
        assert code == 0 and [line["status"] for line in lines] == ["final"]
        if frozen_before:  # left as the process froze it (a frozen object freed since leaves the count)
            assert 0 < seen[0] <= before and 0 < gc.get_freeze_count() <= before
        else:  # frozen while the batch ran, thawed after it
            assert seen[0] > 0 and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
