"""The runner's command line (as a generated runner and `statewright run` use it) and its Python entry points."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest
from support.fake_client import FakeClient
from support.machines import final, go, machine, state, when
from support.scripted_litellm import register_scripted_provider

from statewright.runtime.runner_cli import arun_machine as arun
from statewright.runtime.runner_cli import main
from statewright.runtime.runner_cli import run_machine as run
from statewright.runtime.scripted import Script
from statewright.runtime.spec import InputSpec, LimitsSpec, TestSpec

SCRIPTED = ["--model-map", "*=scripted/any"]


def greeter(**options):
    return machine(
        state("greet", when(lambda s: s.inputs["times"] > 1, "again", "times > 1"), go("done"),
              do="Greet {{ name }} {{ times }} time(s)."),
        state("again", go("done")),
        final("done", "{{ again.output or greet.output }}"),
        inputs=[InputSpec("name", str), InputSpec("times", int, required=False, default=1)],
        name="greeter", **options,
    )


def scripted(**replies):
    script = Script()
    for state_name, values in replies.items():
        for value in values:
            script.add("agent", state_name, value)
    return register_scripted_provider(script)


def test_help_lists_the_inputs_and_does_not_import_litellm():
    program = textwrap.dedent("""
        import sys
        from statewright.runtime.runner_cli import main
        from statewright.runtime.spec import InputSpec, LimitsSpec, MachineSpec, StateSpec
        spec = MachineSpec(name="tiny", description="A tiny machine.", inputs=(InputSpec("topic", str),),
                           model="m", verifier_model="m", temperature=None, limits=LimitsSpec(), agents={},
                           states={"done": StateSpec("done", "final")}, start="done")
        code = main(spec, ["--help"])
        print("EXIT", code, "litellm" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)
    assert "topic: str" in done.stdout
    assert "A tiny machine." in done.stdout
    assert done.stdout.strip().endswith("EXIT 0 False")


@pytest.mark.parametrize("argv, message", [
    (["--input", "name=Ada", "--input", "times=many"], "input 'times'"),
    (["--input", "nme=Ada"], "did you mean 'name'?"),
    ([], "missing required input 'name'"),
    (["--input", "name"], "--input takes KEY=VALUE"),
    (["--input", "name=Ada", "--resume", "abc"], "--resume needs --checkpoint"),
    (["--input", "name=Ada", "--model-map", "nothing"], "--model-map takes KEY=VALUE"),
    (["--bogus"], "unrecognized arguments"),
])
def test_usage_errors_exit_2_with_a_clear_message(argv, message, capsys):
    assert main(greeter(), argv) == 2
    assert message in capsys.readouterr().err


def test_an_inputs_file_that_is_not_json_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "inputs.json"
    bad.write_text("{name: Ada}")
    assert main(greeter(), ["--inputs-file", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_a_run_prints_its_result_as_json_and_exits_0(tmp_path, capsys):
    scripted(greet=["Hello, Ada!"], again=["Hello again, Ada!"])
    trace = tmp_path / "trace.jsonl"
    code = main(greeter(), ["--input", "name=Ada", "--input", "times=2", "--trace", str(trace), *SCRIPTED])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["status"] == "final" and out["result"] == "Hello again, Ada!"
    assert out["path"] == ["greet", "again", "done"]
    assert [json.loads(line)["event"] for line in trace.read_text().splitlines()][-1] == "run_end"


def test_values_are_json_when_that_fits_the_input_and_text_otherwise(tmp_path, capsys):
    scripted(greet=["ok"])
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"name": "from file", "times": 1}))
    code = main(greeter(), ["--inputs-file", str(inputs), "--input", "name=42", "--trace",
                            str(tmp_path / "t.jsonl"), *SCRIPTED])
    assert code == 0
    start = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert start["inputs"] == {"name": "42", "times": 1}  # "42" stays text for a str input


def test_a_failed_run_exits_1_and_its_json_names_the_failure(capsys):
    scripted(greet=["one"], again=["two"])
    code = main(greeter(limits=LimitsSpec(steps=1)), ["--input", "name=Ada", "--input", "times=3", *SCRIPTED])
    captured = capsys.readouterr()
    assert code == 1
    failure = json.loads(captured.out)["failure"]
    assert (failure["kind"], failure["limit"]) == ("limit", "steps")
    assert "run failed (limit steps)" in captured.err


def test_a_run_stopped_by_its_script_resumes_from_the_checkpoint(tmp_path, capsys):
    db = str(tmp_path / "runs.db")
    scripted(greet=["Hello!"])  # no reply for `again`: the run stops there
    argv = ["--input", "name=Ada", "--input", "times=2", "--checkpoint", db, "--run-id", "r1", *SCRIPTED]
    assert main(greeter(), argv) == 1
    assert "--resume r1" in capsys.readouterr().err

    script = scripted(greet=["never asked"], again=["Hello again!"])
    assert main(greeter(), ["--checkpoint", db, "--resume", "r1", *SCRIPTED]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["result"] == "Hello again!" and out["path"] == ["greet", "again", "done"]
    assert script.calls == [("agent", "again", 0)]

    assert main(greeter(), ["--checkpoint", db, "--list-runs"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "final"


def test_resuming_an_unknown_run_is_a_usage_error(tmp_path, capsys):
    assert main(greeter(), ["--checkpoint", str(tmp_path / "runs.db"), "--resume", "nope"]) == 2
    assert "no checkpoint of run 'nope'" in capsys.readouterr().err


def test_selftest_runs_the_test_blocks_and_fails_when_one_fails(capsys):
    passing = TestSpec("says hello", {"name": "Ada"}, (("reply", "greet", "Hi"),), expect_path=("greet", "done"),
                       expect_result="Hi", has_expect_result=True)
    failing = TestSpec("expects the wrong path", {"name": "Ada"}, (("reply", "greet", "Hi"),),
                       expect_path=("greet", "again", "done"))
    assert main(greeter(tests=(passing,)), ["--selftest"]) == 0
    assert "PASS  says hello" in capsys.readouterr().out
    assert main(greeter(tests=(passing, failing)), ["--selftest"]) == 1
    assert "FAIL  expects the wrong path" in capsys.readouterr().out


def test_run_and_arun_are_the_python_face():
    client = FakeClient({("agent", "greet"): ["Hi, Ada."]})
    result = run(greeter(), {"name": "Ada"}, client=client)
    assert result.ok and result.result == "Hi, Ada."
    client = FakeClient({("agent", "greet"): ["Hi, Bo."]})
    result = asyncio.run(arun(greeter(), {"name": "Bo"}, client=client))
    assert result.result == "Hi, Bo."
    assert client.requests[0].messages[-1]["content"] == "Greet Bo 1 time(s)."
