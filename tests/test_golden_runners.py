"""Golden runners: every example's runner, as `statewright compile` writes it, is committed under
tests/cases/runners/ beside the runtime package statewright_runtime/ they share, so that every change to
code generation shows as a reviewed diff — in one runner's machine when only it changes, in the runtime's
files (and the one line of each runner that names the runtime's hash) when the runtime does.

Run with UPDATE_EXPECT=1 to rewrite them after an intended change, then review the diff. (Other branches
change code generation too: a merge regenerates them.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.e2e_runs import EXAMPLES

from statewright import api
from statewright.compiler.codegen.runtime_package import runtime_package

ROOT = Path(__file__).resolve().parents[1]
RUNNERS = ROOT / "tests" / "cases" / "runners"
UPDATE = os.environ.get("UPDATE_EXPECT") == "1"


def golden_path(example: Path) -> Path:
    return RUNNERS / f"{example.stem}_runner.py"


def generated(example: Path, *, standalone: bool = False) -> str:
    """What `statewright compile EXAMPLE -o tests/cases/runners/NAME_runner.py [--standalone]` writes."""
    output = golden_path(example)
    return api.generate_runner(api.check_for_runner(example, output), standalone=standalone)


def compare(path: Path, actual: str) -> None:
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8", newline="\n")
        if not UPDATE:
            pytest.fail(f"{path} did not exist and was written; review it and run again")
        return
    assert actual == path.read_text(encoding="utf-8"), (
        f"{path.relative_to(ROOT)} differs from what code generation writes now: review the change and "
        "rewrite the golden runners with UPDATE_EXPECT=1")


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_each_examples_runner_is_its_golden_runner(example: Path) -> None:
    compare(golden_path(example), generated(example))


def test_the_runtime_package_the_golden_runners_share_is_the_golden_package() -> None:
    package = RUNNERS / api.RUNTIME_DIR
    files = runtime_package().files
    if UPDATE:
        for stale in {p.name for p in package.glob("*.py")} - set(files):
            (package / stale).unlink()
    for name, text in files.items():
        compare(package / name, text)
    assert sorted(p.name for p in package.iterdir() if p.name != "__pycache__") == sorted(files)
    assert api.check_runtime_package(package).current


def test_the_golden_package_is_the_installed_runtime_file_by_file() -> None:
    """Each module of the package is the runtime's module under a three-line header, its code unchanged."""
    from statewright.compiler.codegen.runtime_source import runtime_sources

    for name, text in runtime_sources().items():
        golden = (RUNNERS / api.RUNTIME_DIR / f"{name}.py").read_text(encoding="utf-8")
        assert golden.split("\n", 3)[3] == text, name


def test_every_golden_runner_belongs_to_an_example() -> None:
    expected = {golden_path(e).name for e in EXAMPLES}
    assert {p.name for p in RUNNERS.iterdir() if p.is_file()} == expected
    assert {p.name for p in RUNNERS.iterdir() if p.is_dir() and p.name != "__pycache__"} == {api.RUNTIME_DIR}


def test_a_golden_runner_shows_its_machine_and_only_the_import_of_the_runtime() -> None:
    """Every line of a golden runner above its machine is the header, the docstring or an import: no line
    of the runtime's code."""
    marker = "\n# ==== the machine `"
    for example in EXAMPLES:
        text = golden_path(example).read_text(encoding="utf-8")
        head = text[:text.index(marker)]
        assert "def " not in head and "class " not in head, example.name
        assert len(head.splitlines()) < 80, example.name


def test_a_standalone_runner_holds_the_golden_runners_machine() -> None:
    """The one-file runner differs from the golden one only above its machine: the machine part is one."""
    marker = "\n# ==== the machine `"
    for example in EXAMPLES:
        standalone, shared = generated(example, standalone=True), golden_path(example).read_text(encoding="utf-8")
        assert standalone[standalone.index(marker):] == shared[shared.index(marker):], example.name


def _block(text: str, opening: str, indent: str) -> list[str]:
    """The lines of the block that opens with the line `opening` and closes at the next line at `indent`."""
    lines = text.splitlines()
    start = lines.index(opening)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(indent) and
               not lines[i].startswith(indent + " "))
    return lines[start:end + 1]


def test_a_state_added_to_the_spec_changes_the_source_map_and_that_states_own_lines() -> None:
    """Positions live in SOURCE_MAP alone: adding a state moves the positions after it there, and nowhere
    else — the rest of the diff is the new state, the transition that now leads to it, and the hash."""
    from collections import Counter

    example = ROOT / "examples" / "content_pipeline.fsm"
    before = example.read_text(encoding="utf-8")
    after = before.replace("        tell [writer, critic]\n        -> draft\n    }\n",
                           "        tell [writer, critic]\n        -> outline\n    }\n\n"
                           "    state outline {\n        agent writer\n"
                           '        do "Outline the article about {{ topic }} before you write it."\n'
                           "        -> draft\n    }\n")
    assert after != before
    old, new = (api.generate_runner(api.check_text(text, "content_pipeline.fsm")) for text in (before, after))
    hashes = [api.source_sha256(api.check_text(text, "x.fsm")) for text in (before, after)]
    added = Counter(new.splitlines()) - Counter(old.splitlines())
    removed = Counter(old.splitlines()) - Counter(new.splitlines())
    new_map, old_map = _block(new, "SOURCE_MAP = {", "}"), _block(old, "SOURCE_MAP = {", "}")
    new_state = ["", *_block(new, 'STATES["outline"] = StateSpec(', ")")]  # with its blank line before
    # the state whose transition now leads to the new one (its literal may wrap: the target is longer)
    new_changed, old_changed = (_block(text, 'STATES["harvest"] = StateSpec(', ")") for text in (new, old))
    assert all(line in new_map or line in new_state or line in new_changed or hashes[1] in line
               for line in added), [line for line in added if line not in new_map and line not in new_state]
    assert all(line in old_map or line in old_changed or hashes[0] in line for line in removed), list(removed)
    assert sum(added.values()) - len(new_state) <= len(new_map) + 8
