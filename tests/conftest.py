"""Shared test set-up: no test reaches the network, and litellm never fetches its cost map."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")


@pytest.fixture
def jail() -> None:
    """For tests that run std.python or std.shell: skipped where the bubblewrap jail cannot run, failed
    there instead when STATEWRIGHT_REQUIRE_BWRAP=1 (see tests/support/jail.py)."""
    from support.jail import need_jail

    need_jail()
