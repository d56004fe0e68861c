"""docs/runners.md stays true to the generated runner's command line: every option, and the default workspace."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from support.machines import final, go, machine, state

from statewright.runtime import runner_cli
from statewright.runtime.engine import default_workspace
from statewright.runtime.runner_options import runner_parser

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "runners.md").read_text(encoding="utf-8")
SECTION = PAGE.split("\n## Using a runner from the command line\n", 1)[1].split("\n## ", 1)[0]
SYNOPSIS = SECTION.split("```text\n", 1)[1].split("```", 1)[0]
TABLE_OPTIONS = set(re.findall(r"^\| `(--[a-z][a-z-]*)", SECTION, re.MULTILINE))


def runner_options() -> list[str]:
    """Every option of the runner's argparse parser, --help aside."""
    parser = runner_parser(machine(state("a", go("done")), final("done")), "runner.py")
    return [option for action in parser._actions for option in action.option_strings
            if option not in ("-h", "--help")]


def test_the_runner_has_the_options_the_page_is_checked_against() -> None:
    assert {"--input", "--max-tokens", "--retries", "--retry-delay", "--script", "--run-id",
            "--list-runs", "--selftest"} <= set(runner_options())


def test_the_synopsis_lists_every_option_of_the_runner() -> None:
    assert [option for option in runner_options() if f"[{option}" not in SYNOPSIS] == []


def test_the_option_table_has_a_row_for_every_option_of_the_runner() -> None:
    assert [option for option in runner_options() if option not in TABLE_OPTIONS] == []


def test_the_page_documents_no_option_the_runner_does_not_have() -> None:
    assert sorted(TABLE_OPTIONS - set(runner_options())) == []


def test_the_options_in_the_runners_help_are_the_documented_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert runner_cli.main(machine(state("a", go("done")), final("done")), ["--help"], prog="runner.py") == 0
    shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", capsys.readouterr().out)) - {"--help"}
    assert shown and sorted(shown - TABLE_OPTIONS) == []


def test_the_default_workspace_is_the_documented_one() -> None:
    assert default_workspace("RUN_ID").endswith(os.path.join(".statewright", "runs", "RUN_ID", "workspace"))
    assert "`.statewright/runs/<run_id>/workspace`" in SECTION


def test_run_ids_that_clean_to_one_name_never_share_a_workspace_nor_leave_the_runs_directory() -> None:
    # "a/b" and "a_b" (and "..", ".", "run") had one workspace; a long id a directory name the system refused
    ids = ["a/b", "a_b", "a b", "..", ".", "run", "../../etc", "x" * 5000, "\x00", "A\u2028"]
    runs = os.path.abspath(os.path.join(".statewright", "runs"))
    places = [default_workspace(i) for i in ids]
    assert len(set(places)) == len(ids)
    for place in places:
        name = os.path.relpath(place, runs).split(os.sep)
        assert len(name) == 2 and name[1] == "workspace" and len(name[0]) <= 100 and not name[0].startswith(".")
    assert default_workspace("a_b").endswith(os.path.join("runs", "a_b", "workspace"))  # safe: unchanged
