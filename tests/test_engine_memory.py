"""Memory: each agent sees its own exchanges and what it listens to, through its memory policy — nothing else."""

from __future__ import annotations

from support.fake_client import FakeClient
from support.machines import agent, final, go, machine, state

from statewright.runtime.engine import Engine


def run(spec, answers):
    client = FakeClient(answers)
    result = Engine(spec, client=client).run({})
    assert result.ok, result.failure
    return client


def history(request):
    """The messages between the system prompt and the instruction."""
    return [(m["role"], m["content"]) for m in request.messages[1:-1]]


def test_an_agent_keeps_its_own_exchange_across_states():
    spec = machine(state("a", go("b"), do="First."), state("b", go("done"), do="Second."), final("done"))
    client = run(spec, {("agent", "a"): ["one"], ("agent", "b"): ["two"]})
    assert history(client.calls("agent", "b")[0]) == [("user", "First."), ("assistant", "one")]


def test_listeners_receive_the_output_tagged_with_its_state():
    spec = machine(state("draft", go("review"), tell=["critic"]), state("review", go("done"), agent="critic"),
                   final("done"))
    client = run(spec, {("agent", "draft"): ["A draft."], ("agent", "review"): ["ok"]})
    assert history(client.calls("agent", "review")[0]) == [("user", "[output of state 'draft']\nA draft.")]


def test_an_agent_that_does_not_listen_sees_nothing_of_other_agents():
    spec = machine(state("draft", go("review")), state("review", go("done"), agent="critic"), final("done"))
    client = run(spec, {("agent", "draft"): ["secret draft"], ("agent", "review"): ["ok"]})
    request = client.calls("agent", "review")[0]
    assert history(request) == []
    assert all("secret draft" not in m["content"] for m in request.messages)


def test_memory_none_sends_only_the_prompt_and_the_instruction():
    spec = machine(state("a", go("b"), tell=["critic"]), state("b", go("c"), agent="critic"),
                   state("c", go("done"), agent="critic"), final("done"),
                   agents=[agent("critic", memory="none")])
    client = run(spec, {("agent", "a"): ["x"], ("agent", "b"): ["y"], ("agent", "c"): ["z"]})
    assert history(client.calls("agent", "c")[0]) == []


def test_memory_last_n_sends_the_last_n_messages():
    spec = machine(state("a", go("b"), do="A."), state("b", go("c"), do="B."), state("c", go("done"), do="C."),
                   final("done"), agents=[agent("worker", memory="last", memory_count=3)])
    client = run(spec, {("agent", "a"): ["1"], ("agent", "b"): ["2"], ("agent", "c"): ["3"]})
    assert history(client.calls("agent", "c")[0]) == [("assistant", "1"), ("user", "B."), ("assistant", "2")]


def test_typed_outputs_reach_listeners_as_json():
    from pydantic import BaseModel

    class Verdict(BaseModel):
        ok: bool

    spec = machine(state("judge", go("report"), output=Verdict, tell=["writer"], agent="judge"),
                   state("report", go("done"), agent="writer"), final("done"))
    client = run(spec, {("agent", "judge"): ['{"ok": true}'], ("agent", "report"): ["done"]})
    assert history(client.calls("agent", "report")[0]) == [("user", "[output of state 'judge']\n{\"ok\": true}")]


def test_a_state_telling_its_own_agent_does_not_duplicate_the_exchange():
    spec = machine(state("a", go("b"), tell=["worker"], do="A."), state("b", go("done")), final("done"))
    client = run(spec, {("agent", "a"): ["1"], ("agent", "b"): ["2"]})
    assert history(client.calls("agent", "b")[0]) == [("user", "A."), ("assistant", "1")]
