"""Golden runners: every example's runner, as `compile --runtime module` writes it, is committed under
tests/cases/runners/ beside the statewright_runtime.py they share, so that every change to code generation
shows as a reviewed diff — in one runner's machine when only it changes, in the one runtime file when the
runtime does.

Run with UPDATE_EXPECT=1 to rewrite them after an intended change, then review the diff. (Other branches
change code generation too: a merge regenerates them.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from statewright import api

ROOT = Path(__file__).resolve().parents[1]
RUNNERS = ROOT / "tests" / "cases" / "runners"
EXAMPLES = sorted((ROOT / "examples").glob("*.fsm"))
UPDATE = os.environ.get("UPDATE_EXPECT") == "1"


def golden_path(example: Path) -> Path:
    return RUNNERS / f"{example.stem}_runner.py"


def generated(example: Path, runtime: str = "module") -> str:
    """What `statewright compile EXAMPLE -o tests/cases/runners/NAME_runner.py --runtime module` writes."""
    output = golden_path(example)
    name = api.runner_source_name(example, output)
    return api.generate_runner(api.check_text(example.read_text(encoding="utf-8"), name), runtime=runtime)


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


def test_the_runtime_the_golden_runners_share_is_the_golden_runtime() -> None:
    compare(RUNNERS / api.RUNTIME_FILE, api.runtime_module_text())


def test_every_golden_runner_belongs_to_an_example() -> None:
    expected = {golden_path(e).name for e in EXAMPLES} | {api.RUNTIME_FILE}
    assert {p.name for p in RUNNERS.iterdir() if p.is_file()} == expected


def test_a_standalone_runner_holds_the_golden_runners_machine() -> None:
    """The inline runner differs from the golden one only above its machine: the machine part is one."""
    marker = "\n# ==== the machine `"
    for example in EXAMPLES:
        inline, module = generated(example, runtime="inline"), golden_path(example).read_text(encoding="utf-8")
        assert inline[inline.index(marker):] == module[module.index(marker):], example.name
