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


# Modules whose tests start processes, servers, a jail or a cluster, or search at random: marked slow, so
# that `pytest -m "not slow and not realmodel"` is the fast inner loop while editing (CI runs them all).
SLOW_MODULES = ("test_e2e_", "test_temporal.py", "test_temporal_calls.py", "test_temporal_segments.py", "test_faces.py", "test_jail.py", "test_sandbox.py", "test_lsp.py",
                "test_codegen_runtime_package.py", "test_grammar_constraint.py", "test_formatter_properties.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name.startswith(SLOW_MODULES):
            item.add_marker(pytest.mark.slow)
