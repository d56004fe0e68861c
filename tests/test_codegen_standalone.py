"""`statewright compile --standalone`: one file that carries the runtime's modules verbatim, in marked
sections, and a loader (standalone_loader.py's marked section) that makes them a package when the runner
is imported — each module in its own namespace, at the runner's own line numbers."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import traceback
from pathlib import Path
from types import ModuleType

import pytest

from statewright import api
from statewright.compiler.codegen import standalone_loader
from statewright.compiler.codegen.runtime_source import SECTION_MARKER, installed_sources, runtime_sources
from statewright.compiler.codegen.standalone import loader_source, section_marker, standalone_runtime
from statewright.compiler.views.source_text import double_quoted as spec_string

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "examples" / "content_pipeline.fsm"
TRIVIA = ROOT / "examples" / "trivia_writing.fsm"


def standalone(spec: Path) -> str:
    return api.generate_runner(api.check_file(spec), standalone=True)


def load(path: Path, text: str, name: str) -> ModuleType:
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves the module's annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def sections(text: str) -> dict[str, str]:
    """The runtime's modules as the one-file runner holds them, by name, read back from its string."""
    start = text.index("r'''\n") + len("r'''\n")
    body = text[start:text.index("\n'''", start) + 1]
    marks = list(re.finditer(r"^# ---- statewright_runtime/(\w+)\.py -+\n", body, re.MULTILINE))
    assert body.startswith(marks[0].group(0))
    return {m.group(1): body[m.end():after.start() if after else len(body)]
            for m, after in zip(marks, [*marks[1:], None])}


def test_each_runtime_module_is_in_the_runner_verbatim_after_its_marker() -> None:
    text = standalone(PIPELINE)
    assert sections(text) == runtime_sources()
    assert section_marker("engine") == f"{SECTION_MARKER}engine.py " + "-" * (100 - len(f"{SECTION_MARKER}engine.py "))


def test_the_loader_a_runner_carries_is_the_marked_section_of_the_loader_module() -> None:
    text = standalone(PIPELINE)
    loader = loader_source()
    assert loader.startswith("def _install_runtime(package: str, first_line: int, text: str) -> None:")
    assert f"\n\n\n{loader}\n\n\n_install_runtime(" in text
    assert "###" not in loader and text.count("def _install_runtime(") == 1


def test_the_runner_imports_its_machines_names_from_the_private_package() -> None:
    text = standalone(PIPELINE)
    package = standalone_runtime().package
    assert package == f"_statewright_runtime_{installed_sources().sha256[:16]}"
    assert f'_install_runtime("{package}", ' in text
    assert f"from {package}.spec import (\n" in text and f"from {package}.runner_cli import " in text
    machine = text.index("\n# ==== the machine `")
    assert text[machine:] == api.generate_runner(api.check_file(PIPELINE))[
        api.generate_runner(api.check_file(PIPELINE)).index("\n# ==== the machine `"):]


def test_a_traceback_through_the_runtime_shows_the_runners_own_lines(tmp_path: Path) -> None:
    path = tmp_path / "pipeline_runner.py"
    # a runtime of its own: runners sharing one show the lines of the file that installed it
    text = standalone(PIPELINE).replace(standalone_runtime().package, "_statewright_runtime_traceback")
    runner = load(path, text, "traceback_runner")
    lines = path.read_text(encoding="utf-8").splitlines()
    for function in (runner.run_machine, runner.main, runner.arun_machine):
        code = function.__code__
        assert code.co_filename == str(path)
        assert re.match(r"\s*(async )?def ", lines[code.co_firstlineno - 1]), (function, code.co_firstlineno)
    with pytest.raises(AttributeError) as raised:
        runner.run_machine(None, {})
    frames = [f for f in traceback.extract_tb(raised.value.__traceback__) if f.filename == str(path)]
    assert len(frames) >= 3
    for frame in frames:
        assert frame.line == lines[frame.lineno - 1].strip()  # what the traceback shows is the file's line


def test_runners_of_one_runtime_share_it_and_import_only_the_modules_they_use(tmp_path: Path) -> None:
    first = load(tmp_path / "a_runner.py", standalone(PIPELINE), "shared_a_runner")
    second = load(tmp_path / "b_runner.py", standalone(TRIVIA), "shared_b_runner")
    assert first.MachineSpec is second.MachineSpec
    package = standalone_runtime().package
    assert sys.modules[package].__path__ == []  # a package of the loader's, not of any directory
    loaded = {name.rpartition(".")[2] for name in sys.modules if name.startswith(package + ".")}
    assert {"spec", "engine", "runner_cli"} <= loaded
    assert not loaded & {"temporal_worker", "otel", "otel_setup", "litellm_client", "sandbox"}  # imported on use
    otel = importlib.import_module(f"{package}.otel")
    assert otel.__name__ == f"{package}.otel" and otel.__package__ == package


def test_a_runner_of_another_runtime_installs_its_own(tmp_path: Path) -> None:
    text = standalone(PIPELINE)
    package = standalone_runtime().package
    other = text.replace(package, "_statewright_runtime_0000000000000000")
    mine = load(tmp_path / "mine_runner.py", text, "mine_runner")
    theirs = load(tmp_path / "theirs_runner.py", other, "theirs_runner")
    assert mine.MachineSpec is not theirs.MachineSpec
    assert theirs.MachineSpec.__module__ == "_statewright_runtime_0000000000000000.spec"
    assert theirs.run({"topic": "t"}, script={"agent": {"harvest": [{"key_points": ["k"], "open_questions": []}],
                                                        "draft": ["D."], "review": [{"score": 90, "fixes": []}]}}).ok


def test_the_loader_module_installs_sections_as_a_package() -> None:
    text = "\n" + "".join(f"{section_marker(name)}\n{source}" for name, source in {
        "alpha": '"""A."""\n\nfrom .beta import VALUE\n\nDOUBLE = VALUE * 2\n',
        "beta": '"""B."""\n\nVALUE = 21\n\n\ndef fails():\n    raise ValueError("here")\n',
    }.items())
    standalone_loader._install_runtime("_loader_test_package", 10, text)
    standalone_loader._install_runtime("_loader_test_package", 10, text)  # once is enough: the second is a no-op
    assert sum(getattr(f, "runtime_package", None) == "_loader_test_package" for f in sys.meta_path) == 1
    alpha = importlib.import_module("_loader_test_package.alpha")
    assert alpha.DOUBLE == 42 and alpha.__doc__ == "A."
    beta = importlib.import_module("_loader_test_package.beta")
    assert beta.fails.__code__.co_firstlineno == 10 + 1 + 7 + 5  # the string's line, "\n", alpha, beta's line
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("_loader_test_package.gamma")


HOSTILE = [
    "three quotes ''' and \"\"\" and a closing ''')",
    "a marker line\n# ---- statewright_runtime/spec.py ----\nand after it",
    "a NUL \x00 and a backslash at the end \\",
    '\'\'\')\nimport os; os.system("x")\n_install_runtime("x", 1, r\'\'\'',
]


def test_any_string_a_spec_holds_leaves_the_runtime_untouched(tmp_path: Path) -> None:
    text = [spec_string(h) for h in HOSTILE]
    spec = f'''machine hostile {{
    description {text[1]}
    input topic: str = {text[0]}
    agent writer {{
        prompt {text[2]}
    }}
    start state draft {{
        agent writer
        do {text[3]}
        -> done
    }}
    final state done {{ result {text[0]} }}
    test {text[1]} {{
        reply draft {text[3]}
        expect result {text[0]}
    }}
}}
'''
    comp = api.check_text(spec, "hostile'''\n# ---- statewright_runtime/x.py ----.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics]
    runner_text = api.generate_runner(comp, standalone=True)
    assert sections(runner_text) == runtime_sources()
    runner = load(tmp_path / "hostile_runner.py", runner_text, "hostile_runner")
    assert runner.MACHINE.description == HOSTILE[1]
    assert runner.MACHINE.agents["writer"].prompt == HOSTILE[2]
    assert runner.MACHINE.states["draft"].instruction == HOSTILE[3]
    testing = importlib.import_module(runner.MachineSpec.__module__.rpartition(".")[0] + ".testing")
    [outcome] = testing.run_tests(runner.MACHINE)
    assert outcome.passed, outcome.messages
