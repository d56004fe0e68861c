"""Issue 9, item 8, at run time: a template reads the field for every field name the language accepts —
keywords, leading underscores, the names of pydantic's methods and attributes, and keys of a tool's result
named like dict methods (`items`, `keys`, `values`, `get`) — in `statewright test`, a generated runner's
`--selftest`, and `statewright run` against a model over HTTP, never a method or a missing attribute."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support.e2e_runs import cli, compile_runner, runner_process
from support.fake_openai_server import FakeOpenAIServer, Reply

RECORDS = '''\
machine records {
    model "openai/clerk"
    tool lookup = "records_tool:lookup"

    type Record {
        class: str
        _id: int
        json: str
        copy: bool
        dict: list[str]
        schema: str
        validate: int
        model_config: str
        model_dump: str
        items: list[str]
        keys: int
    }

    agent clerk {
        prompt "You keep records."
    }

    start state fetch {
        agent clerk
        do "Fetch the record."
        output Record
        -> look
    }

    state look {
        call lookup(q = fetch.output.class)
        -> done
    }

    final state done {
        result """
            {{ fetch.output.class }} {{ fetch.output._id }} {{ fetch.output.json }} {{ fetch.output.copy }}
            {{ fetch.output.dict }} {{ fetch.output.schema }} {{ fetch.output.validate }}
            {{ fetch.output.model_config }} {{ fetch.output.model_dump }} {{ fetch.output.items }}
            {{ fetch.output.keys }} {{ fetch.output["class"] }} {{ fetch.output["json"] }}
            {{ look.output.items }} {{ look.output.keys }} {{ look.output.values }} {{ look.output["get"] }}
        """
    }

    test "every field is read by its name" {
        reply fetch {
            class "C"
            _id 3
            json "J"
            copy true
            dict ["d"]
            schema "S"
            validate 7
            model_config "MC"
            model_dump "MD"
            items ["i1"]
            keys 5
        }
        reply look {
            items ["t1", "t2"]
            keys 2
            values "V"
            get "G"
        }
        expect result "C 3 J True\\n[\\"d\\"] S 7\\nMC MD [\\"i1\\"]\\n5 C J\\n[\\"t1\\", \\"t2\\"] 2 V G"
    }
}
'''
TOOL = '''\
def lookup(q: str) -> dict:
    """Look a record up."""
    return {"items": [q, "t2"], "keys": 2, "values": "V", "get": "G"}
'''
RENDERED = 'C 3 J True\n["d"] S 7\nMC MD ["i1"]\n5 C J\n["C", "t2"] 2 V G'
RECORD = {"class": "C", "_id": 3, "json": "J", "copy": True, "dict": ["d"], "schema": "S", "validate": 7,
          "model_config": "MC", "model_dump": "MD", "items": ["i1"], "keys": 5}


def write_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "records.fsm"
    spec.write_text(RECORDS, encoding="utf-8")
    (tmp_path / "records_tool.py").write_text(TOOL, encoding="utf-8")
    return spec


def test_statewright_test_and_a_runners_selftest_read_every_field_by_name(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    done = cli("test", str(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    runner = compile_runner(spec, tmp_path / "records_runner.py")
    selftest = runner_process(sys.executable, runner, "--selftest", cwd=tmp_path)
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    assert "PASS" in selftest.stdout


def test_a_run_against_a_model_reads_every_field_by_name(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    runner = compile_runner(spec, tmp_path / "records_runner.py")
    with FakeOpenAIServer() as server:
        env = {"OPENAI_API_BASE": server.url + "/v1", "OPENAI_API_KEY": "sk-test-dummy-0000",
               "PYTHONPATH": str(tmp_path)}
        server.enqueue(Reply(json=RECORD), Reply(json=RECORD))
        run = cli("run", str(spec), "--quiet", cwd=tmp_path, env=env)
        generated = runner_process(sys.executable, runner, "--quiet", cwd=tmp_path, env=env)
    for done in (run, generated):
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["result"] == RENDERED
