"""Files that use files, through the paths users take: `statewright check` of a folder or of files (each file
checked once, however many use it; one bad file hides no other), the diagnostics of `use` lines, `fmt`,
`graph` and `dump` of a project, and the Python API. (Checks of calls: tests/test_project_checks.py; code
generation: tests/test_project_codegen.py; the runtime: tests/test_calls.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from statewright import api, grammar
from statewright.cli import main
from statewright.compiler import pipeline

TEAM = """\
machine research {
    input topic: str
    returns Findings

    type Findings {
        summary: str
    }

    agent researcher {
        prompt "You research."
    }

    start state draft {
        agent researcher
        do "Research {{ topic }}."
        output Findings
        -> done
    }

    final state done

    test "drafts" {
        input { topic "x" }
        reply draft { summary "s" }
        expect final done
    }
}
"""


def caller(name: str, path: str = "team.fsm") -> str:
    return f"""\
use "{path}"

machine {name} {{
    input topic: str

    start state investigate {{
        run research(topic = topic)
        when output.ok -> done
        otherwise -> failed
    }}

    final state done
    final state failed
}}
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times the front door parsed each file (by its name): what "checked once" means."""
    counts: dict[str, int] = {}
    real = pipeline.parse_source

    def counting(source):  # type: ignore[no-untyped-def]
        counts[Path(source.path).name] = counts.get(Path(source.path).name, 0) + 1
        return real(source)

    monkeypatch.setattr(pipeline, "parse_source", counting)
    monkeypatch.setattr(grammar, "parse_source", counting)  # (the project parses a file on its way down)
    return counts


# ---- check: each file once --------------------------------------------------------------------------------


def test_check_of_a_folder_checks_each_file_once_however_many_use_it(
        tmp_path: Path, parses: dict[str, int], capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"team.fsm": TEAM, **{f"lead{i}.fsm": caller(f"lead{i}") for i in range(4)}})
    assert main(["check", str(tmp_path)]) == 0
    assert parses == {"team.fsm": 1, **{f"lead{i}.fsm": 1 for i in range(4)}}
    assert "ok: 5 files checked, no problems" in capsys.readouterr().err


def test_check_of_one_file_checks_and_reports_the_files_it_uses(
        tmp_path: Path, parses: dict[str, int], capsys: pytest.CaptureFixture[str]) -> None:
    broken = TEAM.replace("-> done\n", "-> dne\n")
    write(tmp_path, {"team.fsm": broken, "a.fsm": caller("a"), "b.fsm": caller("b")})
    assert main(["check", str(tmp_path / "a.fsm"), str(tmp_path / "b.fsm")]) == 1
    captured = capsys.readouterr()
    assert parses == {"team.fsm": 1, "a.fsm": 1, "b.fsm": 1}
    # the used file's own error, once, against it; each user one error at its `use` line
    assert captured.out.count("error[SW2002]: unknown state 'dne'") == 1
    assert captured.out.count("error[SW2102]") == 2
    assert "a.fsm:1:5" in captured.out and "b.fsm:1:5" in captured.out
    assert "fix the errors of " in captured.out
    assert "failed: 3 files checked, 3 errors" in captured.err


def test_check_json_is_one_document_naming_each_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"team.fsm": TEAM.replace("-> done\n", "-> dne\n"), "a.fsm": caller("a")})
    assert main(["check", "--format", "json", str(tmp_path / "a.fsm")]) == 1
    doc = json.loads(capsys.readouterr().out)
    by_file = {(Path(d["file"]).name, d["code"]) for d in doc["diagnostics"] if d["severity"] == "error"}
    assert by_file == {("a.fsm", "SW2102"), ("team.fsm", "SW2002")}
    assert doc["error_count"] == 2


def test_one_bad_file_hides_no_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"team.fsm": TEAM, "a.fsm": caller("a", "missing.fsm"), "b.fsm": caller("b").replace(
        "topic = topic", "topic = 3"), "c.fsm": "machine c {\n", "d.fsm": caller("d")})
    (tmp_path / "e.fsm").write_bytes(b"machine e { \xff }")
    assert main(["check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    for file, code in (("a.fsm", "SW2100"), ("b.fsm", "SW4102"), ("c.fsm", "SW1003"), ("e.fsm", "SW1005")):
        assert f"{code}" in out and file in out, (file, code)
    assert "d.fsm:" not in out  # it checks


def test_a_file_used_under_two_spellings_is_one_file(tmp_path: Path, parses: dict[str, int]) -> None:
    write(tmp_path, {"lib/team.fsm": TEAM, "sub/a.fsm": caller("a", "../lib/team.fsm"),
                     "b.fsm": caller("b", "./sub/../lib/team.fsm")})
    found = api.check_files([str(tmp_path / "sub" / "a.fsm"), str(tmp_path / "b.fsm")])
    assert [c.ok for c in found] == [True, True, True]
    assert parses["team.fsm"] == 1
    a, b = found[0], found[1]
    assert a.uses[0].compilation is b.uses[0].compilation


def test_use_paths_are_relative_to_the_using_file_not_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"project/teams/team.fsm": TEAM, "project/flows/lead.fsm": caller("lead", "../teams/team.fsm")})
    monkeypatch.chdir(tmp_path)
    assert main(["check", "project/flows/lead.fsm"]) == 0
    monkeypatch.chdir(tmp_path / "project" / "teams")
    assert main(["check", "../flows/lead.fsm"]) == 0
    capsys.readouterr()


# ---- the diagnostics of `use` lines -----------------------------------------------------------------------


def test_a_missing_file_is_positioned_at_its_string_with_the_files_that_are_there(tmp_path: Path) -> None:
    write(tmp_path, {"team.fsm": TEAM, "a.fsm": caller("a", "taem.fsm")})
    comp = api.check_path(tmp_path / "a.fsm")
    [d] = [d for d in comp.diagnostics if d.code == "SW2100"]
    assert d.span is not None and d.span.text == '"taem.fsm"' and d.span.start_pos.line == 1
    assert d.help == "did you mean 'team.fsm'?"
    assert [x.code for x in comp.diagnostics] == ["SW2100"]  # no cascade: `run research` is not unknown too


def test_a_cycle_of_files_is_reported_in_every_file_on_it_naming_the_chain(tmp_path: Path) -> None:
    write(tmp_path, {
        "a.fsm": 'use "b.fsm" { B }\nmachine a {\n    type A { x: int }\n    start state s { -> done }\n'
                 "    final state done\n}\n",
        "b.fsm": 'use "c.fsm" { C }\nmachine b {\n    type B { x: int }\n    start state s { -> done }\n'
                 "    final state done\n}\n",
        "c.fsm": 'use "a.fsm" { A }\nmachine c {\n    type C { x: int }\n    start state s { -> done }\n'
                 "    final state done\n}\n",
    })
    found = {Path(c.source.path).name: c for c in api.check_files([str(tmp_path / "a.fsm")]) if c.source}
    messages = {name: [d.message for d in c.diagnostics if d.code == "SW2103"] for name, c in found.items()}
    assert sorted(messages) == ["a.fsm", "b.fsm", "c.fsm"]
    for name, (message,) in messages.items():  # each file's message starts and ends at that file
        assert message.startswith("files that use each other: ")
        chain = [Path(part).stem for part in message.split(": ", 1)[1].split(" -> ")]
        assert chain[0] == chain[-1] == name[0] and sorted(chain[:-1]) == ["a", "b", "c"]
    assert all(d.code != "SW2102" for c in found.values() for d in c.diagnostics)


def test_a_machine_that_runs_itself_is_named_as_machines(tmp_path: Path) -> None:
    write(tmp_path, {"self.fsm": 'use "self.fsm"\nmachine me {\n    start state s {\n        run me()\n'
                                  "        -> done\n    }\n    final state done\n}\n"})
    [d] = api.check_path(tmp_path / "self.fsm").diagnostics
    assert (d.code, d.message) == ("SW3100", "machine 'me' runs itself: me -> me")


def test_files_that_cannot_be_read_are_reported_at_the_use_and_against_themselves(tmp_path: Path) -> None:
    write(tmp_path, {"a.fsm": caller("a", "folder"), "b.fsm": caller("b", "latin1.fsm")})
    (tmp_path / "folder").mkdir()
    (tmp_path / "latin1.fsm").write_bytes('machine caf\xe9 {}'.encode("latin-1"))
    found = api.check_files([str(tmp_path / "a.fsm"), str(tmp_path / "b.fsm")])
    codes = {Path(c.diagnostics[0].path).name: [d.code for d in c.diagnostics] for c in found}
    assert codes == {"a.fsm": ["SW2101"], "b.fsm": ["SW2102"], "latin1.fsm": ["SW1005"]}
    assert "it is a folder" in found[0].diagnostics[0].message


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs and /dev/zero")
def test_a_use_of_a_fifo_a_device_a_nul_or_a_huge_file_is_reported_without_waiting_or_reading_it_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a FIFO held up the check for ever (waiting for a writer), /dev/zero ran it out of memory (SW9001,
    # and a language server was killed), a NUL in the path was an internal ValueError (SW9001)
    write(tmp_path, {"a.fsm": caller("a", "pipe.fsm"), "b.fsm": caller("b", "zero.fsm"),
                     "c.fsm": caller("c", "nul\\u0000.fsm"), "d.fsm": caller("d", "huge.fsm")})
    os.mkfifo(tmp_path / "pipe.fsm")
    (tmp_path / "zero.fsm").symlink_to("/dev/zero")
    with open(tmp_path / "huge.fsm", "wb") as f:  # sparse: 4 GiB on paper, nothing on the disk
        f.truncate(4 << 30)
    found = {Path(c.diagnostics[0].path).name: c.diagnostics for c in api.check_files(
        [str(tmp_path / f"{name}.fsm") for name in "abcd"])}
    [fifo], [device], [nul] = found["a.fsm"], found["b.fsm"], found["c.fsm"]
    assert fifo.code == "SW2101"
    assert fifo.message == "cannot read 'pipe.fsm': it is a FIFO (named pipe), not a regular file"
    assert (device.code, device.message) == ("SW2101", "cannot read 'zero.fsm': it is a device, not a regular file")
    assert nul.code == "SW2101" and "cannot hold the character NUL" in nul.message and nul.help == "name a .fsm file"
    assert [d.code for d in found["d.fsm"]] == ["SW2102"]
    assert [d.code for d in found["huge.fsm"]] == ["SW1021"]
    assert main(["check", str(tmp_path / "c.fsm")]) == 1
    assert "internal" not in capsys.readouterr().out


def test_a_hostile_path_cannot_reach_the_terminal_raw(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"a.fsm": caller("a", "\\u001b[31mred\\u0007.fsm")})
    assert main(["check", str(tmp_path / "a.fsm")]) == 1
    out = capsys.readouterr().out
    assert "SW2100" in out and "\x1b[31m" not in out and "\x07" not in out


# ---- fmt, graph and dump ------------------------------------------------------------------------------------


def test_fmt_formats_every_file_of_a_project_keeping_use_lines_and_their_comments(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messy = ('# the lead\nuse   "team.fsm"   as  team   # its team\nuse "team.fsm" {Findings,researcher}\n'
             "machine lead {\n  input topic: str\n  returns  Findings\n  start state s { run team(topic=topic) "
             "-> done }\n  final state done\n}\n")
    write(tmp_path, {"team.fsm": TEAM, "lead.fsm": messy})
    assert main(["fmt", str(tmp_path)]) == 0
    text = (tmp_path / "lead.fsm").read_text(encoding="utf-8")
    assert text.startswith('# the lead\nuse "team.fsm" as team  # its team\nuse "team.fsm" { Findings, '
                           'researcher }\n\nmachine lead {\n    input topic: str\n    returns Findings\n')
    assert "        run team(topic = topic)\n" in text
    assert main(["fmt", "--check", str(tmp_path)]) == 0
    capsys.readouterr()


def test_graph_of_a_project_says_which_machine_each_call_runs(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"team.fsm": TEAM, "lead.fsm": caller("lead").replace('use "team.fsm"',
                                                                          'use "team.fsm" as team')
                     .replace("run research(", "run team(")})
    assert main(["graph", str(tmp_path / "lead.fsm")]) == 0
    assert "investigate<br>runs team (machine research)" in capsys.readouterr().out


def test_dump_of_a_project_holds_the_machines_it_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"team.fsm": TEAM, "lead.fsm": caller("lead")})
    assert main(["dump", str(tmp_path / "lead.fsm")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ir_version"] == 3
    [state] = [s for s in data["states"] if s["name"] == "investigate"]
    assert state["kind"] == "call" and state["run"]["machine"] == "research"
    assert [a["name"] for a in state["run"]["args"]] == ["topic"]
    assert data["machines"] == [{"name": "research", "called": 0}]
    [called] = data["called"]
    assert called["name"] == "research" and called["returns"] == {"kind": "named", "name": "Findings"}
    assert [s["name"] for s in called["states"]] == ["draft", "done"] and called["machines"] == []
    assert main(["dump", "--stage", "ast", str(tmp_path / "lead.fsm")]) == 0
    ast_json = json.loads(capsys.readouterr().out)
    assert ast_json["uses"][0]["path"]["value"] == "team.fsm"


def test_dump_of_a_file_whose_used_file_has_errors_prints_both(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"team.fsm": TEAM.replace("-> done\n", "-> dne\n"), "lead.fsm": caller("lead")})
    assert main(["dump", str(tmp_path / "lead.fsm")]) == 1
    err = capsys.readouterr().err
    assert "SW2102" in err and "SW2002" in err


# ---- the Python API ----------------------------------------------------------------------------------------


def test_load_runs_a_machine_that_runs_another(tmp_path: Path) -> None:
    write(tmp_path, {"team.fsm": TEAM, "lead.fsm": caller("lead")})
    machine = api.load(tmp_path / "lead.fsm")
    assert set(machine.spec.machines) == {"research"}
    assert machine.spec.machines["research"].result_type is not None
    outcomes = machine.test()
    assert outcomes == []  # lead has no tests; its team's are its own
    assert [o.passed for o in api.load(tmp_path / "team.fsm").test()] == [True]
    result = machine.run({"topic": "x"}, script={"agent": {"investigate/draft": [{"summary": "s"}]}})
    assert result.final_state == "done", result.failure
    assert result.outputs["investigate"].result.summary == "s"


def test_check_text_reads_the_files_it_uses_from_its_location(tmp_path: Path) -> None:
    write(tmp_path, {"lib/team.fsm": TEAM})
    text = caller("lead", "lib/team.fsm")
    assert not api.check_text(text, "elsewhere/lead.fsm").ok
    assert api.check_text(text, "lead.fsm", location=str(tmp_path / "lead.fsm")).ok
    assert api.check_text(text, str(tmp_path / "lead.fsm")).ok


def test_a_file_outside_the_project_is_read_by_an_absolute_path(tmp_path: Path) -> None:
    write(tmp_path, {"shared/team.fsm": TEAM})
    lead = write(tmp_path / "elsewhere", {"lead.fsm": caller("lead", str(tmp_path / "shared" / "team.fsm"))})
    assert api.check_path(lead / "lead.fsm").ok
    assert os.path.isabs(str(tmp_path))


@pytest.mark.slow
def test_a_chain_of_files_longer_than_pythons_recursion_limit_is_checked_compiled_and_dumped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Files that use files are compiled with a stack of the project's own, callees first."""
    import sys

    n = sys.getrecursionlimit() + 100
    for i in range(n):
        use, work = (f'use "c{i + 1}.fsm"\n', f"run c{i + 1}()") if i + 1 < n else ("", 'agent w do "x"')
        agent = "" if i + 1 < n else '    agent w { prompt "p" }\n'
        (tmp_path / f"c{i}.fsm").write_text(f"{use}machine c{i} {{\n{agent}    start state s {{ {work} -> done }}\n"
                                            "    final state done\n}\n", encoding="utf-8")
    assert main(["check", str(tmp_path / "c0.fsm")]) == 0
    assert f"ok: {n} files checked" in capsys.readouterr().err
    assert main(["dump", str(tmp_path / "c0.fsm")]) == 0
    assert len(json.loads(capsys.readouterr().out)["called"]) == n - 1
    assert main(["compile", str(tmp_path / "c0.fsm"), "-o", str(tmp_path / "runner.py")]) == 0
    assert (tmp_path / "runner.py").read_text(encoding="utf-8").count("= MachineSpec(") == n


def test_test_of_a_folder_checks_and_reports_each_file_once(tmp_path: Path, parses: dict[str, int],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    broken = TEAM.replace("-> done\n", "-> dne\n")
    write(tmp_path, {"team.fsm": broken, "a.fsm": caller("a"), "b.fsm": caller("b")})
    assert main(["test", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("error[SW2002]") == 1 and err.count("error[SW2102]") == 2
    assert parses == {"team.fsm": 1, "a.fsm": 1, "b.fsm": 1}
    assert "3 files did not check" in err


RECORDS_TEAM = """\
machine review {
    input draft: Draft
    input earlier: list[Draft] = []
    returns Draft

    type Draft {
        title: str
        notes: list[str]
    }

    agent editor {
        prompt "You edit."
    }

    start state edit {
        agent editor
        do "Edit {{ draft.title }} ({{ earlier | length }} earlier drafts)."
        output Draft
        -> done
    }

    final state done
}
"""

RECORDS_LEAD = """\
use "review.fsm" { Draft }

machine lead {
    agent writer {
        prompt "You write."
    }

    start state write {
        agent writer
        do "Write."
        output Draft
        -> first
    }

    state first {
        run review(draft = write.output, earlier = [write.output])
        when output.ok and output.result != none -> second
        otherwise -> failed
    }

    state second {
        run review(draft = first.output.result or write.output, earlier = [write.output, first.output.result or write.output])
        when output.ok -> done
        otherwise -> failed
    }

    final state done
    final state failed

    test "a record goes to a called machine, and its result to the next call" {
        reply write { title "t", notes ["a"] }
        reply first/edit { title "t2", notes ["a", "b"] }
        reply second/edit { title "t3", notes [] }
        expect path [write, first, second, done]
        expect output second {
            ok true
            final "done"
        }
    }
}
"""


def test_records_reach_a_called_machine_as_values_of_its_own_type_on_every_local_face(tmp_path: Path) -> None:
    """A caller's record (its output, a list of them, another call's result) given to a called machine's
    input of that type: the type is one declaration, and the called machine checks the value against its
    own class for it as it checks any input."""
    import sys

    from support.e2e_runs import cli, compile_runner, runner_process

    write(tmp_path, {"review.fsm": RECORDS_TEAM, "lead.fsm": RECORDS_LEAD})
    done = cli("test", str(tmp_path / "lead.fsm"))
    assert done.returncode == 0, done.stdout + done.stderr
    runner = compile_runner(tmp_path / "lead.fsm", tmp_path / "lead_runner.py")
    ran = runner_process(sys.executable, runner, "--selftest")
    assert ran.returncode == 0 and "PASS  a record goes to a called machine" in ran.stdout, ran.stdout + ran.stderr
    machine = api.load(tmp_path / "lead.fsm")
    script = {"agent": {"write": [{"title": "t", "notes": []}], "first/edit": [{"title": "t2", "notes": []}],
                        "second/edit": [{"title": "t3", "notes": ["c"]}]}}
    trace = tmp_path / "trace.jsonl"
    result = machine.run({}, script=script, trace=str(trace), trace_content=True)
    assert result.final_state == "done", result.failure
    assert result.outputs["second"].result.notes == ["c"]
    asked = [e["messages"][-1]["content"] for e in map(json.loads, trace.read_text().splitlines())
             if e["event"] == "llm_call" and e.get("call") == "second"]
    assert asked == ["Edit t2 (2 earlier drafts)."]
