"""PATH arguments as terraform, ruff and BAML users expect: a directory is every .fsm file under it, minus
what hidden folders, virtual environments, .gitignore files and --exclude leave out."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from statewright.cli import main
from statewright.spec_paths import find_spec_files

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "content_pipeline.fsm"
GOOD = EXAMPLE.read_text(encoding="utf-8")
BROKEN = GOOD.replace("-> review\n", "-> reviw\n", 1)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree (a `.git` folder is what marks one) with specs where they are found and where not."""
    root = _tree(tmp_path / "repo", {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".git/info/exclude": "local-only/\n",
        ".gitignore": "generated/\n*.draft.fsm\n",
        "a.fsm": GOOD,
        "flows/b.fsm": GOOD,
        "flows/notes.txt": "not a spec",
        "flows/old/c.fsm": GOOD,
        "flows/sub/.gitignore": "!keep.draft.fsm\n",
        "flows/sub/keep.draft.fsm": GOOD,
        "flows/sub/wip.draft.fsm": GOOD,
        "generated/g.fsm": BROKEN,
        "local-only/l.fsm": BROKEN,
        ".hidden/h.fsm": BROKEN,
        "node_modules/pkg/n.fsm": BROKEN,
        "env/pyvenv.cfg": "home = /usr/bin\n",
        "env/lib/v.fsm": BROKEN,
    })
    monkeypatch.chdir(root)
    return root


def test_a_directory_stands_for_every_spec_under_it_in_name_order(repo: Path) -> None:
    assert find_spec_files(["."]).files == [
        "a.fsm", "flows/b.fsm", "flows/old/c.fsm", "flows/sub/keep.draft.fsm"]


def test_the_ignore_files_above_a_directory_apply_inside_it(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert find_spec_files(["flows/sub"]).files == ["flows/sub/keep.draft.fsm"]  # *.draft.fsm from the top
    monkeypatch.chdir(repo / "flows")
    assert find_spec_files([".."]).files == [
        "../a.fsm", "../flows/b.fsm", "../flows/old/c.fsm", "../flows/sub/keep.draft.fsm"]


def test_without_a_work_tree_only_the_ignore_files_under_the_directory_count(tmp_path: Path) -> None:
    _tree(tmp_path, {".gitignore": "*.fsm\n", "inner/.gitignore": "skip.fsm\n", "inner/skip.fsm": GOOD,
                     "inner/take.fsm": GOOD})
    assert find_spec_files([str(tmp_path / "inner")]).files == [str(tmp_path / "inner" / "take.fsm")]


def test_exclude_patterns_are_gitignore_lines_relative_to_the_current_directory(repo: Path) -> None:
    assert find_spec_files(["."], ["old/"]).files == ["a.fsm", "flows/b.fsm", "flows/sub/keep.draft.fsm"]
    assert find_spec_files(["flows"], ["flows/sub/"]).files == ["flows/b.fsm", "flows/old/c.fsm"]
    assert find_spec_files(["."], ["*.fsm", "!b.fsm"]).files == ["flows/b.fsm"]
    assert find_spec_files(["."], ["!wip.draft.fsm"]).files == [  # --exclude overrides every ignore file
        "a.fsm", "flows/b.fsm", "flows/old/c.fsm", "flows/sub/keep.draft.fsm", "flows/sub/wip.draft.fsm"]


def test_a_file_named_on_the_command_line_is_never_excluded(repo: Path) -> None:
    named = ["generated/g.fsm", ".hidden/h.fsm", "a.fsm"]
    assert find_spec_files(named, ["*.fsm"]).files == named


def test_a_file_named_twice_is_listed_once(repo: Path) -> None:
    assert find_spec_files(["flows/b.fsm", "flows", "./flows/b.fsm"]).files == [
        "flows/b.fsm", "flows/old/c.fsm", "flows/sub/keep.draft.fsm"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_links_to_directories_are_not_followed(repo: Path) -> None:
    os.symlink(repo / "flows", repo / "link")
    assert "link/b.fsm" not in find_spec_files(["."]).files


def test_check_reports_every_file_of_a_directory(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "flows" / "old" / "c.fsm").write_text(BROKEN, encoding="utf-8")
    assert main(["check", "."]) == 1
    captured = capsys.readouterr()
    assert "--> flows/old/c.fsm:" in captured.out and "SW2002" in captured.out
    assert "generated/g.fsm" not in captured.out and "h.fsm" not in captured.out
    assert "failed: 4 files checked, 1 error" in captured.err


def test_check_json_names_each_file_once_in_one_document(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "flows" / "b.fsm").write_text(BROKEN, encoding="utf-8")
    assert main(["check", "--format", "json", ".", "--exclude", "old/"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert {d["file"] for d in doc["diagnostics"]} == {"flows/b.fsm"}


def test_fmt_check_and_fmt_format_a_whole_directory(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messy = GOOD.replace("\n    ", "\n  ")
    (repo / "flows" / "b.fsm").write_text(messy, encoding="utf-8")
    (repo / "generated" / "g.fsm").write_text(messy, encoding="utf-8")
    assert main(["fmt", "--check", "."]) == 1
    assert capsys.readouterr().err.splitlines() == ["would reformat flows/b.fsm"]
    assert main(["fmt", "flows"]) == 0
    assert (repo / "flows" / "b.fsm").read_text(encoding="utf-8") == GOOD
    assert (repo / "generated" / "g.fsm").read_text(encoding="utf-8") == messy  # ignored: left alone
    assert main(["fmt", "--check", "."]) == 0


def test_test_runs_the_test_blocks_of_a_whole_directory(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "flows", "--exclude", "sub/"]) == 0
    out = capsys.readouterr()
    assert out.err.rstrip().endswith("6 passed, 0 failed")  # 3 test blocks in each of two files


def test_a_directory_without_specs_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"warning: no .fsm files under {tmp_path}" in err and "0 files checked" in err


def test_graph_draws_one_machine_and_names_the_files_of_a_directory(repo: Path, capsys) -> None:
    assert main(["graph", "flows"]) == 2
    err = capsys.readouterr().err
    assert "graph reads one .fsm file; flows is a directory" in err and "flows/b.fsm" in err


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="permissions do not stop root (and are not POSIX here)")
def test_a_directory_that_cannot_be_listed_is_a_diagnostic(repo: Path, capsys) -> None:
    locked = repo / "flows" / "old"
    locked.chmod(0)
    try:
        assert main(["check", "flows"]) == 1
    finally:
        locked.chmod(0o755)
    assert "error[SW1022]: cannot read flows/old" in capsys.readouterr().out


def test_the_example_folder_is_what_the_docs_say(tmp_path: Path, capsys) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    assert main(["check", str(tmp_path / "examples")]) == 0
    count = len(list((ROOT / "examples").rglob("*.fsm")))  # check walks the folders under it too
    assert count >= 5 and f"ok: {count} files checked, no problems" in capsys.readouterr().err


def test_a_line_git_cannot_read_is_skipped_and_a_bad_exclude_is_a_usage_error(repo: Path, capsys) -> None:
    (repo / "flows" / ".gitignore").write_text("!\nold/\n", encoding="utf-8")  # '!' alone is no pattern
    assert "flows/old/c.fsm" not in find_spec_files(["flows"]).files
    assert main(["check", ".", "--exclude", "!"]) == 2
    assert "--exclude '!' is not a .gitignore pattern" in capsys.readouterr().err


def test_a_directory_that_does_not_exist_is_one_diagnostic(tmp_path: Path, capsys) -> None:
    assert main(["check", str(tmp_path / "nowhere")]) == 1
    captured = capsys.readouterr()
    assert captured.out.count("SW1022") == 1 and "warning" not in captured.err
