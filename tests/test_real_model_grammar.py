"""A real llama.cpp server holds the designer's draft to the grammar: SmolLM2-135M, on 127.0.0.1.

Skips without a server; CI starts one (`bash .ci/start-model-server`) and sets STATEWRIGHT_REQUIRE_REAL_MODEL=1
so it fails instead. The model cannot design a machine; the test asks only that its draft parses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from statewright import api
from statewright.grammar import parse_text
from statewright.runtime.litellm_client import LiteLLMClient, RetryPolicy
from statewright.stdlib.reference import compact_designer_system_prompt

pytestmark = pytest.mark.realmodel


@pytest.fixture(scope="module")
def server_url() -> str:
    url = os.environ.get("STATEWRIGHT_LLAMA_URL")
    if not url:
        if os.environ.get("STATEWRIGHT_REQUIRE_REAL_MODEL"):
            pytest.fail("STATEWRIGHT_REQUIRE_REAL_MODEL is set but STATEWRIGHT_LLAMA_URL is not")
        pytest.skip("no local model server (start one with `bash .ci/start-model-server`)")
    return url


def test_a_constrained_draft_from_a_real_model_parses(server_url: str, tmp_path: Path) -> None:
    client = LiteLLMClient(retry=RetryPolicy(max_retries=1, timeout=300.0), api_base=server_url,
                           api_key="sk-local-test-key")
    trace = tmp_path / "design.jsonl"
    outcome = api.design("Answer a trivia question, then have a fact checker confirm the answer.",
                         output=str(tmp_path / "trivia.fsm"), model="openai/smollm2-135m", max_repairs=0,
                         constrain="grammar", max_tokens=96, client=client, trace_path=str(trace),
                         system_prompt=compact_designer_system_prompt())
    assert outcome.attempts, outcome.log
    source = outcome.attempts[0].source
    assert parse_text(source).machine is not None, source
    assert not [d for d in outcome.attempts[0].diagnostics if d["code"].startswith("SW1")]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    draft = next(e for e in events if e["event"] == "llm_call" and e["state"] == "machine")
    assert draft["constraint"] == "grammar" and 0 < draft["completion_tokens"] <= 96
