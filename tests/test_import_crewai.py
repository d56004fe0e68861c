"""`statewright import crewai`: what the golden cases (tests/test_import.py) do not show on their own.

The command line on a project folder, the optional PyYAML, a crew.py that is read and never run, hostile
YAML, headers that name every stand-in and never an absolute path, and the fidelity fixes of the other
importers that the header must carry.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statewright import api
from statewright.cli import main
from statewright.importers import header_path

CASES = Path(__file__).parent / "cases" / "import"
RESEARCH = CASES / "crewai-sequential-research"


def _project(tmp_path: Path, agents: str, tasks: str, crew: str | None = None) -> Path:
    root = tmp_path / "proj"
    (root / "config").mkdir(parents=True)
    (root / "config" / "agents.yaml").write_text(agents, encoding="utf-8")
    (root / "config" / "tasks.yaml").write_text(tasks, encoding="utf-8")
    if crew is not None:
        (root / "crew.py").write_text(crew, encoding="utf-8")
    return root


AGENTS = "writer:\n  role: Writer\n  goal: Write about {topic}\n  backstory: You write.\n"
TASKS = "draft:\n  description: Write about {topic}.\n  expected_output: A draft.\n  agent: writer\n"


def test_import_crewai_writes_a_machine_that_checks_and_tests(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "research.fsm"
    assert main(["import", "crewai", str(RESEARCH), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"`statewright check` on {out}: no problems" in err
    text = out.read_text(encoding="utf-8")
    assert text == api.import_file("crewai", RESEARCH, output=str(out)).text
    assert main(["test", str(out)]) == 0


def test_the_project_can_be_named_by_its_crew_py_or_its_package_folder(tmp_path: Path) -> None:
    by_folder = api.import_file("crewai", RESEARCH)
    by_file = api.import_file("crewai", RESEARCH / "crew.py")
    assert by_folder.text is not None and by_file.text is not None
    body = by_folder.text[by_folder.text.index("machine "):]
    assert body == by_file.text[by_file.text.index("machine "):]
    layout = tmp_path / "my_crew" / "src" / "my_crew"  # `crewai create crew`'s layout
    shutil.copytree(RESEARCH, layout)
    nested = api.import_file("crewai", tmp_path / "my_crew")
    assert nested.text is not None and nested.text[nested.text.index("machine "):] == body


@pytest.mark.parametrize("argv", [
    ["import", "crewai", "-"],
    ["import", "crewai", "{missing}"],
    ["import", "crewai", "{empty}"],
    ["import", "crewai", "{research}", "--bound", "3"],
])
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    args = [a.format(missing=tmp_path / "nope", empty=tmp_path / "empty", research=RESEARCH) for a in argv]
    assert main(args) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_crew_py_whose_config_file_is_missing_is_a_usage_error(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    shutil.copy(RESEARCH / "crew.py", root / "crew.py")
    assert main(["import", "crewai", str(root)]) == 2
    assert "reads its agents_config from config/agents.yaml, which is not there" in capsys.readouterr().err


def test_without_pyyaml_the_command_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` now raises ImportError
    assert main(["import", "crewai", str(RESEARCH)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'statewright[crewai]'" in err and "Traceback" not in err


@pytest.mark.parametrize("case", ["crewai-not-yaml", "crewai-unknown-agent", "crewai-context-cycle",
                                  "crewai-crew-py-does-not-parse"])
def test_bad_projects_exit_1_with_positioned_errors(case: str, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(CASES / case)
    assert main(["import", "crewai", "."]) == 1
    err = capsys.readouterr().err
    assert re.search(r"^error\[SW80\d\d\]: .*\n  --> [\w./]+:\d+:\d+$", err, re.MULTILINE), err
    assert "Traceback" not in err


def test_crew_py_is_read_never_run(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    crew = (f"open({str(sentinel)!r}, 'w').write('x')\nraise SystemExit(9)\n"
            "from crewai.project import CrewBase, agent, task\n\n@CrewBase\nclass C:\n"
            "    @agent\n    def writer(self):\n        return Agent(config=self.agents_config['writer'])\n"
            "    @task\n    def draft(self):\n        return Task(config=self.tasks_config['draft'])\n")
    root = _project(tmp_path, AGENTS, TASKS, crew)
    outcome = api.import_file("crewai", root)
    assert outcome.text is not None and "machine c {" in outcome.text
    assert not sentinel.exists()
    code = ("import sys; from statewright.cli import main; "
            f"rc = main(['import', 'crewai', {str(root)!r}]); "
            "assert 'litellm' not in sys.modules and 'crewai' not in sys.modules; raise SystemExit(rc)")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert not sentinel.exists()


@pytest.mark.parametrize("agents, message", [
    (('a: &a ["x", "x"]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n'
     'd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n'
     'f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n'), "100,000 values"),
    ("a: &a\n  b: *a\n", "contain itself"),
    ("x: " + "[" * 5000 + "]" * 5000 + "\n", "not valid YAML"),
    ("x: !!python/object:os.system 'echo hi'\n", "not valid YAML"),
    ("\x00", "not valid YAML"),
])
def test_hostile_yaml_is_a_positioned_error(agents: str, message: str, tmp_path: Path) -> None:
    root = _project(tmp_path, agents, TASKS)
    outcome = api.import_file("crewai", root)
    assert outcome.text is None
    assert any(d.code in ("SW8010", "SW8005") and d.span is not None for d in outcome.diagnostics)
    assert any(message in d.message for d in outcome.diagnostics) or message == "not valid YAML", \
        [d.message for d in outcome.diagnostics]


def test_every_stand_in_tool_is_named_in_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    for case in sorted(CASES.glob("crewai-*")):
        monkeypatch.chdir(case)
        args = (case / "args").read_text() if (case / "args").exists() else ""
        outcome = api.import_file("crewai", ".", repair="--repair" in args)
        if outcome.text is None:
            continue
        header = "\n".join(line for line in outcome.text.split("\n") if line.startswith("#") and "machine" not in line)
        body = outcome.text[outcome.text.index("\nmachine "):]
        for name in re.findall(r'^    tool (\w+) = "statewright\.importers\.stand_ins:', body, re.MULTILINE):
            assert f"Tool '{name}' is a stand-in" in header, (case.name, name)


def test_every_note_an_import_prints_is_in_its_header(monkeypatch: pytest.MonkeyPatch) -> None:
    for expected in sorted(CASES.glob("*/expected.fsm")):
        printed = (expected.parent / "expected-import.txt").read_text(encoding="utf-8")
        text = expected.read_text(encoding="utf-8")
        header = " ".join(line[1:].strip() for line in text.split("\nmachine ")[0].split("\n"))
        for code, message in re.findall(r"^warning\[(SW\d{4})\]: (.*)$", printed, re.MULTILINE):
            assert f"{message} [{code}]" in header, (expected.parent.name, message)


def test_a_header_never_holds_an_absolute_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "specs" / "question_answering.json"
    source.parent.mkdir()
    shutil.copy(CASES / "metaagent-linear-chain" / "question_answering.json", source)
    out = tmp_path / "sub" / "out.fsm"
    out.parent.mkdir()
    assert main(["import", "metaagent", str(source), "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert str(tmp_path) not in text
    assert text.startswith("# Imported from the MetaAgent file ../specs/question_answering.json by")
    to_stdout = api.import_file("metaagent", source.resolve())
    assert to_stdout.text is not None and "file question_answering.json by" in to_stdout.text.split("\n")[0]
    assert header_path("/a/b/c.json", "/a/out/x.fsm") == "../b/c.json"
    assert header_path("/a/b/c.json", "/z/x.fsm") == "c.json"  # nothing shared but the root
    assert header_path("/a/b/c.json", None) == "c.json"
    assert header_path("<stdin>", "/x.fsm") == "<stdin>"


def test_literal_parallel_reads_report_sw2008_and_repair_reads_nothing_early() -> None:
    case = CASES / "autoagent-parallel-reads"
    check = (case / "expected-check.txt").read_text(encoding="utf-8")
    assert "error[SW2008]: unknown template variable 'search_result'" in check
    assert "warning[SW8117]" in (case / "expected-import.txt").read_text(encoding="utf-8")
    repaired = (CASES / "autoagent-parallel-reads-repaired" / "expected.fsm").read_text(encoding="utf-8")
    assert "(SW8117)" in repaired and "input search_result: str" in repaired


def test_an_on_start_that_works_is_a_state_not_an_input() -> None:
    text = (CASES / "autoagent-on-start-does-work" / "expected.fsm").read_text(encoding="utf-8")
    assert "start state on_start {" in text and "objective: {{ on_start.output }}" in text
    assert "input objective" not in text and "has its own agent" in text


def test_an_import_api_for_files_refuses_a_project_format() -> None:
    with pytest.raises(ValueError, match="project folder"):
        api.import_bytes("crewai", b"", "x")


# ---- any crew of the documented shapes ----------------------------------------------------------------

@st.composite
def crews(draw: st.DrawFn) -> dict[str, str]:
    agents = [f"agent_{i}" for i in range(draw(st.integers(1, 3)))]
    tasks = [f"task_{i}" for i in range(draw(st.integers(1, 5)))]
    hierarchical = draw(st.booleans())
    agents_yaml = "".join(f"{a}:\n  role: Role of {a} for {{topic}}\n  goal: Goal {a}\n  backstory: Story {a}\n"
                          for a in agents)
    tasks_yaml, methods = "", ""
    for i, t in enumerate(tasks):
        tasks_yaml += f"{t}:\n  description: Do {t} about {{topic}}.\n  expected_output: The result of {t}.\n"
        if not hierarchical or draw(st.booleans()):
            tasks_yaml += f"  agent: {draw(st.sampled_from(agents))}\n"
        # a later read always names the last task, which reads nothing itself: notes, never a cycle
        context = draw(st.sampled_from(["none", "empty", "earlier", "later"])) if i + 1 < len(tasks) else "none"
        if context == "empty":
            tasks_yaml += "  context: []\n"
        elif context == "earlier" and i > 0:
            tasks_yaml += f"  context: [{', '.join(draw(st.lists(st.sampled_from(tasks[:i]), min_size=1, unique=True)))}]\n"
        elif context == "later":
            tasks_yaml += f"  context: [{tasks[-1]}]\n"
        if draw(st.booleans()):
            tasks_yaml += "  human_input: true\n"
        if draw(st.booleans()):
            tasks_yaml += "  async_execution: true\n"
        output = draw(st.sampled_from(["", ", output_pydantic=Result", ", output_json=Missing"]))
        methods += (f"    @task\n    def {t}(self) -> Task:\n"
                    f"        return Task(config=self.tasks_config['{t}']{output})\n\n")
    agent_methods = "".join(f"    @agent\n    def {a}(self) -> Agent:\n        return Agent(config=self.agents_config"
                            f"['{a}'], tools=[SerperDevTool(), FileReadTool()])\n\n" for a in agents)
    process = "Process.hierarchical, manager_llm='openai/gpt-4o'" if hierarchical else "Process.sequential"
    crew = ("from pydantic import BaseModel\nfrom crewai_tools import FileReadTool, SerperDevTool\n\n"
            "class Result(BaseModel):\n    summary: str\n    points: list[str]\n    score: int | None = None\n\n"
            f"@CrewBase\nclass RandomCrew:\n{agent_methods}{methods}"
            f"    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks, "
            f"process={process})\n")
    return {"config/agents.yaml": agents_yaml, "config/tasks.yaml": tasks_yaml, "crew.py": crew}


@settings(max_examples=30, deadline=None)
@given(crews())
def test_any_crew_imports_and_its_repaired_import_checks_and_passes_its_test(files: dict[str, str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        for repair in (False, True):
            outcome = api.import_file("crewai", root, repair=repair)
            assert outcome.text is not None, [d.message for d in outcome.diagnostics]
            assert api.format_text(outcome.text).text == outcome.text
            compilation = api.check_text(outcome.text)
            errors = [(d.code, d.message) for d in compilation.diagnostics if d.severity.value == "error"]
            if repair:
                assert errors == []
            if not errors:
                assert [r.messages for r in api.run_tests(compilation) if not r.passed] == []
            for name in re.findall(r'^    tool (\w+) = "statewright', outcome.text, re.MULTILINE):
                assert f"Tool '{name}' is a stand-in" in outcome.text


def test_a_file_past_the_size_limit_is_one_positioned_error_and_is_not_read_whole(tmp_path: Path) -> None:
    """Every file of a project is read through the limit: one past it, never to its end (a crew.py, a
    YAML file, the header's digest)."""
    import tracemalloc

    from statewright.grammar.parser import MAX_FILE_BYTES

    root = _project(tmp_path, AGENTS, TASKS)
    big = root / "config" / "tasks.yaml"
    with big.open("a", encoding="utf-8") as f:
        f.write("# " + "x" * (4 * MAX_FILE_BYTES) + "\n")  # four times the limit
    tracemalloc.start()
    try:
        outcome = api.import_file("crewai", root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.text is None
    [diag] = [d for d in outcome.diagnostics if d.code == "SW1021"]
    assert diag.path.endswith("tasks.yaml") and diag.span is not None
    assert peak < 3 * MAX_FILE_BYTES, f"peak {peak:,} bytes for a file of {big.stat().st_size:,}"


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs FIFOs")
def test_a_python_file_beside_crew_py_that_is_no_regular_file_is_left_out(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Only crew.py's models are read from the other Python files: a folder named tools.py stopped the import
    ("cannot read PROJECT: Is a directory", naming the project), and a FIFO named models.py (or main.py)
    held it for ever, waiting for a writer."""
    import os

    root = tmp_path / "proj"
    shutil.copytree(RESEARCH, root)
    (root / "tools.py").mkdir()
    os.mkfifo(root / "models.py")
    (root / "main.py").unlink()
    os.mkfifo(root / "main.py")
    plain = tmp_path / "plain"  # the same project without main.py: its example inputs are all that is lost
    shutil.copytree(RESEARCH, plain)
    (plain / "main.py").unlink()
    expected = api.import_file("crewai", plain).text
    outcome = api.import_file("crewai", root)
    assert outcome.text is not None and expected is not None
    assert outcome.text[outcome.text.index("machine "):] == expected[expected.index("machine "):]
    # one too large to read (past the 16 MiB a source may have) only hides its models too
    os.rmdir(root / "tools.py")
    with open(root / "tools.py", "wb") as big:
        big.truncate(17 * 2**20)
    too_large = api.import_file("crewai", root)
    assert too_large.text is not None and too_large.text[too_large.text.index("machine "):] == \
        expected[expected.index("machine "):], [d.code for d in too_large.diagnostics]
    (root / "config" / "tasks.yaml").unlink()
    os.mkfifo(root / "config" / "tasks.yaml")
    assert main(["import", "crewai", str(root)]) == 2
    assert "reads its tasks_config from config/tasks.yaml, which is not a regular file" in capsys.readouterr().err
