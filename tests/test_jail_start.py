"""When a root runner cannot start bubblewrap, the error names the real cause, not the path that failed.

A root runner stages what tool code needs on a private tmpfs over /tmp and drops to uid 65534 before it
starts bubblewrap; a `bwrap` under /tmp is hidden by that tmpfs, and one under a directory uid 65534 cannot
search (or a file it may not execute) cannot be started either. Both fail closed; the message says why.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.e2e_runs import cli
from support.jail import need_jail

pytestmark = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                                reason="only a root runner stages the jail and drops to uid 65534")

SPEC = textwrap.dedent("""\
    machine jailed {
        start state run {
            call std.python(code = "print('hello')")
            -> done
        }
        final state done
    }
""")


@pytest.fixture
def bwrap() -> str:
    need_jail()
    found = shutil.which("bwrap")
    assert found is not None
    return found


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A directory outside /tmp, which the staging tmpfs does not hide."""
    path = Path(tempfile.mkdtemp(prefix="statewright-jail-start-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_with_bwrap_at(directory: Path, bwrap: str, tmp_path: Path) -> str:
    """`statewright run` with `directory/bwrap` (a copy of the real one) first on PATH; its failure message."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy2(bwrap, directory / "bwrap")
    spec = tmp_path / "jailed.fsm"
    spec.write_text(SPEC, encoding="utf-8")
    workspace = Path(tempfile.mkdtemp(prefix="statewright-ws-", dir="/var/tmp"))
    os.chown(workspace, 65534, 65534)
    try:
        done = cli("run", str(spec), "--workspace", str(workspace), cwd=tmp_path,
                   env={"PATH": f"{directory}{os.pathsep}{os.environ['PATH']}"})
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def test_a_bwrap_under_tmp_is_named_as_hidden_by_the_jails_own_tmp(bwrap: str, tmp_path: Path) -> None:
    directory = tmp_path / "bin"
    assert str(directory).startswith("/tmp/")
    said = run_with_bwrap_at(directory, bwrap, tmp_path)
    assert f"could not start {directory}/bwrap: it lies under /tmp, which a root runner covers with the jail's " \
           "own staging area" in said
    assert "No such file or directory" not in said


def test_a_bwrap_the_tool_user_cannot_reach_is_named_so(bwrap: str, outside_tmp: Path, tmp_path: Path) -> None:
    private = outside_tmp / "private"
    directory = private / "bin"
    directory.mkdir(parents=True)
    os.chmod(outside_tmp, 0o755)
    os.chmod(private, 0o700)
    said = run_with_bwrap_at(directory, bwrap, tmp_path)
    assert f"that user cannot search {private} (mode 700) on the way to it" in said
    assert "Permission denied" not in said


def test_a_bwrap_the_tool_user_may_not_execute_is_named_so(bwrap: str, outside_tmp: Path, tmp_path: Path) -> None:
    os.chmod(outside_tmp, 0o755)
    directory = outside_tmp / "bin"
    directory.mkdir()
    shutil.copy2(bwrap, directory / "bwrap")
    os.chmod(directory / "bwrap", 0o700)
    spec = tmp_path / "jailed.fsm"
    spec.write_text(SPEC, encoding="utf-8")
    done = cli("run", str(spec), "--workspace", str(outside_tmp / "ws"), cwd=tmp_path,
               env={"PATH": f"{directory}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 1 and "that user may not execute it (mode 700)" in done.stderr, done.stderr
