"""`statewright source-map RUNNER.py:LINE`: a generated runner's line back to the `.fsm` position it was
written from, through the runner's SOURCE_MAP — for every guard, transition, state, agent and test block of
every example, in both runner forms, and a clear answer for lines that come from no one place."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from statewright import api
from statewright.cli import main
from statewright.compiler.codegen.source_map import NotARunner, runner_origin

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.fsm"))


def compiled(spec: Path, out: Path, *, standalone: bool = True) -> list[str]:
    out.parent.mkdir(parents=True, exist_ok=True)
    assert main(["compile", str(spec), "-o", str(out), *(["--standalone"] if standalone else [])]) == 0
    return out.read_text(encoding="utf-8").split("\n")


def spec_line(path: str, line: int) -> str:
    return Path(path).read_text(encoding="utf-8").split("\n")[line - 1]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_guard_transition_and_state_of_an_example_maps_to_where_the_spec_writes_it(
        example: Path, tmp_path: Path) -> None:
    runner = tmp_path / "out" / "runner.py"
    lines = compiled(example, runner)
    text = "\n".join(lines)
    mapped = api.runner_map(runner)
    checked = 0
    for number, line in enumerate(lines, start=1):
        guard = re.fullmatch(r"# (when .*)", line)
        if guard and lines[number].startswith("def "):  # the guard as the spec says it, above its function
            for at in (number, number + 1, number + 2):  # the comment, the def, the body
                found = mapped.origin(at)
                assert found is not None, (example.name, at)
                assert spec_line(found.path, found.line)[found.column - 1 :].startswith(guard.group(1))
                checked += 1
        entry = re.fullmatch(r'    "([^"]+)": "([^"]+)",', line)
        if entry and number > text[: text.index("SOURCE_MAP = {")].count("\n"):
            found = mapped.origin(number)
            assert found is not None and (found.key, found.written) == entry.groups()
            checked += 1
        if line.strip() == "TransitionSpec(":
            found = mapped.origin(number + 1)
            assert found is not None and " transition " in found.key
            assert re.match(r"(when|->|otherwise|after) ", spec_line(found.path, found.line)[found.column - 1 :])
            checked += 1
        state = re.fullmatch(r'        "(\w+)": StateSpec\(', line)
        if state:
            found = mapped.origin(number + 1)  # name="...": the state itself
            assert found is not None and found.key == state.group(1)
            assert re.search(rf"\bstate {state.group(1)}\b", spec_line(found.path, found.line))
            checked += 1
    assert checked > 10


def test_the_command_prints_file_line_column_and_what_is_there(tmp_path: Path) -> None:
    example = ROOT / "examples" / "support_triage.fsm"
    runner = tmp_path / "gen" / "triage_runner.py"
    lines = compiled(example, runner)
    guard = next(i for i, line in enumerate(lines, start=1) if line.startswith("# when any("))
    done = subprocess.run([sys.executable, "-m", "statewright", "source-map", f"gen/triage_runner.py:{guard + 1}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    written, _, key = done.stdout.strip().partition(": ")
    path, line, column = written.rsplit(":", 2)
    assert key == "classify transition 1"
    assert (tmp_path / path).resolve() == example.resolve()
    assert spec_line(str(example), int(line))[int(column) - 1 :].startswith("when any(t in")
    done = subprocess.run([sys.executable, "-m", "statewright", "source-map", "--format", "json",
                           f"gen/triage_runner.py:{guard}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"runner": "gen/triage_runner.py", "runner_line": guard, "found": True,
                                       "key": "classify transition 1", "file": path, "line": int(line),
                                       "column": int(column)}


def test_a_runner_beside_its_runtime_package_maps_its_lines_too(tmp_path: Path) -> None:
    example = ROOT / "examples" / "content_pipeline.fsm"
    runner = tmp_path / "runner.py"
    lines = compiled(example, runner, standalone=False)
    review = next(i for i, line in enumerate(lines, start=1) if line.strip() == 'STATES["review"] = StateSpec(')
    found = api.runner_origin(runner, review + 3)
    assert found is not None and found.key == "review"
    assert spec_line(found.path, found.line).startswith("    state review {")


def test_lines_that_come_from_no_place_of_the_spec_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    runner = tmp_path / "runner.py"
    lines = compiled(ROOT / "examples" / "support_triage.fsm", runner)
    capsys.readouterr()
    runtime = next(i for i, line in enumerate(lines, start=1) if line.startswith("def run_machine("))
    model = next(i for i, line in enumerate(lines, start=1) if line.startswith("class Triage(BaseModel)"))
    for number in (1, runtime, model, len(lines) + 50):
        assert main(["source-map", f"{runner}:{number}"]) == 1
        out = capsys.readouterr()
        assert out.out == "" and f"{runner}:{number} comes from no one place of the spec" in out.err
    assert main(["source-map", "--format", "json", f"{runner}:1"]) == 1
    assert json.loads(capsys.readouterr().out) == {"runner": str(runner), "runner_line": 1, "found": False}


@pytest.mark.parametrize("argument", ["runner.py", "runner.py:", "runner.py:0", "runner.py:x", ":12"])
def test_an_argument_that_is_not_a_runner_and_a_line_is_a_usage_error(argument: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["source-map", argument]) == 2
    assert "is not RUNNER.py:LINE" in capsys.readouterr().err


def test_a_file_that_is_missing_or_is_not_a_runner_is_an_input_error(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["source-map", f"{tmp_path / 'missing.py'}:3"]) == 1
    assert "cannot read" in capsys.readouterr().err
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n", encoding="utf-8")
    assert main(["source-map", f"{plain}:1"]) == 1
    assert "no SOURCE_MAP: not a runner statewright generated" in capsys.readouterr().err
    assert main(["source-map", f"{ROOT / 'examples' / 'support_triage.fsm'}:3"]) == 1
    assert "not a runner statewright generated: not Python" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs and /dev/zero")
def test_a_file_that_is_no_regular_file_or_nests_too_deeply_is_an_input_error_not_an_internal_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # /dev/zero was read without end (an internal MemoryError here; a language server was killed), a FIFO
    # waited for a writer for ever, and Python's parser giving up on deep nesting was an internal MemoryError
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.py"
    deep.write_text("x = " + "-" * 1_000_000 + "1\n", encoding="utf-8")
    for path, said in (("/dev/zero", "cannot read /dev/zero: it is a device, not a regular file"),
                       (str(fifo), "it is a FIFO (named pipe), not a regular file"),
                       (str(deep), "not a runner statewright generated: nested too deeply to read as Python")):
        assert main(["source-map", f"{path}:1"]) == 1
        err = capsys.readouterr().err
        assert said in err and "internal" not in err


@pytest.mark.parametrize("written", ["x.fsm:\u00b2:1", "x.fsm:" + "9" * 5000 + ":1", "x.fsm:0:0", "x.fsm:3:0",
                                     "x.fsm:1234567890:1", "x.fsm:\u0663:1"])
def test_a_position_a_runner_holds_that_code_generation_never_writes_maps_to_nothing(
        written: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "²" passed str.isdigit and then failed int() (an internal ValueError), so did 5000 digits; a line or a
    # column 0 became a position before the file (the language server could not send it)
    runner = tmp_path / "runner.py"
    runner.write_text(f'SOURCE_MAP = {{\n    "s": "{written}",\n}}\n', encoding="utf-8")
    assert api.runner_origin(runner, 2) is None
    assert main(["source-map", f"{runner}:2"]) == 1
    assert "comes from no one place of the spec" in capsys.readouterr().err


def test_a_runner_whose_name_holds_a_colon_is_read_up_to_the_last_colon(tmp_path: Path) -> None:
    runner = tmp_path / "a:b_runner.py"
    lines = compiled(ROOT / "examples" / "support_triage.fsm", runner)
    entry = next(i for i, line in enumerate(lines, start=1) if line.startswith('    "classify": "'))
    assert main(["source-map", f"{runner}:{entry}"]) == 0


def test_reading_a_runner_never_runs_it(tmp_path: Path) -> None:
    hostile = tmp_path / "hostile.py"
    hostile.write_text('open(__file__ + ".ran", "w").close()\nSOURCE_MAP = {\n    "s": "x.fsm:3:5",\n}\n'
                       'MACHINE = Spec(origin=SOURCE_MAP["s"],\n    other=1)\n', encoding="utf-8")
    found = runner_origin(hostile.read_text(encoding="utf-8"), 6, str(hostile))
    assert found is not None and (found.key, found.line, found.column) == ("s", 3, 5)
    assert found.path == str(tmp_path / "x.fsm")
    assert not (tmp_path / "hostile.py.ran").exists()
    with pytest.raises(NotARunner):
        runner_origin("x = (", 1)
    with pytest.raises(NotARunner):
        runner_origin("x = '\0'", 1)


def test_a_table_written_in_groups_maps_every_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A large machine's SOURCE_MAP is written 250 entries a statement: a state whose key is in a
    later `SOURCE_MAP.update({...})` maps to its spec line like the first ones (through the CLI too)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from compile_scaling import generate_machine

    spec = tmp_path / "big.fsm"
    spec.write_text(generate_machine(400), encoding="utf-8")
    runner = tmp_path / "big_runner.py"
    lines = compiled(spec, runner, standalone=False)
    assert sum(line.startswith("SOURCE_MAP.update({") for line in lines) >= 1
    for state in ("s0", "s399", "failed"):
        line = next(i for i, text in enumerate(lines, start=1) if text.startswith(f'STATES["{state}"] = StateSpec('))
        found = api.runner_origin(runner, line)
        assert found is not None and found.key == state, (state, found)
        assert spec_line(found.path, found.line).lstrip().startswith(("state", "start state", "final state"))
    capsys.readouterr()
    assert main(["source-map", f"{runner}:{line}"]) == 0
    assert "big.fsm:" in capsys.readouterr().out
