"""Limits: steps, tokens, cost and wall time end a run with a typed failure naming the limit."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from support.fake_client import FakeClient
from support.machines import final, go, machine, state

from statewright.runtime import engine as engine_module
from statewright.runtime.engine import Engine
from statewright.runtime.spec import LimitsSpec
from statewright.runtime.trace import Trace


def looping(limits: LimitsSpec):
    return machine(state("a", go("b")), state("b", go("a")), final("never"), limits=limits)


class UnestimatedClient(FakeClient):
    """Estimates every call at nothing: only the usage already spent can stop a run (the estimates before
    each call are tested in test_budget.py)."""

    def estimate(self, request):
        return 0, 0.0


def run(spec, client):
    events: list[dict] = []
    result = Engine(spec, client=client, trace=Trace(sink=events)).run({})
    return result, events


def test_the_step_limit_ends_the_run_before_the_step_that_would_exceed_it():
    client = FakeClient(default=lambda request: "x")
    result, events = run(looping(LimitsSpec(steps=5)), client)
    assert result.status == "failed"
    assert (result.failure.kind, result.failure.limit) == ("limit", "steps")
    assert result.path == ["a", "b", "a", "b", "a"]
    assert len(client.requests) == 5
    last = [e for e in events if e["event"] == "transition"][-1]
    assert (last["from"], last["to"], last["cause"]) == ("b", None, "limit")
    assert "steps" in result.failure.message


@pytest.mark.parametrize("limits, name, calls", [
    (LimitsSpec(tokens=45), "tokens", 3),  # 15 tokens per call: the 4th call would start at 45
    (LimitsSpec(cost_usd=0.25), "cost_usd", 3),  # 0.1 per call: 0.3 >= 0.25 after three
])
def test_usage_limits_stop_the_run_before_a_call_once_reached(limits, name, calls):
    client = UnestimatedClient(default=lambda request: "x", prompt_tokens=10, completion_tokens=5, cost_usd=0.1)
    result, _ = run(looping(limits), client)
    assert (result.failure.kind, result.failure.limit) == ("limit", name)
    assert len(client.requests) == calls


class Out(BaseModel):
    n: int


def test_usage_limits_apply_between_the_calls_of_one_step():
    spec = machine(state("s", go("done"), output=Out, retries=5), final("done"), limits=LimitsSpec(tokens=20))
    client = UnestimatedClient({("agent", "s"): ["bad", "bad", "bad"]})
    result, _ = run(spec, client)
    assert result.failure.limit == "tokens"
    assert len(client.requests) == 2  # 15 + 15 >= 20: no third attempt


def test_the_seconds_limit_is_checked_before_each_model_call_and_bounds_its_timeout(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(engine_module.time, "monotonic", lambda: clock[0])

    def thirty_seconds(request):
        clock[0] += 30.0
        return "x"

    client = FakeClient(default=thirty_seconds)
    result, _ = run(looping(LimitsSpec(seconds=50)), client)
    assert (result.failure.kind, result.failure.limit) == ("limit", "seconds")
    assert len(client.requests) == 2  # at 0 s and 30 s; at 60 s the limit is reached
    assert [r.timeout for r in client.requests] == [50.0, 20.0]
