"""Every sink a person reads escapes terminal control characters: a hostile name is shown, never obeyed.

One hostile name per sink — `trace show`'s timeline and every one of its tables, a run's summary and its
errors, the `test` report (the interpreter's and a runner's), the comments that explain an imported file's
names, a batch's progress and summary: the output holds the name's escapes (`\\x1b`) and no raw control
character (C0 but line breaks and tabs, DEL, C1, line separators, bidi overrides).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from support.e2e_runs import cli, compile_runner, runner_process

# sets the terminal's title, clears the screen, reverses the text that follows (and U+061C, the Arabic
# letter mark: a bidi control as U+200F is)
HOSTILE = "evil\x1b]0;PWNED\x07\x1b[2J\u202e\x9b\u061c"
SHOWN = "evil\\x1b]0;PWNED\\x07\\x1b[2J\\u202e\\x9b\\u061c"


def raw_controls(text: str) -> list[str]:
    """The characters of `text` a terminal would act on."""
    return [ch for ch in text if (ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0
            or ch in "\u061c\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"]


def test_trace_show_escapes_every_line_and_every_table(tmp_path: Path) -> None:
    events = [
        {"event": "run_start", "seq": 1, "run_id": HOSTILE, "machine": HOSTILE, "inputs": {HOSTILE: HOSTILE}},
        {"event": "state_enter", "seq": 2, "state": HOSTILE, "visit": 1},
        {"event": "llm_call", "seq": 3, "role": "agent", "state": HOSTILE, "agent": HOSTILE, "model": HOSTILE,
         "prompt_tokens": 1, "completion_tokens": 2},
        {"event": "llm_call", "seq": 4, "role": "designer", "state": HOSTILE, "model": "m"},
        {"event": "transition", "seq": 5, "from": HOSTILE, "to": HOSTILE, "cause": HOSTILE, "reason": HOSTILE},
        {"event": HOSTILE, "seq": 6, HOSTILE: HOSTILE},
        {"event": "run_end", "seq": 7, "status": "failed", "failure": {"kind": HOSTILE, "message": HOSTILE}},
    ]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(e) + "\n" for e in events) + HOSTILE + "\n", encoding="utf-8")
    done = cli("trace", "show", str(trace))
    assert done.returncode == 0, done.stderr
    assert raw_controls(done.stdout) == []
    tables = done.stdout.split("\n\n", 1)[1]
    for title in ("state", "agent", "designer stage"):
        block = tables.split(f"{title} ", 1)[1].split("\n\n", 1)[0]
        assert SHOWN in block, (title, block)


def test_a_runs_summary_and_its_errors_are_escaped(tmp_path: Path) -> None:
    folder = tmp_path / HOSTILE
    folder.mkdir()
    spec = folder / "m.fsm"
    spec.write_text(textwrap.dedent("""\
        machine m {
            type T {
                n: int
            }
            agent a {
                prompt "p"
            }
            start state s {
                agent a
                do "x"
                output T
                -> done
            }
            final state done
        }
    """), encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"s": [f"no json {HOSTILE}"] * 3}}), encoding="utf-8")
    db = tmp_path / "runs.db"
    done = cli("run", str(spec), "--script", str(script), "--checkpoint", str(db), "--run-id", HOSTILE, cwd=tmp_path)
    assert done.returncode == 1
    assert "run failed (output) at " in done.stderr and f"{SHOWN}/m.fsm:8:5" in done.stderr
    assert f"run {SHOWN} (checkpoints in" in done.stderr
    refused = cli("resume", HOSTILE, "--checkpoint", str(db), "--answer", "x", cwd=tmp_path)
    assert refused.returncode == 2 and SHOWN in refused.stderr
    missing = cli("resume", HOSTILE + "-not-there", "--checkpoint", str(db), cwd=tmp_path)
    assert missing.returncode == 2 and f"no run '{SHOWN}-not-there'" in missing.stderr
    for output in (done.stderr, refused.stderr, missing.stderr):
        assert raw_controls(output) == []


TESTED = textwrap.dedent("""\
    machine m {
        agent a {
            prompt "p"
        }
        start state s {
            agent a
            do "x"
            -> done
        }
        final state done
        test "NAME" {
            reply s "ok"
            expect path [s, s, done]
        }
    }
""").replace("NAME", "evil \\u001b]0;PWNED\\u0007\\u001b[2J \\u202e name")


def test_the_test_report_escapes_test_names(tmp_path: Path) -> None:
    spec = tmp_path / "m.fsm"
    spec.write_text(TESTED, encoding="utf-8")
    done = cli("test", str(spec))
    assert done.returncode == 1 and "FAIL  evil \\x1b]0;PWNED\\x07\\x1b[2J \\u202e name" in done.stdout
    runner = compile_runner(spec, tmp_path / "m_runner.py")
    ran = runner_process(sys.executable, runner, "--selftest", cwd=tmp_path)
    assert ran.returncode == 1 and "FAIL  evil \\x1b]0;PWNED" in ran.stdout
    for output in (done.stdout, done.stderr, ran.stdout, ran.stderr):
        assert raw_controls(output) == []


def test_the_comments_that_explain_imported_names_are_escaped(tmp_path: Path) -> None:
    source = {
        "agents": [{"agent_id": 1, "name": HOSTILE, "system_prompt": "You write.", "tools": []}],
        "states": {
            "states": [
                {"state_id": HOSTILE, "agent_id": 1, "instruction": "Write.", "is_initial": True, "is_final": False},
                {"state_id": "end", "agent_id": 1, "instruction": "Stop.", "is_initial": False, "is_final": True},
            ],
            "transitions": [{"from_state": HOSTILE, "to_state": "end", "condition": "If written"}],
        },
    }
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(source), encoding="utf-8")
    done = cli("import", "metaagent", str(path))
    assert done.returncode == 0, done.stderr
    assert f'# MetaAgent agent "{SHOWN}" (id 1)' in done.stdout
    assert raw_controls(done.stdout) == [] and raw_controls(done.stderr) == []
    written = tmp_path / "evil.fsm"
    written.write_text(done.stdout, encoding="utf-8")
    assert cli("check", str(written)).returncode == 0  # the escaped comment is still a comment


@pytest.fixture
def batch_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "m.fsm"
    spec.write_text("machine m {\n    input x: str\n    agent a {\n        prompt \"p\"\n    }\n    start state s {\n"
                    "        agent a\n        do \"{{ x }}\"\n        -> done\n    }\n    final state done\n}\n",
                    encoding="utf-8")
    return spec


def test_a_batchs_progress_and_summary_are_escaped(batch_spec: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"s": ["ok"]}}), encoding="utf-8")
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": HOSTILE, "inputs": {"x": HOSTILE}}) + "\n"
                     + json.dumps({"id": "two", "inputs": {"x": "y"}}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    # an earlier run of the batch left a line whose failure kind is hostile (the file is anyone's to edit)
    out.write_text(json.dumps({"id": "two", "line": 2, "status": "failed", "failure": {"kind": HOSTILE},
                               "latency_s": 0.1}) + "\n", encoding="utf-8")
    done = cli("batch", str(batch_spec), "--inputs", str(cases), "--script", str(script), "--out", str(out),
               "--resume", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f"case {SHOWN} (line 1): final done" in done.stderr
    assert f"failed    1 ({SHOWN} 1)" in done.stderr
    assert raw_controls(done.stderr) == [] and raw_controls(done.stdout) == []


def test_diagnostics_escape_the_source_line_and_what_their_messages_quote(tmp_path: Path) -> None:
    spec = tmp_path / "raw.fsm"
    spec.write_text(f'machine m {{\n    description "{HOSTILE} here" lost\n}}\n', encoding="utf-8")
    done = cli("check", str(spec))
    assert done.returncode == 1 and raw_controls(done.stdout + done.stderr) == []
    lines = (done.stdout + done.stderr).splitlines()
    shown = next(line for line in lines if line.startswith("2 | "))
    carets = lines[lines.index(shown) + 1]
    assert shown[carets.index("^"):].startswith("lost")  # each control character kept its column
    source = {"agents": [{"agent_id": 1, "name": "a", "system_prompt": "p", "tools": []}],
              "states": {"states": [{"state_id": "s", "agent_id": HOSTILE, "instruction": "x", "is_initial": True,
                                     "is_final": True}], "transitions": []}}
    imported = tmp_path / "evil.json"
    imported.write_text(json.dumps(source), encoding="utf-8")
    done = cli("import", "metaagent", str(imported))
    assert done.returncode == 1 and f"error[SW8006]: unknown agent id '{SHOWN}'" in done.stderr
    assert raw_controls(done.stdout + done.stderr) == []
