"""The caches are kept where only this user can write: a cache file is loaded and trusted."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from statewright.cache_dir import cache_dir
from statewright.grammar import parse_text
from statewright.grammar import parser as grammar_parser


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("STATEWRIGHT_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_the_default_directory_is_this_users_own_and_private(temp: Path) -> None:
    found = cache_dir()
    assert found == temp / f"statewright-{os.getuid()}"
    assert found.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("planted", ["writable by others", "owned by another user", "a symlink"])
def test_a_directory_another_user_could_have_planted_is_never_used(planted: str, temp: Path) -> None:
    path = temp / f"statewright-{os.getuid()}"
    if planted == "a symlink":
        (temp / "elsewhere").mkdir(mode=0o700)
        path.symlink_to(temp / "elsewhere")
    else:
        path.mkdir(mode=0o700)
        if planted == "writable by others":
            path.chmod(0o777)
        elif os.getuid() == 0:
            os.chown(path, 12345, 12345)
        else:
            pytest.skip("only root can give a directory to another user")
    assert cache_dir() is None
    # every command still works, without the caches
    grammar_parser._parser.cache_clear()
    try:
        assert grammar_parser._parser() is not None and parse_text("machine m {\n    final state done\n}\n").machine
    finally:
        grammar_parser._parser.cache_clear()
    assert not list(path.iterdir())  # nothing was written there
