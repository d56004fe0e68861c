"""Budgets: `tokens` and `cost_usd` limits stop a run before a call that would exceed them.

Each call is estimated before it is made: its prompt plus the reply allowance (`max_tokens`, none without
it), priced at the model's rate. The estimate is the client's own (`estimate(request)`; litellm's tokenizer
and price table for the default client), or a token per four characters of the prompt at no known price.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from support.fake_client import FakeClient
from support.fake_openai_server import FakeOpenAIServer, Reply
from support.machines import final, go, machine, state
from support.scripted_litellm import register_scripted_provider

from statewright import cli
from statewright.runtime.client import ModelRequest, rough_tokens
from statewright.runtime.engine import Engine
from statewright.runtime.litellm_client import LiteLLMClient, RetryPolicy
from statewright.runtime.scripted import Script
from statewright.runtime.spec import LimitsSpec
from statewright.runtime.trace import Trace

INSTRUCTION = "Summarise the design of the engine in one paragraph."


def one_step(limits: LimitsSpec, instruction: str = INSTRUCTION):
    return machine(state("a", go("done"), do=instruction), final("done"), limits=limits)


def looping(limits: LimitsSpec):
    return machine(state("a", go("b")), state("b", go("a")), final("never"), limits=limits)


def run(spec, client, **options: Any):
    events: list[dict[str, Any]] = []
    result = Engine(spec, client=client, trace=Trace(sink=events), **options).run({})
    return result, events


class EstimatingClient(FakeClient):
    """A FakeClient that estimates every call at a fixed (tokens, cost) and remembers what it was asked."""

    def __init__(self, tokens: int, cost: float, **options: Any) -> None:
        super().__init__(default=lambda request: "ok", **options)
        self.estimated = (tokens, cost)
        self.asked: list[ModelRequest] = []

    def estimate(self, request: ModelRequest) -> tuple[int, float]:
        self.asked.append(request)
        return self.estimated


# ---- the engine, with an injected client -------------------------------------------------------------


def test_a_call_whose_reply_allowance_would_cross_the_token_limit_is_never_made():
    client = FakeClient(default=lambda request: "ok")
    result, events = run(one_step(LimitsSpec(tokens=50)), client, max_tokens=100)
    assert client.requests == []
    assert result.status == "failed"
    assert (result.failure.kind, result.failure.limit, result.failure.state) == ("limit", "tokens", "a")
    # no estimate of its own: a token per four characters of the prompt, plus max_tokens
    prompt = (len("You are worker.") + len(INSTRUCTION) + 3) // 4
    assert result.failure.message == (
        "limit tokens would be exceeded by the next model call in state 'a': the run used 0 tokens and the "
        f"call is estimated at {prompt + 100} ({prompt} prompt + 100 reply allowance); its limit is 50")
    ending = [e for e in events if e["event"] == "transition"][-1]
    assert (ending["from"], ending["to"], ending["cause"]) == ("a", None, "limit")
    assert ending["reason"] == result.failure.message
    assert [e["event"] for e in events][-1] == "run_end"


def test_without_max_tokens_only_the_prompt_is_counted():
    long_instruction = "Describe it. " * 40  # 520 characters: 130 tokens by the rough count
    refused, _ = run(one_step(LimitsSpec(tokens=100), long_instruction), FakeClient(default=lambda r: "ok"))
    assert refused.failure.limit == "tokens"
    assert "+ 0 reply allowance" in refused.failure.message
    made, _ = run(one_step(LimitsSpec(tokens=200), long_instruction), FakeClient(default=lambda r: "ok"))
    assert made.status == "final"


def test_the_clients_own_estimate_is_used_and_priced_against_the_cost_limit():
    # every call is estimated at $0.30 and really costs $0.10: $0.20 spent + $0.30 > $0.45 stops the third
    client = EstimatingClient(100, 0.30, cost_usd=0.10)
    result, _ = run(looping(LimitsSpec(cost_usd=0.45)), client, max_tokens=64)
    assert len(client.requests) == 2
    assert len(client.asked) == 3 and all(r.max_tokens == 64 for r in client.asked)
    assert (result.failure.kind, result.failure.limit) == ("limit", "cost_usd")
    assert result.failure.message == (
        "limit cost_usd would be exceeded by the next model call in state 'a': the run cost $0.2000 and the "
        "call is estimated at $0.3000 (100 tokens of fake/model); its limit is $0.4500")


def test_a_call_that_exactly_reaches_the_limit_is_still_made():
    client = EstimatingClient(15, 0.0, prompt_tokens=10, completion_tokens=5)
    result, _ = run(looping(LimitsSpec(tokens=45)), client)
    # 0+15, 15+15 and 30+15 fit within 45; the fourth call would start at 45 + 15
    assert len(client.requests) == 3
    assert result.failure.limit == "tokens"


def test_an_estimate_that_fails_falls_back_to_the_rough_count():
    class BrokenEstimate(FakeClient):
        def estimate(self, request: ModelRequest) -> tuple[int, float]:
            raise RuntimeError("no tokenizer for this model")

    client = BrokenEstimate(default=lambda request: "ok")
    result, _ = run(one_step(LimitsSpec(tokens=50)), client, max_tokens=100)
    assert client.requests == []
    assert result.failure.limit == "tokens"


def test_no_call_is_estimated_when_the_machine_has_no_token_or_cost_limit():
    client = EstimatingClient(10**9, 10.0)
    result, _ = run(one_step(LimitsSpec(steps=10, seconds=600)), client, max_tokens=100)
    assert result.status == "final"
    assert client.asked == []


def test_the_rough_count_covers_messages_tool_calls_tools_and_the_response_schema():
    request = ModelRequest(
        role="agent", state="s", model="m",
        messages=[{"role": "user", "content": "x" * 40},
                  {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "1", "type": "function",
                                   "function": {"name": "f" * 4, "arguments": "a" * 36}}]}],
        tools=[{"type": "function", "function": {"name": "f"}}], response_schema={"type": "object"})
    tools_chars = len(json.dumps(request.tools))
    schema_chars = len(json.dumps(request.response_schema))
    assert rough_tokens(request) == (40 + 40 + tools_chars + schema_chars + 3) // 4


# ---- the default client: litellm's tokenizer and price table ---------------------------------------------


def test_the_litellm_client_counts_with_the_models_tokenizer_and_prices_with_its_table():
    messages = [{"role": "user", "content": INSTRUCTION}]
    request = ModelRequest(role="agent", state="s", model="openai/gpt-4o-mini", messages=messages,
                           max_tokens=1000)
    tokens, cost = LiteLLMClient().estimate(request)
    prompt = litellm.token_counter(model="openai/gpt-4o-mini", messages=messages)
    assert tokens == prompt + 1000
    prompt_cost, reply_cost = litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=prompt,
                                                     completion_tokens=1000)
    assert cost == pytest.approx(prompt_cost + reply_cost)
    assert cost > 0


def test_the_litellm_client_prices_a_call_at_its_dearest_fallback():
    messages = [{"role": "user", "content": INSTRUCTION}]
    cheap = ModelRequest(role="agent", state="s", model="openai/gpt-4o-mini", messages=messages, max_tokens=500)
    with_fallback = ModelRequest(role="agent", state="s", model="openai/gpt-4o-mini", messages=messages,
                                 max_tokens=500, fallbacks=("openai/gpt-4o",))
    assert LiteLLMClient().estimate(with_fallback)[1] > LiteLLMClient().estimate(cheap)[1]


@pytest.mark.parametrize("model", ["scripted/test", "openai/a-local-model-with-no-price"])
def test_a_model_with_no_known_price_is_estimated_at_no_cost(model: str):
    request = ModelRequest(role="agent", state="s", model=model, messages=[{"role": "user", "content": "Hi."}],
                           max_tokens=10)
    tokens, cost = LiteLLMClient().estimate(request)
    assert tokens > 10 and cost == 0.0


class RecordingLiteLLMClient(LiteLLMClient):
    """The default client, keeping each estimate it makes."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.estimates: list[tuple[int, float]] = []

    def estimate(self, request: ModelRequest) -> tuple[int, float]:
        estimate = super().estimate(request)
        self.estimates.append(estimate)
        return estimate


def test_through_the_scripted_provider_a_run_stops_before_the_call_that_would_cross_its_token_limit():
    script = Script.from_json({"agent": {"a": ["A short answer."] * 20, "b": ["Another short answer."] * 20}})
    served = register_scripted_provider(script)
    client = RecordingLiteLLMClient(retry=RetryPolicy(max_retries=0))
    limit, allowance = 400, 40
    result, events = run(looping(LimitsSpec(tokens=limit)), client, max_tokens=allowance,
                         model_map={"*": "scripted/budget"})
    assert (result.failure.kind, result.failure.limit) == ("limit", "tokens")
    assert "would be exceeded by the next model call" in result.failure.message
    calls = [e for e in events if e["event"] == "llm_call"]
    assert calls and len(served.calls) == len(calls)
    # every call was estimated first; each made call fitted in what was left, and the last one did not
    assert len(client.estimates) == len(calls) + 1
    used = 0
    for call, (estimate, _cost) in zip(calls, client.estimates):
        assert used + estimate <= limit
        used += call["prompt_tokens"] + call["completion_tokens"]
    assert used == result.usage.tokens
    assert used + client.estimates[-1][0] > limit
    assert all(received["options"]["max_tokens"] == allowance for received in served.received)


def test_through_the_scripted_provider_nothing_reaches_the_provider_when_the_first_call_cannot_fit():
    served = register_scripted_provider(Script.from_json({"agent": {"a": ["never sent"]}}))
    client = LiteLLMClient(retry=RetryPolicy(max_retries=0))
    result, _ = run(one_step(LimitsSpec(tokens=100)), client, max_tokens=500,
                    model_map={"*": "scripted/budget"})
    assert result.failure.limit == "tokens"
    assert served.calls == [] and served.received == []


# ---- `statewright run` against a priced model over HTTP --------------------------------------------------

PRICED = """\
machine priced {
    model "openai/gpt-4o-mini"
    limits {
        cost_usd 0.0001
    }
    agent writer {
        prompt "You write."
    }
    start state write {
        agent writer
        do "Write one sentence."
        -> done
    }
    final state done
}
"""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        monkeypatch.setenv("OPENAI_API_BASE", running.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-0000")
        yield running


@pytest.mark.parametrize("max_tokens, sent", [("1000", 0), ("50", 1)])
def test_the_cost_limit_refuses_a_call_whose_priced_estimate_would_cross_it(
        server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], max_tokens: str,
        sent: int) -> None:
    # gpt-4o-mini's replies cost $0.60 per million tokens: 1000 of them alone are $0.0006 > $0.0001
    server.enqueue(Reply(text="One sentence."))
    spec = tmp_path / "priced.fsm"
    spec.write_text(PRICED, encoding="utf-8")
    code = cli.main(["run", str(spec), "--max-tokens", max_tokens, "--retries", "0",
                     "--workspace", str(tmp_path)])
    result = json.loads(capsys.readouterr().out)
    assert len(server.requests) == sent
    if sent:
        assert (code, result["status"], result["final_state"]) == (0, "final", "done")
    else:
        assert code == 1
        assert (result["failure"]["kind"], result["failure"]["limit"]) == ("limit", "cost_usd")
        assert "estimated at $0.0006" in result["failure"]["message"]
