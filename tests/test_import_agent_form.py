"""`statewright import autoagent` of an agent form: a machine that runs one machine per agent it hands to,
through the paths users take (the command line, the Python API, then `check` and `test` on what was written).

The golden cases under tests/cases/import/autoagent-agent-form-* hold the imports themselves and the
diagnostics on malformed forms; here: the files land where the `use` lines say and nowhere else, nothing is
written over a file in the way, standard output refuses several files, the output is byte-identical across
runs and hash seeds, and any form of hand-offs without a cycle, with any names, imports into a project that
checks and whose tests pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statewright import api
from statewright.cli import main
from statewright.importers import ImportOutcome

CASES = Path(__file__).parent / "cases" / "import"
RESEARCH = CASES / "autoagent-agent-form-orchestrator" / "research_report.xml"
NESTED = CASES / "autoagent-agent-form-nested-hand-offs" / "support_desk.xml"
HOSTILE = CASES / "autoagent-agent-form-hostile-names" / "hostile.xml"
SINGLE = CASES / "autoagent-agent-form-single-agent" / "proofread.xml"


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under `root`, by its path from there."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---- the command line --------------------------------------------------------------------------------


def test_the_command_writes_a_project_that_checks_and_whose_tests_pass(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "research.fsm"
    assert main(["import", "autoagent", str(RESEARCH), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"`statewright check` on {out} and the 3 machines it runs: no problems" in err
    assert sorted(_tree(tmp_path)) == ["research.fsm", "research/fact_checker.fsm", "research/report_writer.fsm",
                                       "research/web_researcher.fsm"]
    entry = out.read_text(encoding="utf-8")
    assert 'use "research/web_researcher.fsm"' in entry and "run report_writer(findings = " in entry
    assert main(["check", str(tmp_path)]) == 0
    assert main(["test", str(tmp_path)]) == 0
    tested = capsys.readouterr()
    assert sorted(line for line in tested.out.splitlines() if line.startswith("PASS")) == [
        f"PASS  hands the request to {name} and answers" for name in ("fact_checker", "report_writer",
                                                                     "web_researcher")] + [
        f"PASS  the shortest path reaches {final}" for final in ("findings", "problems", "report")]
    assert "6 passed, 0 failed" in tested.err


def test_machines_that_hand_on_again_are_machines_that_run_machines(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "desk.fsm"
    assert main(["import", "autoagent", str(NESTED), "-o", str(out)]) == 0
    tech = (tmp_path / "desk" / "tech_lead.fsm").read_text(encoding="utf-8")
    assert 'use "network_engineer.fsm"' in tech and "run network_engineer(symptoms = " in tech
    assert main(["test", str(tmp_path)]) == 0
    assert "FAIL" not in capsys.readouterr().out


def test_standard_output_holds_one_file_and_the_command_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (["import", "autoagent", str(RESEARCH)], ["import", "autoagent", str(RESEARCH), "-o", "-"]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "imports as 4 files" in captured.err and "give -o OUT.fsm" in captured.err
    assert list(tmp_path.iterdir()) == []
    assert main(["import", "autoagent", str(SINGLE), "-o", "-"]) == 0  # one agent: one machine, no calls
    out = capsys.readouterr().out
    assert out.startswith("# Imported from the AutoAgent file proofread.xml") and "use " not in out


def test_a_file_in_the_way_is_refused_before_anything_is_written(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "research.fsm"
    (tmp_path / "research").mkdir()
    mine = tmp_path / "research" / "report_writer.fsm"
    mine.write_text("machine report_writer {}\n", encoding="utf-8")
    outside = tmp_path / "elsewhere.fsm"
    outside.write_text("# Imported from the AutoAgent file x.xml, and hand-edited since\n", encoding="utf-8")
    os.symlink(outside, tmp_path / "research" / "fact_checker.fsm")
    before = _tree(tmp_path)
    assert main(["import", "autoagent", str(RESEARCH), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{mine} was not written by `statewright import`" in err
    assert "fact_checker.fsm is a symbolic link" in err
    assert _tree(tmp_path) == before and not out.exists()


def test_a_file_where_the_folder_goes_and_an_output_that_is_not_the_imports_are_in_the_way(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "research").write_text("notes\n", encoding="utf-8")
    assert main(["import", "autoagent", str(RESEARCH), "-o", str(tmp_path / "research.fsm")]) == 1
    assert "research is a file, where the folder of the machines it runs goes" in capsys.readouterr().err
    hand_written = tmp_path / "proofread.fsm"
    hand_written.write_text("machine proofread {}\n", encoding="utf-8")
    assert main(["import", "autoagent", str(SINGLE), "-o", str(hand_written)]) == 1  # one file: the same rule
    assert "was not written by `statewright import`" in capsys.readouterr().err
    assert hand_written.read_text(encoding="utf-8") == "machine proofread {}\n"


def test_an_import_writes_again_over_its_own_files(tmp_path: Path) -> None:
    out = tmp_path / "research.fsm"
    assert main(["import", "autoagent", str(RESEARCH), "-o", str(out)]) == 0
    first = _tree(tmp_path)
    assert main(["import", "autoagent", str(RESEARCH), "-o", str(out)]) == 0
    assert _tree(tmp_path) == first


def test_the_import_is_byte_identical_across_runs_and_hash_seeds(tmp_path: Path) -> None:
    trees = []
    for seed in ("0", "1", "12345"):
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        for source in (RESEARCH, NESTED, HOSTILE):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            code = ("import sys; from statewright.cli import main; "
                    f"raise SystemExit(main(['import', 'autoagent', {str(source)!r}, '-o', 'out_' + "
                    f"{source.stem!r} + '.fsm']))")
            done = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True,
                                  text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr
        trees.append(_tree(folder))
    assert trees[0] == trees[1] == trees[2] and len(trees[0]) > 10


def test_malformed_forms_are_positioned_errors_and_nothing_is_written(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for case, code, where in [("hand-off-cycle", "SW8040", "planning.xml:29:25"),
                              ("unknown-hand-off", "SW8041", "newsletter.xml:9:25"),
                              ("without-instructions", "SW8042", "triage.xml:4:5")]:
        (source,) = (CASES / f"autoagent-agent-form-{case}").glob("*.xml")
        out = tmp_path / "out.fsm"
        assert main(["import", "autoagent", str(source), "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert f"error[{code}]" in err and f"--> {source.parent / where}" in err, err
        assert "Traceback" not in err and list(tmp_path.iterdir()) == []
        assert main(["explain", code]) == 0
        assert "agent form" in capsys.readouterr().out


# ---- names from the input never reach outside the folder ------------------------------------------------


def test_hostile_names_stay_inside_the_folder_and_the_project_checks(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    assert main(["import", "autoagent", str(HOSTILE), "-o", str(work / "h.fsm")]) == 0
    err = capsys.readouterr().err
    assert "agent 'Line\\u2028}\\x9b31m\\x85Next'" in err and not any(c in err for c in "\u2028\x85\x9b")
    assert sorted(_tree(tmp_path)) == ["a/b/h.fsm", "a/b/h/a_b.fsm", "a/b/h/etc_passwd.fsm", "a/b/h/etc_x.fsm",
                                       "a/b/h/line_31m_next.fsm", "a/b/h/machine.fsm", "a/b/h/win.fsm"]
    for text in _tree(tmp_path).values():  # line and paragraph separators, C1 controls: escaped in comments too
        assert not any(c in text.decode("utf-8") for c in "\u2028\u2029\x85\x9b\r")
    assert main(["check", str(work)]) == 0
    assert main(["test", str(work)]) == 0
    assert "FAIL" not in capsys.readouterr().out


def test_an_output_name_that_would_make_a_folder_outside_or_onto_itself_does_not(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    for name, folder in [("...fsm", "imported"), ("noext", "noext_machines"), (".fsm", "imported"),
                         ('we"ird {{x}}.fsm', 'we"ird {{x}}')]:
        outcome = api.import_file("autoagent", RESEARCH, output=str(work / name))
        written = api.write_import(outcome, str(work / name))
        assert written[0] == str(work / name)
        assert all(Path(p).parent == work / folder for p in written[1:]), written
        assert [c.ok for c in api.check_files([str(work / name)])] == [True] * 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]


@pytest.mark.parametrize("path", ["../x.fsm", "research/../../x.fsm", "/tmp/x.fsm", "research/x.txt",
                                  "research/sub/x.fsm", "research/..", "..\\x.fsm", "research/.fsm/x"])
def test_write_import_refuses_any_file_but_folder_slash_name(tmp_path: Path, path: str) -> None:
    outcome = ImportOutcome("# Imported from the test\nmachine m {}\n", files=[(path, "machine x {}\n")])
    with pytest.raises(ValueError, match="FOLDER/NAME.fsm"):
        api.write_import(outcome, str(tmp_path / "research.fsm"))
    assert list(tmp_path.iterdir()) == []


# ---- the Python API --------------------------------------------------------------------------------------


def test_the_python_api_imports_writes_and_loads_the_project(tmp_path: Path) -> None:
    outcome = api.import_file("autoagent", NESTED, output=str(tmp_path / "desk.fsm"))
    assert outcome.ok and [path for path, _ in outcome.files] == [
        "desk/billing.fsm", "desk/tech_lead.fsm", "desk/network_engineer.fsm"]
    written = api.write_import(outcome, tmp_path / "desk.fsm")
    assert written == [str(tmp_path / p) for p in ("desk.fsm", "desk/billing.fsm", "desk/tech_lead.fsm",
                                                   "desk/network_engineer.fsm")]
    machine = api.load(tmp_path / "desk.fsm")
    results = api.run_tests(machine.compilation)
    assert [r.name for r in results] == ["hands the request to billing and answers",
                                        "hands the request to tech_lead and answers"]
    assert all(r.passed for r in results)
    with pytest.raises(api.ImportOverwriteError) as refused:
        (tmp_path / "desk" / "billing.fsm").write_text("machine billing {}\n", encoding="utf-8")
        api.write_import(outcome, tmp_path / "desk.fsm")
    assert refused.value.problems == [f"{tmp_path / 'desk' / 'billing.fsm'} was not written by `statewright import`"]
    assert isinstance(refused.value, FileExistsError)


def test_without_an_output_the_folder_is_named_after_the_input() -> None:
    outcome = api.import_bytes("autoagent", RESEARCH.read_bytes(), "forms/research_report.xml")
    assert outcome.text is not None and 'use "research_report/web_researcher.fsm"' in outcome.text
    assert outcome.files[0][0] == "research_report/web_researcher.fsm"


def test_metaagent_has_no_nesting_and_imports_as_one_file() -> None:
    linear = CASES / "metaagent-linear-chain" / "question_answering.json"
    outcome = api.import_file("metaagent", linear, output="question_answering.fsm")
    assert outcome.files == [] and outcome.text is not None
    assert not re.search(r"^use |^\s+run \w+\(", outcome.text, re.MULTILINE)


# ---- any form of hand-offs -------------------------------------------------------------------------------

_NAMES = st.sampled_from(["Writer", "Critic", "../../etc/x", "..", "A \"quoted\" {name}", "test", "machine",
                          "C:\\tmp\\y", "Rédacteur", "{{ x }}", "a/b", "Writer 2"])
_TEXT = st.sampled_from(["You work.", "Use {tone}.", "Braces {{ literal }}.", "{% raw %} \"\"\" }", "Line\none",
                         "{unknown_var} and {tone}"])


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", "&#10;")


@st.composite
def agent_forms(draw: st.DrawFn) -> bytes:
    """An agent form whose agents hand only to agents after them in the file (so no cycle), any names."""
    names = draw(st.lists(_NAMES, min_size=1, max_size=5, unique_by=lambda n: n.lower().replace(" ", "_")))
    keys = [n.lower().replace(" ", "_") for n in names]
    parts = ["<agents><system_input>The request.</system_input>",
             "<system_output><key>answer</key><description>The answer.</description></system_output>",
             ("<global_variables><variable><key>tone</key><description>d</description><value>dry {x}</value>"
              "</variable></global_variables>")]
    for i, name in enumerate(names):
        later = keys[i + 1:]
        targets = draw(st.lists(st.sampled_from(later), unique=True, max_size=3)) if later else []
        tools = "".join(f"<tool><name>transfer_to_{_xml(t)}</name><description>d</description></tool>"
                        for t in targets)
        output_key = "answer" if len(names) == 1 else draw(st.sampled_from(["answer", "out", "in", "result"]))
        parts.append(f"<agent><name>{_xml(name)}</name><description>{_xml(draw(_TEXT))}</description>"
                     f"<instructions>{_xml(draw(_TEXT))}</instructions><tools category=\"existing\">{tools}</tools>"
                     f"<agent_input><key>{draw(st.sampled_from(['request', 'in', 'x y', 'tone']))}</key>"
                     f"<description>d</description></agent_input><agent_output><key>{output_key}</key>"
                     "<description>d</description></agent_output></agent>")
    parts.append("</agents>")
    return "".join(parts).encode()


def _imports_into_a_project_that_tests(data: bytes, folder: Path) -> None:
    outcome = api.import_bytes("autoagent", data, "form.xml", output=str(folder / "form.fsm"))
    assert outcome.text is not None, [d.message for d in outcome.diagnostics]
    written = api.write_import(outcome, folder / "form.fsm")
    assert all(Path(p).resolve().is_relative_to(folder.resolve()) for p in written)
    compilations = api.check_files(written)
    assert [(d.code, d.message) for c in compilations for d in c.diagnostics if d.severity.value == "error"] == []
    for compilation in compilations:
        assert [(r.name, r.messages) for r in api.run_tests(compilation) if not r.passed] == []


@settings(max_examples=20, deadline=None)
@given(agent_forms())
def test_any_agent_form_without_a_cycle_imports_into_a_project_that_checks_and_tests(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        _imports_into_a_project_that_tests(data, Path(folder))
