"""Runners of machines that run machines: every machine the entry runs is written into the one runner (each once,
names that cannot clash), deterministic, standalone; `--selftest` runs every included file's tests; `--runtime
module` runners share the runtime; the in-memory machine is the written one."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from statewright import api
from statewright.cli import main

LEAF = """\
machine {name} {{
    input topic: str
    returns Report

    type Report {{
        text: str
        score: int
    }}

    agent worker {{
        prompt "You work on {{{{ topic }}}}."
    }}

    start state draft {{
        agent worker
        do "Work on {{{{ topic }}}}."
        output Report
        when output.score > 5 -> done
        otherwise -> weak
    }}

    final state done
    final state weak {{
        fail "weak work on {{{{ topic }}}}"
    }}

    test "{name} works" {{
        input {{ topic "x" }}
        reply draft {{ text "t"  score 9 }}
        expect final done
    }}
}}
"""

MIDDLE = """\
use "leaf.fsm"

machine {name} {{
    input topic: str
    returns str

    # a type of the same name as the leaf's, and states named like generated functions
    type Report {{
        summary: str
    }}

    start state guard_draft_0 {{
        run leaf(topic = topic)
        when output.ok and output.result != none -> done
        otherwise -> failed
    }}

    final state done {{
        result "{{{{ guard_draft_0.output.result.text if guard_draft_0.output.result }}}}"
    }}
    final state failed {{
        fail "the leaf failed"
    }}

    test "{name} passes the leaf's text on" {{
        input {{ topic "x" }}
        reply guard_draft_0/draft {{ text "from the leaf"  score 9 }}
        expect result "from the leaf"
    }}
}}
"""

TOP = """\
use "left.fsm"
use "right.fsm" as other_side

machine top {
    input topics: list[str]

    type Report {
        count: int
    }

    agent summariser {
        prompt "You summarise."
    }

    start state fan {
        for topic in topics max 3 concurrency 2
        run left(topic = topic)
        when all(o.ok for o in output) -> side
        otherwise -> failed
    }

    state side {
        run other_side(topic = "the other side")
        when output.ok -> sum
        otherwise -> failed
    }

    state sum {
        agent summariser
        do "Summarise {{ fan.output }} and {{ side.output.result }}."
        output Report
        -> done
    }

    final state done
    final state failed {
        fail "a call failed"
    }

    test "everything runs" {
        input { topics ["a", "b"] }
        reply fan[0]/guard_draft_0/draft { text "A"  score 9 }
        reply fan[1]/guard_draft_0/draft { text "B"  score 8 }
        reply side/guard_draft_0/draft { text "S"  score 7 }
        reply sum { count 3 }
        expect path [fan, side, sum, done]
        expect output side { ok true  final "done"  result "S" }
    }

    test "a weak leaf fails the map" {
        input { topics ["a"] }
        reply fan[0]/guard_draft_0/draft { text "A"  score 1 }
        expect failure final
        expect path [fan, failed]
    }
}
"""


@pytest.fixture
def diamond(tmp_path: Path) -> Path:
    """top runs left (a map of calls) and right (as other_side); both run the one leaf."""
    files = {"leaf.fsm": LEAF.format(name="leaf"), "left.fsm": MIDDLE.format(name="left"),
             "right.fsm": MIDDLE.format(name="right"), "top.fsm": TOP}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def compile_runner(source: Path, output: Path, *extra: str) -> str:
    output.parent.mkdir(parents=True, exist_ok=True)
    assert main(["compile", str(source), "-o", str(output), *extra]) == 0
    return output.read_text(encoding="utf-8")


def run_runner(runner: Path, *args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": ""}
    return subprocess.run([python, str(runner), *args], capture_output=True, text=True, cwd=runner.parent,
                          env=env, timeout=300, check=False)


def test_a_runner_holds_every_machine_once_each_after_those_it_runs(diamond: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    text = compile_runner(diamond / "top.fsm", diamond / "out" / "top_runner.py")
    capsys.readouterr()
    headers = [line for line in text.splitlines() if line.startswith("# ==== the machine")]
    assert headers == ["# ==== the machine `leaf`, from ../leaf.fsm ====",
                       "# ==== the machine `left`, from ../left.fsm ====",
                       "# ==== the machine `right`, from ../right.fsm ====",
                       "# ==== the machine `top`, from ../top.fsm ===="]
    assert text.count("MACHINE_leaf = MachineSpec(") == 1  # the leaf both middles run: written once
    assert 'machines={"leaf": MACHINE_leaf}' in text
    assert 'machines={"left": MACHINE_left, "other_side": MACHINE_right}' in text
    # four classes named Report: each its own Python name
    # four classes named Report: the entry's keeps its name, the others are named apart
    assert [line for line in text.splitlines() if line.startswith("class Report")] == [
        "class ReportType(BaseModel):", "class ReportType2(BaseModel):", "class ReportType3(BaseModel):",
        "class Report(BaseModel):"]
    assert "result_type=ReportType," in text and "result_type=LeftResult," in text
    assert text.splitlines()[4].startswith('"""Runner for the statewright machine `top`.')
    assert "It runs `leaf` (../leaf.fsm), `left` (../left.fsm), `right` (../right.fsm), written below." in text


def test_the_runners_selftest_runs_every_included_files_tests(diamond: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    runner = diamond / "out" / "top_runner.py"
    compile_runner(diamond / "top.fsm", runner)
    capsys.readouterr()
    done = run_runner(runner, "--selftest")
    assert done.returncode == 0, done.stdout + done.stderr
    passed = [line for line in done.stdout.splitlines() if line.startswith("PASS")]
    # the entry's own tests first, then each machine it runs (depth first, each once)
    assert passed == ["PASS  everything runs", "PASS  a weak leaf fails the map",
                      "PASS  left: left passes the leaf's text on", "PASS  leaf: leaf works",
                      "PASS  right: right passes the leaf's text on"]
    assert "5 passed, 0 failed" in done.stderr


def test_statewright_test_and_the_runner_agree(diamond: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(diamond)]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 5  # top's two, the leaf's, the middles' (each file's own, once)


def test_runners_are_byte_identical_whatever_the_hash_seed(diamond: Path) -> None:
    outputs = set()
    for seed in ("0", "1", "12345"):
        done = subprocess.run([sys.executable, "-m", "statewright", "compile", str(diamond / "top.fsm"),
                               "--standalone"],
                              capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed},
                              timeout=120, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1


def test_runners_share_the_runtime_package_and_a_standalone_one_runs_alone(
        diamond: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = diamond / "out"
    compile_runner(diamond / "top.fsm", out / "top_runner.py")
    compile_runner(diamond / "left.fsm", out / "left_runner.py")
    alone = diamond / "alone"
    compile_runner(diamond / "top.fsm", alone / "top_runner.py", "--standalone")
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["left_runner.py", "statewright_runtime", "top_runner.py"]
    assert sorted(p.name for p in alone.iterdir()) == ["top_runner.py"]
    for runner in (out / "top_runner.py", out / "left_runner.py", alone / "top_runner.py"):
        done = run_runner(runner, "--selftest")
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_runner_runs_a_call_from_its_command_line(diamond: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import json

    runner = diamond / "out" / "right_runner.py"
    compile_runner(diamond / "right.fsm", runner)
    capsys.readouterr()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"guard_draft_0/draft": [{"text": "hello", "score": 6}]}}),
                      encoding="utf-8")
    done = run_runner(runner, "--input", "topic=x", "--script", str(script), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert (result["final_state"], result["result"]) == ("done", "hello")


def test_the_machine_in_memory_is_the_machine_the_runner_writes(diamond: Path) -> None:
    comp = api.check_path(diamond / "top.fsm")
    spec = api.runtime_machine(comp)
    assert set(spec.machines) == {"left", "other_side"}
    assert spec.machines["left"].machines["leaf"] is spec.machines["other_side"].machines["leaf"]
    assert spec.machines["left"].result_type is str or spec.machines["left"].result_wrapped
    leaf = spec.machines["left"].machines["leaf"]
    assert leaf.result_type is not None and leaf.result_type.__name__ == "ReportType"
    assert [field for field in leaf.result_type.model_fields] == ["text", "score"]
    assert spec.states["fan"].run is not None and spec.states["fan"].run.machine == "left"
    assert spec.states["fan"].run.args(spec_scope(each={"topic": "t"})) == {"topic": "t"}
    # the hash covers every file: change the leaf, and top's hash changes
    before = spec.source_sha256
    (diamond / "leaf.fsm").write_text(LEAF.format(name="leaf").replace("You work", "You labour"), encoding="utf-8")
    after = api.runtime_machine(api.check_path(diamond / "top.fsm")).source_sha256
    assert before != after


def spec_scope(each: dict[str, object]) -> object:
    from statewright.runtime.spec import Scope

    return Scope(output=None, inputs={"topics": ["t"]}, outputs={}, visits={}, each=each)


@pytest.mark.slow
def test_a_runner_that_runs_machines_needs_no_statewright(diamond: Path, bare_python: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    runner = diamond / "out" / "top_runner.py"
    compile_runner(diamond / "top.fsm", runner)
    capsys.readouterr()
    done = run_runner(runner, "--selftest", python=str(bare_python))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed, 0 failed" in done.stderr


def test_a_runner_names_every_file_from_its_own_folder_whatever_path_a_use_gives(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "leaf.fsm").write_text(LEAF.format(name="leaf"), encoding="utf-8")
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "left.fsm").write_text(MIDDLE.format(name="left").replace(
        'use "leaf.fsm"', f'use "{shared / "leaf.fsm"}"'), encoding="utf-8")
    text = compile_runner(tmp_path / "flows" / "left.fsm", tmp_path / "out" / "runner.py")
    capsys.readouterr()
    assert str(tmp_path) not in text  # an absolute `use` path does not reach the runner
    assert "# ==== the machine `leaf`, from ../shared/leaf.fsm ====" in text
    assert '"agent worker": "../shared/leaf.fsm:' in text


@pytest.mark.parametrize("form", [[], ["--standalone"]])
def test_a_used_file_whose_name_holds_backslashes_and_quotes_cannot_break_the_runners_docstring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], form: list[str]) -> None:
    # The docstring names every file the runner includes: `\N`, `\x` or `"""` in a file name had ended it
    # or been read as an escape it is not, and the runner was not Python.
    name = 'leaf\\N\\x"""q\u2028.fsm'
    (tmp_path / name).write_text(LEAF.format(name="leaf"), encoding="utf-8")
    (tmp_path / "top.fsm").write_text(MIDDLE.format(name="top").replace(
        'use "leaf.fsm"', 'use "leaf\\\\N\\\\x\\"\\"\\"q\\u2028.fsm"'), encoding="utf-8")
    text = compile_runner(tmp_path / "top.fsm", tmp_path / "out" / "runner.py", *form)
    capsys.readouterr()
    docstring = ast.get_docstring(ast.parse(text))
    assert docstring is not None and f"It runs `leaf` (../{name})" in docstring
    done = run_runner(tmp_path / "out" / "runner.py", "--selftest")
    assert done.returncode == 0, done.stdout + done.stderr
