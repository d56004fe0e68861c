"""The litellm client's own rules: lazy import, backoff arithmetic, the tool prompt protocol."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from typing import Any

import pytest

from statewright.runtime.client import ModelRequest, ToolCallRequest
from statewright.runtime.litellm_client import LiteLLMClient, RetryPolicy
from statewright.runtime.model_calls import ToolProtocolError, parse_tool_protocol
from tests.support.fake_openai_server import Fail, FakeOpenAIServer, Reply


def test_importing_the_model_modules_does_not_import_litellm():
    code = (
        "import sys\n"
        "import statewright.runtime.litellm_client, statewright.runtime.scripted, statewright.runtime.testing\n"
        "from statewright.runtime.litellm_client import LiteLLMClient\n"
        "LiteLLMClient()\n"
        "print('litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_default_retry_policy():
    policy = RetryPolicy()
    assert (policy.max_retries, policy.initial_delay, policy.max_delay) == (3, 0.5, 8)
    assert (policy.multiplier, policy.jitter, policy.timeout) == (2, 0.25, 60)


def test_backoff_doubles_up_to_the_maximum_delay():
    policy = RetryPolicy(initial_delay=0.5, max_delay=3, multiplier=2, jitter=0)
    rng = random.Random(0)
    assert [policy.delay(n, rng) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_spreads_each_wait_within_its_fraction():
    policy = RetryPolicy(initial_delay=1.0, max_delay=100, multiplier=2, jitter=0.25)
    rng = random.Random(7)
    waits = [policy.delay(3, rng) for _ in range(200)]
    assert all(3.0 <= w <= 5.0 for w in waits)
    assert len(set(waits)) > 100


def test_unknown_modes_are_refused():
    with pytest.raises(ValueError, match="structured_mode"):
        LiteLLMClient(structured_mode="xml")
    with pytest.raises(ValueError, match="tool_mode"):
        LiteLLMClient(tool_mode="sometimes")


def test_the_mode_is_recorded_once_per_model_however_many_retries():
    with FakeOpenAIServer() as server:
        server.enqueue(Fail(500), Fail(500), Reply(json={"ok": True}))
        client = LiteLLMClient(retry=RetryPolicy(initial_delay=0.001, jitter=0), api_base=server.url + "/v1",
                               api_key="sk-test")
        response = client.complete(ModelRequest(
            role="verifier", state="review", model="openai/test-model",
            messages=[{"role": "user", "content": "Judge."}], response_schema={"type": "object"}))

    assert [e["type"] for e in response.events] == ["structured_output", "retry", "retry"]
    # the schema instruction is added once, not once per attempt
    assert all(r.body["messages"][0]["content"].count("JSON Schema") == 1 for r in server.requests)


def test_calls_one_after_another_share_one_sdk_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm keys its cache of OpenAI SDK clients by the request's timeout: every call gets the same one,
    and the time an attempt has left is kept by the client itself, so five calls on one event loop build
    one SDK client."""
    import openai

    built = []
    original = openai.AsyncOpenAI.__init__

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(kwargs.get("timeout"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(openai.AsyncOpenAI, "__init__", counting)
    with FakeOpenAIServer() as server:
        server.enqueue(*[Reply(text=f"reply {n}") for n in range(5)])
        client = LiteLLMClient(retry=RetryPolicy(timeout=30.0), api_base=server.url + "/v1-shared",
                               api_key="sk-test-shared")

        async def five() -> list[Any]:
            return [await client.acomplete(ModelRequest(role="agent", state="s", model="openai/shared-model",
                                                         messages=[{"role": "user", "content": f"call {n}"}]))
                    for n in range(5)]

        replies = asyncio.run(five())
    assert [r.content for r in replies] == [f"reply {n}" for n in range(5)]
    assert len(built) <= 1, f"{len(built)} SDK clients built, with timeouts {built}"


@pytest.mark.parametrize(("reply", "content", "calls"), [
    ('{"final": "done"}', "done", []),
    ('  {"final": {"score": 3}}\n', '{"score": 3}', []),
    ('```json\n{"final": "fenced"}\n```', "fenced", []),
    ('{"tool_calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": [1]}}]}', "",
     [ToolCallRequest("call_0", "a", "{}"), ToolCallRequest("call_1", "b", '{"x": [1]}')]),
])
def test_the_tool_prompt_protocol_reads_its_two_forms(reply, content, calls):
    assert parse_tool_protocol(reply) == (content, calls)


@pytest.mark.parametrize(("reply", "problem"), [
    ("Sure! Calling lookup now.", "not JSON"),
    ('["final"]', "exactly one key"),
    ('{"final": "x", "tool_calls": []}', "exactly one key"),
    ('{"answer": "x"}', "exactly one key"),
    ('{"tool_calls": []}', "non-empty list"),
    ('{"tool_calls": [{"name": "a"}]}', 'tool call #1 must be {"name": ..., "arguments": {...}}'),
    ('{"tool_calls": [{"name": "", "arguments": {}}]}', "tool call #1 has no tool name"),
    ('{"tool_calls": [{"name": "a", "arguments": "q=1"}]}', "tool call #1: arguments must be an object"),
])
def test_the_tool_prompt_protocol_refuses_anything_else(reply, problem):
    with pytest.raises(ToolProtocolError) as caught:
        parse_tool_protocol(reply)
    assert problem in str(caught.value)
