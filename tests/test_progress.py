"""Progress as it happens: `run`, `design` and `optimize` show each step on stderr — in colour on a
terminal, plain when piped or with NO_COLOR, never raw control characters from a model."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from support.e2e_runs import ROOT, cli

from statewright.runtime.progress import Progress, printable, wants_color

EVALUATOR = ROOT / "examples" / "evaluator_optimizer.fsm"
HOSTILE = "\x1b[2J\x1b]0;owned\x07\rall tests passed\u202e"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def script_file(tmp_path: Path, reason: str = "fine") -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({
        "agent": {"outline": ["1. Intro (25 min)"],
                  "evaluate": [{"decision": "accept", "strengths": ["short"], "problems": []}]},
        "verifier": {"outline": [{"choice": "every section has a length in minutes", "reason": reason,
                                  "feedback": ""}]},
    }), encoding="utf-8")
    return path


def test_statewright_run_shows_states_calls_and_transitions_as_they_happen(tmp_path: Path) -> None:
    done = cli("run", str(EVALUATOR), "--input", "subject=FSMs", "--script", str(script_file(tmp_path)),
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert err.index("outline\n") < err.index("calling agent optimizer") < err.index("-> evaluate (verifier: fine)")
    assert err.rstrip().endswith("final state accepted (3 states, 395 tokens, $0.0000)")
    assert "\x1b" not in err  # piped: no escape codes
    assert json.loads(done.stdout)["status"] == "final"  # stdout still holds only the result


def test_quiet_prints_no_progress(tmp_path: Path) -> None:
    done = cli("run", str(EVALUATOR), "--input", "subject=FSMs", "--script", str(script_file(tmp_path)),
               "--quiet", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stderr == ""  # nothing but the result
    assert json.loads(done.stdout)["final_state"] == "accepted"


def test_colour_on_a_terminal_and_none_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    terminal = Terminal()
    assert wants_color(terminal) and not wants_color(io.StringIO())
    Progress(terminal)("state_enter", {"state": "draft", "visit": 1})
    assert "\x1b[" in terminal.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    Progress(plain)("state_enter", {"state": "draft", "visit": 1})
    assert plain.getvalue() == "draft\n"


def test_model_text_cannot_move_the_cursor_clear_the_screen_or_retitle_the_window(tmp_path: Path) -> None:
    terminal = Terminal()
    progress = Progress(terminal, color=True)
    progress("transition", {"from": "a", "to": "b", "cause": "verifier", "reason": HOSTILE})
    progress("llm_error", {"error": HOSTILE})
    progress("run_end", {"status": "failed", "failure": {"kind": "model", "message": HOSTILE}})
    shown = terminal.getvalue()
    # the only escape sequences are progress's own colours: ESC followed by `[<digits>m`
    assert shown.replace("\x1b[0m", "").count("\x1b") == shown.count("\x1b[") - shown.count("\x1b[0m")
    for raw in ("\x1b[2J", "\x1b]0;", "\x07", "\r", "\u202e"):
        assert raw not in shown
    assert "\\x1b[2J" in shown and "\\u202e" in shown
    done = cli("run", str(EVALUATOR), "--input", "subject=FSMs", "--script", str(script_file(tmp_path, HOSTILE)),
               cwd=tmp_path, env={"FORCE_COLOR": "1"})
    assert done.returncode == 0
    assert "\x1b[2J" not in done.stderr and "\\x1b[2J" in done.stderr


def test_printable_escapes_controls_and_lone_surrogates_and_keeps_text() -> None:
    assert printable("état ✓\tok\nnext") == "état ✓\tok\nnext"
    assert printable("\x00\x1b\x7f\x9b") == "\\x00\\x1b\\x7f\\x9b"
    assert printable("\ud83d") == "\\ud83d"
    assert printable("x" * 10, limit=5) == "xxxx…"


def test_design_shows_its_attempts_as_they_happen(tmp_path: Path) -> None:
    from test_designer import AGENTS, GOOD, TASK, THREE_ERRORS, fenced

    script = tmp_path / "designer.json"
    script.write_text(json.dumps({"designer": {"agents": [AGENTS], "machine": [fenced(THREE_ERRORS)],
                                               "repair": [fenced(GOOD)]}}), encoding="utf-8")
    out = tmp_path / "support.fsm"
    done = cli("design", TASK, "-o", str(out), "--script", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert err.index("calling designer (agents)") < err.index("attempt 1: 3 errors (SW2002, SW3008, SW4001)") < err.index(
        "attempt 2: 3 errors -> 0 errors (fixed SW2002, SW3008, SW4001): the machine checks") < err.index(f"wrote {out}")
    assert err.count("attempt 1:") == 1  # shown once, as it happened
    assert "\x1b" not in err
    quiet = cli("design", TASK, "-o", str(tmp_path / "again.fsm"), "--script", str(script), "--quiet",
                cwd=tmp_path)
    assert quiet.returncode == 0 and "calling designer" not in quiet.stderr
    assert "attempt 1: 3 errors (" in quiet.stderr  # the log, once at the end
