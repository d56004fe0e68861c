"""The Temporal backend without a server: it stays unloaded until used, says how to install it when it is
missing, and names machines so that a running workflow always finds the spec it started with."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from support.e2e_runs import ROOT

from statewright import api
from statewright.runtime.client import ModelRequest, ModelResponse, ToolCallRequest
from statewright.runtime.scripted import Script, ScriptedReply
from statewright.runtime.temporal import (
    TEMPORAL_INSTALL_HINT,
    TemporalMachines,
    default_task_queue,
    machine_key,
    request_from_json,
    request_to_json,
    response_from_json,
    response_to_json,
    result_from_json,
    result_to_json,
    script_to_json,
    temporal_address,
)

EXAMPLE = ROOT / "examples" / "content_pipeline.fsm"
MERGEABLE = """machine twins {
    description "Two states that do the same thing: the optimizer merges them."
    input topic: str
    model "openai/gpt-4o-mini"
    agent a { prompt "p" }
    start state first { agent a  do "Write about {{ topic }}."  -> left }
    state left { agent a  do "Polish it."  -> done }
    state right { agent a  do "Polish it."  -> done }
    final state done
}
"""
NO_TEMPORALIO = "import sys\nsys.modules['temporalio'] = None\n"  # an import of it fails, as if not installed


def python(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, text=True, capture_output=True, check=False)


@pytest.mark.parametrize("argv", [["check", str(EXAMPLE)], ["fmt", "--check", str(EXAMPLE)],
                                  ["compile", str(EXAMPLE), "--standalone"], ["test", str(EXAMPLE)]],
                         ids=lambda a: a[0])
def test_commands_that_do_not_use_temporal_never_import_it(argv: list[str]) -> None:
    proc = python("import sys\nfrom statewright.cli import main\n"
                  f"assert main({argv!r}) == 0\n"
                  "assert 'temporalio' not in sys.modules, 'temporalio was imported'\n")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_a_runners_help_never_imports_temporal_and_its_options_say_how_to_install_it(tmp_path: Path) -> None:
    runner = tmp_path / "runner.py"
    assert api.load(EXAMPLE).compile(runner)
    for argv in (["--help"], ["worker", "--help"], ["status", "--help"], ["batch", "--help"]):
        proc = python(f"import runpy, sys\nsys.argv = [{str(runner)!r}, *{argv!r}]\n"
                      "try:\n"
                      f"    runpy.run_path({str(runner)!r}, run_name='__main__')\n"
                      "except SystemExit as done:\n"
                      "    assert done.code == 0, done.code\n"
                      "assert 'temporalio' not in sys.modules\n", cwd=tmp_path)
        assert proc.returncode == 0, (argv, proc.stderr)
        assert "--temporal" in proc.stdout
    for argv in (["--input", "topic=x", "--temporal", "127.0.0.1:7233"],
                 ["worker", "--temporal", "127.0.0.1:7233"],
                 ["--selftest", "--temporal", "127.0.0.1:7233"]):
        proc = python(NO_TEMPORALIO + f"sys.argv = [{str(runner)!r}, *{argv!r}]\nimport runpy\n"
                      f"runpy.run_path({str(runner)!r}, run_name='__main__')\n", cwd=tmp_path)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert TEMPORAL_INSTALL_HINT in proc.stderr and "Traceback" not in proc.stderr


def test_the_statewright_command_says_how_to_install_temporal_too() -> None:
    proc = python(NO_TEMPORALIO + "from statewright.cli import main\n"
                  f"sys.exit(main(['worker', {str(EXAMPLE)!r}, '--temporal', '127.0.0.1:7233']))\n")
    assert proc.returncode == 2
    assert "pip install 'statewright[temporal]'" in proc.stderr and "Traceback" not in proc.stderr


def test_detach_without_temporal_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from statewright.cli import main

    assert main(["run", str(EXAMPLE), "--input", "topic=x", "--detach"]) == 2
    assert "--detach starts a run on a Temporal cluster" in capsys.readouterr().err


def test_a_machine_is_named_by_its_source_and_its_shape(tmp_path: Path) -> None:
    spec = tmp_path / "twins.fsm"
    spec.write_text(MERGEABLE)
    comp = api.check_path(spec)
    written, optimized = api.runtime_machine(comp, level=0), api.runtime_machine(comp)
    assert len(optimized.states) < len(written.states)
    assert machine_key(written) != machine_key(optimized)
    assert machine_key(written).split(".")[0] == machine_key(optimized).split(".")[0] == written.source_sha256[:16]
    assert machine_key(api.runtime_machine(api.check_path(spec), level=0)) == machine_key(written)
    # one task queue per source version, whatever the optimization level
    assert default_task_queue(written) == default_task_queue(optimized) == f"statewright.twins.{written.source_sha256[:12]}"
    edited = api.runtime_machine(api.check_text(MERGEABLE.replace("Polish it.", "Polish it well."), str(spec)))
    assert default_task_queue(edited) != default_task_queue(optimized)
    registry = TemporalMachines([written])
    refusal = registry.refusal({"machine": "twins", "source_sha256": written.source_sha256,
                                "key": machine_key(optimized)}, "q")
    assert "optimized differently" in refusal
    refusal = registry.refusal({"machine": "twins", "source_sha256": "0" * 64, "key": "0" * 16 + ".x"}, "q")
    assert "statewright worker SPEC.fsm --task-queue q" in refusal


def test_what_travels_through_the_history_comes_back_the_same() -> None:
    script = Script()
    script.add("agent", "draft", ScriptedReply({"value": 1, "delay": 2}))  # a reply that looks like a delayed one
    script.add("agent", "draft", ScriptedReply("late", 0.25))
    script.add("tool", "run", [1, 2])
    script.add("person", "approve", {"answer": "no"})
    script.add("person", "approve", {"timeout": True})
    back = Script.from_json(script_to_json(script))
    assert [(r.value, r.delay) for r in back.replies("agent", "draft")] == [({"value": 1, "delay": 2}, 0.0),
                                                                          ("late", 0.25)]
    assert [r.value for r in back.replies("person", "approve")] == [{"answer": "no"}, {"timeout": True}]
    assert script_to_json(script, ("tool", "run")) == {"tool": {"run": [{"value": [1, 2], "delay": 0.0}]}}
    request = ModelRequest("agent", "draft", "m", [{"role": "user", "content": "hi"}], fallbacks=("a", "b"),
                           metadata={"statewright": {"seq": 1}})
    assert request_from_json(request_to_json(request)) == request
    response = ModelResponse("ok", "m", [ToolCallRequest("c1", "f", "{}")], 1, 2, 0.5, 3.0, 2, [{"type": "retry"}])
    assert response_from_json(response_to_json(response)) == response
    result = api.load(EXAMPLE).test()[0].result
    assert result is not None
    again = result_from_json(result_to_json(result))
    assert again.to_json() == result.to_json()
    assert again.failure == result.failure


def test_a_temporal_address_takes_the_default_port() -> None:
    assert temporal_address("localhost") == "localhost:7233"
    assert temporal_address(" 10.0.0.1:7000 ") == "10.0.0.1:7000"
    with pytest.raises(ValueError):
        temporal_address("")


def test_a_machine_added_twice_is_served_once() -> None:
    written = api.runtime_machine(api.check_path(EXAMPLE), level=0)
    registry = TemporalMachines([written, dataclasses.replace(written)])
    assert list(registry.entries) == [machine_key(written)]
