"""Shared test set-up: no test reaches the network, and litellm never fetches its cost map; fixtures that
several test files use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")


@pytest.fixture
def jail() -> None:
    """For tests that run std.python or std.shell: skipped where the bubblewrap jail cannot run, failed
    there instead when STATEWRIGHT_REQUIRE_BWRAP=1 (see tests/support/jail.py)."""
    from support.jail import need_jail

    need_jail()


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment's python that can import litellm, pydantic and jinja2, but not statewright
    (see tests/support/bare_python.py): where generated runners must work."""
    from support.bare_python import make_bare_python

    return make_bare_python(tmp_path_factory.mktemp("bare-venv"))
