"""`statewright import`: golden cases, the invariants every import keeps, and the command line.

Each case under tests/cases/import/<case>/ holds one `*.json` (MetaAgent) or `*.xml` (AutoAgent) file, or
a CrewAI project (`crewai-*` cases: crew.py and config/agents.yaml, config/tasks.yaml, as CrewAI lays them
out), an optional `args` file with the options it is imported with (`--repair`, `--bound N`), and beside them:

- `expected-import.txt`: the diagnostics on the input (errors and lint notes) and the summary line;
- `expected.fsm`: the imported file (absent when the input has errors);
- `expected-check.txt`: what `statewright check` reports on `expected.fsm`, named as the input with `.fsm`;
- `expected/NAME.fsm`: the machines an AutoAgent agent form's machine runs (imported as `-o expected.fsm`,
  so they lie where its `use` lines find them, and `expected-check.txt` is the check of that project).

UPDATE_EXPECT=1 rewrites the expectations; review the diff.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from statewright import api
from statewright.cli import build_parser, main
from statewright.diagnostics import CODES, SourceFile, render_summary, render_text
from statewright.importers import ImportOutcome
from statewright.importers.emit import fsm_string, literal_template
from statewright.importers.json_source import parse_json
from statewright.importers.metaagent import strip_routing
from statewright.importers.names import Namespace, identifier
from statewright.importers.xml_source import parse_xml

CASES = Path(__file__).parent / "cases" / "import"
UPDATE = os.environ.get("UPDATE_EXPECT") == "1"
FORMAT_OF = {".json": "metaagent", ".xml": "autoagent"}


def _case_dirs() -> list[Path]:
    return sorted({p.parent for p in [*CASES.glob("*/*.json"), *CASES.glob("*/*.xml")]} |
                  {p for p in CASES.glob("crewai-*") if p.is_dir()})


def _input(case: Path) -> Path:
    if case.name.startswith("crewai-"):
        return case  # a CrewAI project is its folder
    (found,) = [p for p in case.iterdir() if p.suffix in FORMAT_OF]
    return found


def _format(case: Path) -> str:
    return "crewai" if case.name.startswith("crewai-") else FORMAT_OF[_input(case).suffix]


def _options(case: Path) -> tuple[bool, int]:
    args_file = case / "args"
    extra = shlex.split(args_file.read_text(encoding="utf-8")) if args_file.exists() else []
    args = build_parser().parse_args(["import", _format(case), _input(case).name, *extra])
    return args.repair, 2 if args.bound is None else args.bound


def _import(case: Path, monkeypatch: pytest.MonkeyPatch) -> ImportOutcome:
    monkeypatch.chdir(case)  # diagnostics then name the file by its name alone, whatever the checkout path
    repair, bound = _options(case)
    if _format(case) == "crewai":
        return api.import_file("crewai", ".", repair=repair, bound=bound)
    return api.import_file(_format(case), _input(case).name, repair=repair, bound=bound, output="expected.fsm")


def _rendered(diagnostics: list) -> str:  # type: ignore[type-arg]
    return "\n\n".join([*(render_text(d) for d in diagnostics), render_summary(diagnostics)]) + "\n"


def _compare(path: Path, actual: str | None) -> None:
    if UPDATE:
        if actual is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(actual, encoding="utf-8", newline="\n")
        return
    if actual is None:
        assert not path.exists(), f"{path} should not exist: the import failed (UPDATE_EXPECT=1 removes it)"
        return
    if not path.exists():
        path.write_text(actual, encoding="utf-8", newline="\n")
        pytest.fail(f"{path} did not exist and was written; review it and run again")
    assert actual == path.read_text(encoding="utf-8"), f"{path} differs (UPDATE_EXPECT=1 rewrites it)"


def _output_name(case: Path) -> str:
    """What the imported file is called in the expected check output: the input's name, as `.fsm`."""
    if _format(case) == "crewai":
        return "crew.fsm"
    return _input(case).with_suffix(".fsm").name


def _case_id(case: Path) -> str:
    return case.name


def _compare_called_files(case: Path, outcome: ImportOutcome) -> None:
    """The machines an agent form's machine runs, each in expected/, and nothing else there."""
    written = {path for path, _ in outcome.files}
    assert all(path.startswith("expected/") for path in written), written
    for path, text in outcome.files:
        _compare(case / path, text)
    stale = sorted(p.relative_to(case).as_posix() for p in case.glob("expected/*"))
    if UPDATE:
        for path in stale:
            if path not in written:
                (case / path).unlink()
        if not written and (case / "expected").is_dir():
            (case / "expected").rmdir()
    else:
        assert [p for p in stale if p not in written] == [], "files the import no longer writes"


def _checked(case: Path, outcome: ImportOutcome) -> list:  # type: ignore[type-arg]
    """What `statewright check` reports on the import: its file, or the project of files it wrote."""
    assert outcome.text is not None
    if not outcome.files:
        return api.check_text(outcome.text, _output_name(case)).diagnostics
    # (_import made the case's folder the working one: the files are named from there)
    return [d for comp in api.check_files(["expected.fsm"]) for d in comp.diagnostics]


@pytest.mark.parametrize("case", _case_dirs(), ids=_case_id)
def test_case_imports_to_exactly_its_expected_file(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _import(case, monkeypatch)
    _compare(case / "expected-import.txt", _rendered(outcome.diagnostics))
    _compare(case / "expected.fsm", outcome.text)
    _compare_called_files(case, outcome)
    checked = _checked(case, outcome) if outcome.text is not None else None
    _compare(case / "expected-check.txt", _rendered(checked) if checked is not None else None)
    has_errors = any(d.severity.value == "error" for d in outcome.diagnostics)
    assert (outcome.text is None) == has_errors, "an import fails exactly when the input has errors"
    assert all(d.code.startswith(("SW8", "SW1005", "SW1021")) for d in outcome.diagnostics)


@pytest.mark.parametrize("case", _case_dirs(), ids=_case_id)
def test_every_import_parses_and_is_canonical(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _import(case, monkeypatch)
    if outcome.text is None:
        return
    for path, text in [("expected.fsm", outcome.text), *outcome.files]:
        assert api.parse_text(text, path).machine is not None
        assert api.format_text(text, path).text == text


@pytest.mark.parametrize("case", _case_dirs(), ids=_case_id)
def test_a_repaired_import_checks_clean_and_every_clean_import_passes_its_test(
        case: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    outcome = _import(case, monkeypatch)
    if outcome.text is None:
        return
    written = api.write_import(outcome, str(tmp_path / "expected.fsm"))  # a project: run where it is written
    compilations = api.check_files(written)
    errors = [(d.code, d.message) for c in compilations for d in c.diagnostics if d.severity.value == "error"]
    if _options(case)[0]:
        assert errors == [], "a repaired import must check clean"
    if errors:
        return  # a literal import keeps the original's problems; its test cannot run until they are fixed
    for compilation in compilations:
        results = api.run_tests(compilation)
        # one test of the shortest path; an orchestrator's machine has one for each agent it hands to
        assert len(results) == 1 or (outcome.files and len(results) > 1)
        assert [(r.name, r.messages) for r in results if not r.passed] == []


def test_imports_are_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    for case in _case_dirs():
        first, again = _import(case, monkeypatch), _import(case, monkeypatch)
        assert (first.text, first.files) == (again.text, again.files)


def test_every_import_code_is_shown_by_a_case() -> None:
    shown: set[str] = set()
    for expected in CASES.glob("*/expected-import.txt"):
        shown.update(re.findall(r"^(?:error|warning)\[(SW\d{4})\]", expected.read_text("utf-8"), re.MULTILINE))
    assert sorted(c for c in CODES if c.startswith("SW8") and c not in shown) == []


def test_both_modes_and_every_format_are_covered() -> None:
    kinds = {(_format(c), _options(c)[0]) for c in _case_dirs()}
    assert kinds == {(f, repair) for f in ("metaagent", "autoagent", "crewai") for repair in (False, True)}
    assert any(_options(c)[1] != 2 for c in _case_dirs()), "a case imports with --bound"


def test_case_names_say_what_they_show() -> None:
    for case in _case_dirs():
        assert re.fullmatch(r"(metaagent|autoagent|crewai)(-[a-z0-9]+)+", case.name), case.name


# ---- properties over generated specs ----------------------------------------------------------------

_CONDITIONS = st.sampled_from(["If the work is done", "If the work is wrong", "If more is needed", "", "  "])
_PROMPTS = st.sampled_from(["You work.", "If done, output `<STATE_TRANS>: 2`.", "Braces {{ x }} {% y %}", "",
                            "Line one.\n  Line two."])


@st.composite
def metaagent_specs(draw: st.DrawFn) -> bytes:
    import json

    agent_ids = [str(i) for i in range(draw(st.integers(1, 3)))]
    state_ids = draw(st.lists(st.sampled_from(["1", "2", "3", "task", "output", "plan", "s 5"]), min_size=1,
                              max_size=6, unique=True))
    initial = draw(st.sampled_from(state_ids))
    agents = [{"agent_id": a, "name": draw(st.sampled_from(["Writer", "Critic", "test", "Plan Maker"])),
               "system_prompt": draw(_PROMPTS),
               "tools": draw(st.lists(st.sampled_from(["code_interpreter", "search_engine", "file_writer"]),
                                      max_size=2, unique=True))} for a in agent_ids]
    states = [{"state_id": s, "agent_id": draw(st.sampled_from(agent_ids)), "instruction": "Do the work.",
               "is_initial": s == initial, "is_final": draw(st.booleans()),
               "listener": draw(st.lists(st.sampled_from(agent_ids), max_size=3))} for s in state_ids]
    transitions = [{"from_state": draw(st.sampled_from(state_ids)), "to_state": draw(st.sampled_from(state_ids)),
                    "condition": draw(_CONDITIONS)} for _ in range(draw(st.integers(0, 8)))]
    return json.dumps({"agents": agents, "states": {"states": states, "transitions": transitions}}).encode()


@st.composite
def autoagent_specs(draw: st.DrawFn) -> bytes:
    events = [f"e{i}" for i in range(draw(st.integers(1, 5)))]
    keys = ["topic", "nowhere"] + [f"k{i}" for i in range(len(events))]
    parts = ["<workflow><name>w</name><system_input><key>topic</key></system_input>",
             "<agents><agent><name>Writer</name></agent><agent><name>Critic</name></agent></agents><events>",
             ("<event><name>on_start</name><outputs><output><key>topic</key><action><type>RESULT</type></action>"
             "</output></outputs></event>")]
    for i, name in enumerate(events):
        listens = ["on_start"] if i == 0 else draw(st.lists(st.sampled_from(["on_start", *events[:i]]),
                                                            max_size=2, unique=True))
        outputs = []
        for j in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["RESULT", "GOTO", "ABORT"]))
            value = f"<value>{draw(st.sampled_from(events))}</value>" if kind == "GOTO" else ""
            condition = f"<condition>case {j}</condition>" if draw(st.booleans()) else ""
            outputs.append(f"<output><key>k{i}</key>{condition}<action><type>{kind}</type>{value}</action></output>")
        inputs = "".join(f"<input><key>{k}</key></input>" for k in draw(st.lists(st.sampled_from(keys), max_size=2)))
        parts.append(f"<event><name>{name}</name><inputs>{inputs}</inputs><task>Do {{topic}}.</task>"
                     f"<outputs>{''.join(outputs)}</outputs>"
                     f"<listen>{''.join(f'<event>{e}</event>' for e in listens)}</listen>"
                     f"<agent><name>{draw(st.sampled_from(['Writer', 'Critic']))}</name>"
                     f"<model>{draw(st.sampled_from(['openai/a', 'openai/b']))}</model></agent></event>")
    parts.append("</events></workflow>")
    return "".join(parts).encode()


def _holds_for_every_mode(source_format: str, data: bytes) -> None:
    for repair in (False, True):
        outcome = api.import_bytes(source_format, data, "spec", repair=repair)
        assert outcome.text is not None, [d.message for d in outcome.diagnostics]
        assert api.format_text(outcome.text).text == outcome.text
        compilation = api.check_text(outcome.text)
        errors = [(d.code, d.message) for d in compilation.diagnostics if d.severity.value == "error"]
        if repair:
            assert errors == []
        if not errors:
            assert [r.messages for r in api.run_tests(compilation) if not r.passed] == []


@settings(max_examples=40, deadline=None)
@given(metaagent_specs())
def test_any_metaagent_spec_imports_and_repairs_into_a_machine_that_tests(data: bytes) -> None:
    _holds_for_every_mode("metaagent", data)


@settings(max_examples=40, deadline=None)
@given(autoagent_specs())
def test_any_autoagent_spec_imports_and_repairs_into_a_machine_that_tests(data: bytes) -> None:
    _holds_for_every_mode("autoagent", data)


# ---- the command line ------------------------------------------------------------------------------

LINEAR = CASES / "metaagent-linear-chain" / "question_answering.json"


def test_import_writes_the_file_and_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.fsm"
    assert main(["import", "metaagent", str(LINEAR), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == api.import_file("metaagent", LINEAR, output=str(out)).text
    assert "literal mode" in err and f"`statewright check` on {out}: no problems" in err


def test_import_reads_stdin_and_writes_stdout(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import io

    data = LINEAR.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["import", "metaagent", "-", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Imported from the MetaAgent file <stdin>")
    assert "machine imported {" in out


@pytest.mark.parametrize("argv", [
    ["import", "metaagent", "{missing}"],
    ["import", "metaagent", "{linear}", "--bound", "3"],
    ["import", "metaagent", "{linear}", "--repair", "--bound", "0"],
    ["import", "yaml", "{linear}"],
    ["import", "metaagent"],
])
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.format(missing=tmp_path / "missing.json", linear=LINEAR) for a in argv]
    assert main(args) == 2


def test_bad_input_exits_1_with_a_positioned_error_and_no_traceback(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"agents": []\n  "states": {}}\n', encoding="utf-8")
    out = tmp_path / "out.fsm"
    assert main(["import", "metaagent", str(bad), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"error[SW8001]: not valid JSON: expecting ',' delimiter\n  --> {bad}:2:3" in err
    assert "Traceback" not in err and not out.exists()


def test_a_repaired_import_that_still_has_errors_exits_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def failing(paths: list[str]) -> list[api.Compilation]:  # the written file, checked with a bound of 0
        return [api.check_text(Path(p).read_text(encoding="utf-8").replace("max 4", "max 0"), p) for p in paths]

    monkeypatch.setattr(api, "check_files", failing)
    assert main(["import", "metaagent", str(LINEAR), "--repair", "-o", str(tmp_path / "o.fsm")]) == 1
    assert main(["import", "metaagent", str(LINEAR), "-o", str(tmp_path / "o.fsm")]) == 0


def test_the_command_offers_exactly_the_importers_formats() -> None:
    from statewright.importers import FORMATS

    assert build_parser().parse_args(["import", "autoagent", "x"]).format == "autoagent"
    for name in FORMATS:
        assert build_parser().parse_args(["import", name, "x"]).format == name


def test_a_bug_in_an_importer_exits_3_without_a_traceback(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated importer bug")

    monkeypatch.delenv("STATEWRIGHT_DEBUG", raising=False)
    monkeypatch.setattr(api, "import_bytes", fail)
    assert main(["import", "metaagent", str(LINEAR)]) == 3
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: simulated importer bug" in err and "Traceback" not in err


def test_import_does_not_load_litellm() -> None:
    code = ("import sys; from statewright.cli import main; "
            f"rc = main(['import', 'metaagent', {str(LINEAR)!r}]); "
            "assert 'litellm' not in sys.modules, 'litellm was imported'; raise SystemExit(rc)")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr


# ---- the documentation ----------------------------------------------------------------------------

DOCS = Path(__file__).parent.parent / "docs"


@pytest.mark.parametrize("quoted", [
    "metaagent-linear-chain/question_answering.json",
    "metaagent-linear-chain/expected.fsm",
    "metaagent-loop-literal/expected-check.txt",
    "metaagent-routing-protocol-stripped/expected-import.txt",
    "metaagent-unknown-ids/expected-import.txt",
    "crewai-sequential-research/config/tasks.yaml",
    "crewai-sequential-research/crew.py",
    "crewai-sequential-research/expected.fsm",
    "crewai-context-cycle/expected-import.txt",
    "autoagent-agent-form-nested-hand-offs/expected/tech_lead.fsm",
    "autoagent-agent-form-hand-off-cycle/expected-import.txt",
])
def test_the_import_page_quotes_the_golden_cases_exactly(quoted: str) -> None:
    page = (DOCS / "import.md").read_text(encoding="utf-8")
    assert (CASES / quoted).read_text(encoding="utf-8").rstrip("\n") in page


def test_the_import_page_quotes_the_repairs_exactly() -> None:
    page = (DOCS / "import.md").read_text(encoding="utf-8")
    lines = (CASES / "metaagent-loop-repaired" / "expected.fsm").read_text(encoding="utf-8").split("\n")
    start = lines.index("# Repairs:")
    assert "\n".join(lines[start : lines.index("", start)]) in page


def test_the_import_page_documents_every_importer_diagnostic_and_stand_in() -> None:
    from statewright.importers import fallbacks

    page = (DOCS / "import.md").read_text(encoding="utf-8")
    assert [c for c in CODES if c.startswith("SW8") and c not in page] == []
    stand_ins = ["work_in_final_state", "no_exit_budget", "failing_final", "parallel_branches",
                 "sequence_parallel_branches"]
    assert all(callable(getattr(fallbacks, name)) and f"`{name}`" in page for name in stand_ins)


# ---- the parts ---------------------------------------------------------------------------------------


def test_identifiers_are_valid_unique_and_clear_of_keywords() -> None:
    assert identifier("Code Writer", "agent") == "code_writer"
    assert identifier("CodeWriter", "agent") == "code_writer"
    assert identifier("HTTPServer", "agent") == "http_server"
    assert identifier("1", "state") == "state_1"
    assert identifier("test", "state") == "test_state"
    assert identifier("Rédacteur en chef", "agent") == "redacteur_en_chef"
    assert identifier("!!!", "agent") == "agent"
    names = Namespace(("task",))
    assert [names.claim(n, "state") for n in ("task", "Writer", "writer", "WRITER")] == [
        "task_2", "writer", "writer_2", "writer_3"]


def test_routing_protocol_is_stripped_and_the_rest_kept() -> None:
    prompt = ("You review code.\n\nTransition conditions:\n- If the tests pass, output `<STATE_TRANS>: 3`.\n"
              "- If no conditions are met, output `<STATE_TRANS>: None`.\n\nBe strict. Print <STATUS_TRANS>: 2 "
              "when lost. Keep notes.")
    assert strip_routing(prompt) == "You review code.\n\nBe strict. Keep notes."
    assert strip_routing("Plan the work.") == "Plan the work."


@given(st.text())
def test_literal_templates_render_to_their_text(text: str) -> None:
    from statewright.runtime.rendering import render_template

    assert render_template(literal_template(text), {}) == text


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",))))
@example("two lines\rand a carriage return\n")  # raw between triple quotes: SW1007
@example("a line\u2028and a separator\n")
@example("a line\n\x1b[2Jand an escape")
def test_fsm_strings_read_back_as_their_value(text: str) -> None:
    written = fsm_string(text)
    parsed = api.parse_text(f"machine m {{\n    description {written}\n}}\n", "m.fsm")
    assert parsed.machine is not None, parsed.diagnostics.items
    # no control character raw (invisible, or a line break of its own to an editor) but tabs and line feeds
    assert all(ch in "\t\n" or unicodedata.category(ch) not in ("Cc", "Zl", "Zp") for ch in written), written
    description = next(i for i in parsed.machine.items if type(i).__name__ == "Description")
    assert description.text.value == text  # type: ignore[attr-defined]


def test_json_string_positions_account_for_escapes() -> None:
    from statewright.diagnostics import Diagnostics

    source = SourceFile("x.json", '{"p": "a\\n\\u00e9\\ud83d\\ude00 <STATE_TRANS>"}')
    root = parse_json(source, Diagnostics())
    assert root is not None
    value = root.get("p")
    assert value is not None
    start = str(value.value).index("<")
    assert value.string_span(start, start + 13).text == "<STATE_TRANS>"


def test_xml_positions_are_characters_not_bytes() -> None:
    from statewright.diagnostics import Diagnostics

    source = SourceFile("x.xml", "<workflow><name>café ☕</name><events/></workflow>")
    root = parse_xml(source, Diagnostics())
    assert root is not None
    events = root.child("events")
    assert events is not None and events.span.text == "<events"
    name = root.child("name")
    assert name is not None and name.text_span is not None and name.text_span.text == "café ☕"
