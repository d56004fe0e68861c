"""The scripted provider: replies per (role, state) in order, answered through litellm's own call path."""

from __future__ import annotations

import asyncio
import json
import types

import litellm
import pytest

from statewright.runtime import scripted as scripted_module
from statewright.runtime.client import ModelError, ModelRequest, ToolCallRequest
from statewright.runtime.litellm_client import LiteLLMClient, RetryPolicy
from statewright.runtime.scripted import (
    Script,
    ScriptedReply,
    ScriptError,
    ScriptExhausted,
    current_script,
    register_scripted_provider,
    scripted_provider,
)
from statewright.runtime.spec import (
    AgentSpec,
    InputSpec,
    LimitsSpec,
    MachineSpec,
    StateSpec,
    TestSpec,
    TransitionSpec,
)
from statewright.runtime.testing import format_outcome, run_test, run_tests

MESSAGES = [{"role": "user", "content": "Write a haiku about state machines."}]


def ask(role: str, state: str, seq: int | None, *, run_id: str = "run-1") -> str:
    """One litellm.completion call the way statewright makes it, returning the reply text."""
    identity = {"run_id": run_id, "state": state, "role": role}
    if seq is not None:
        identity["seq"] = seq
    response = litellm.completion(model="scripted/test", messages=MESSAGES,
                                  metadata={"statewright": identity})
    return response.choices[0].message.content


def install(data: dict) -> Script:
    script = Script.from_json(data)
    register_scripted_provider(script)
    return script


def test_replies_come_in_order_for_each_role_and_state():
    install({
        "agent": {"draft": ["first draft", "second draft"], "review": ["looks fine"]},
        "verifier": {"draft": [{"choice": "none", "reason": "ok", "feedback": ""}]},
    })

    assert ask("agent", "draft", 0) == "first draft"
    assert ask("agent", "review", 0) == "looks fine"
    assert ask("agent", "draft", 1) == "second draft"
    assert json.loads(ask("verifier", "draft", 0)) == {"choice": "none", "reason": "ok", "feedback": ""}


def test_the_seq_from_the_engine_picks_the_reply_so_a_resumed_run_gets_the_right_one():
    script = install({"agent": {"draft": ["first", "second", "third"]}})

    # a resumed run whose first two draft calls completed before the crash asks for #3 directly
    assert ask("agent", "draft", 2) == "third"
    assert script.calls == [("agent", "draft", 2)]


def test_without_a_seq_the_next_unserved_reply_answers():
    install({"agent": {"draft": ["first", "second"]}})

    assert [ask("agent", "draft", None), ask("agent", "draft", None)] == ["first", "second"]


def test_values_that_are_not_strings_are_sent_as_json():
    install({"agent": {"review": [{"score": 90, "fixes": []}, ["a", "b"], 42, None]}})

    replies = [ask("agent", "review", n) for n in range(4)]

    assert replies == ['{"score": 90, "fixes": []}', '["a", "b"]', "42", "null"]


def test_usage_numbers_are_plausible():
    install({"agent": {"draft": ["x" * 40]}})

    response = litellm.completion(model="scripted/test", messages=MESSAGES,
                                  metadata={"statewright": {"role": "agent", "state": "draft", "seq": 0}})

    assert response.usage.completion_tokens == 10
    assert response.usage.prompt_tokens == len(MESSAGES[0]["content"]) // 4
    assert response.usage.total_tokens == response.usage.prompt_tokens + 10


def test_a_missing_reply_names_the_call_and_what_the_script_has():
    install({"agent": {"review": ["one", "two"]}})

    with pytest.raises(Exception) as caught:
        ask("agent", "review", 2)

    exhausted = caught.value
    while not isinstance(exhausted, ScriptExhausted):  # litellm wraps what a provider raises
        exhausted = exhausted.__cause__ or exhausted.__context__
    assert str(exhausted) == "script has no reply #3 for agent of state 'review' (it has 2)"


def test_the_client_raises_script_exhausted_itself_without_retrying():
    script = install({"agent": {"review": ["only"]}})
    client = LiteLLMClient(retry=RetryPolicy(max_retries=3, initial_delay=0.01, jitter=0))
    request = ModelRequest(role="agent", state="review", model="scripted/test", messages=MESSAGES,
                           fallbacks=("scripted/other",),
                           metadata={"statewright": {"role": "agent", "state": "review", "seq": 1}})

    with pytest.raises(ScriptExhausted) as caught:
        client.complete(request)

    assert isinstance(caught.value, ModelError)  # caught where model failures are; reported as "script"
    assert str(caught.value) == "script has no reply #2 for agent of state 'review' (it has 1)"
    assert script.calls == []


def test_a_call_without_statewright_metadata_is_refused_not_retried():
    install({"agent": {"draft": ["x"]}})

    with pytest.raises(litellm.BadRequestError, match="needs metadata"):
        litellm.completion(model="scripted/test", messages=MESSAGES)


def test_every_answered_call_is_recorded_and_logged_to_the_script_log(tmp_path, monkeypatch):
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("STATEWRIGHT_SCRIPT_LOG", str(log))
    script = install({"agent": {"draft": ["a", "b"]}, "verifier": {"draft": ["{}"]}})

    ask("agent", "draft", 0, run_id="r7")
    ask("verifier", "draft", 0, run_id="r7")
    ask("agent", "draft", 1, run_id="r7")

    assert script.calls == [("agent", "draft", 0), ("verifier", "draft", 0), ("agent", "draft", 1)]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["role"], x["state"], x["seq"], x["run_id"]) for x in lines] == [
        ("agent", "draft", 0, "r7"), ("verifier", "draft", 0, "r7"), ("agent", "draft", 1, "r7")]


def test_a_delay_is_slept_before_answering(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(scripted_module, "time", types.SimpleNamespace(sleep=slept.append))
    install({"agent": {"draft": [{"value": "slow", "delay": 0.25}, "quick"]}})

    assert [ask("agent", "draft", 0), ask("agent", "draft", 1)] == ["slow", "quick"]
    assert slept == [0.25]


def test_the_async_path_answers_and_awaits_the_delay(monkeypatch):
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(scripted_module, "asyncio", types.SimpleNamespace(sleep=fake_sleep))
    install({"agent": {"draft": [{"value": {"ok": True}, "delay": 0.5}]}})

    response = asyncio.run(litellm.acompletion(
        model="scripted/test", messages=MESSAGES,
        metadata={"statewright": {"role": "agent", "state": "draft", "seq": 0}}))

    assert response.choices[0].message.content == '{"ok": true}'
    assert slept == [0.5]


def test_the_statewright_client_passes_its_metadata_through_to_the_provider():
    script = install({"agent": {"draft": ["zero", "one"]}})
    request = ModelRequest(role="agent", state="draft", model="scripted/test", messages=MESSAGES,
                           metadata={"statewright": {"run_id": "r1", "role": "agent", "state": "draft",
                                                     "seq": 1}})

    response = LiteLLMClient().complete(request)

    assert response.content == "one"
    assert response.model == "scripted/test"
    assert response.cost_usd == 0.0
    assert response.prompt_tokens > 0 and response.completion_tokens > 0
    assert script.calls == [("agent", "draft", 1)]


def test_a_tool_calls_reply_answers_as_native_tool_calls():
    install({"agent": {"draft": [{"tool_calls": [{"name": "lookup", "arguments": {"q": "FSM"}}]}]}})
    request = ModelRequest(role="agent", state="draft", model="scripted/test", messages=MESSAGES,
                           tools=[{"type": "function", "function": {"name": "lookup", "parameters": {}}}],
                           metadata={"statewright": {"role": "agent", "state": "draft", "seq": 0}})

    response = LiteLLMClient().complete(request)

    assert response.tool_calls == [ToolCallRequest(id="call_0_0", name="lookup", arguments='{"q": "FSM"}')]


def test_registering_again_replaces_the_script_and_keeps_other_custom_providers():
    other = {"provider": "someone-else", "custom_handler": object()}
    litellm.custom_provider_map = [*litellm.custom_provider_map, other]
    try:
        install({"agent": {"draft": ["old"]}})
        install({"agent": {"draft": ["new"]}})

        assert ask("agent", "draft", 0) == "new"
        assert [entry["provider"] for entry in litellm.custom_provider_map].count("scripted") == 1
        assert other in litellm.custom_provider_map
    finally:
        litellm.custom_provider_map = [e for e in litellm.custom_provider_map if e is not other]


def test_a_script_file_rejects_unknown_roles_and_shapes():
    with pytest.raises(ScriptError, match="unknown script role 'critic'"):
        Script.from_json({"critic": {"draft": ["x"]}})
    with pytest.raises(ScriptError, match="must be a list of replies"):
        Script.from_json({"agent": {"draft": "x"}})


def test_a_value_object_without_delay_is_a_plain_reply():
    script = Script.from_json({"agent": {"count": [{"value": 3}, {"value": 4, "delay": 0}]}})

    assert script.replies("agent", "count") == [ScriptedReply({"value": 3}), ScriptedReply(4, 0.0)]


def machine_with(states: dict[str, StateSpec], tests: tuple[TestSpec, ...] = ()) -> MachineSpec:
    writer = AgentSpec(name="writer", prompt="You write.", model="openai/gpt-4o-mini")
    return MachineSpec(name="m", description="", inputs=(), model="openai/gpt-4o-mini",
                       verifier_model="openai/gpt-4o-mini", temperature=None, limits=LimitsSpec(),
                       agents={"writer": writer}, states=states, start=next(iter(states)), tests=tests)


def test_a_test_block_maps_replies_to_agents_or_tools_and_verdicts_to_the_verifier():
    machine = machine_with({
        "draft": StateSpec(name="draft", kind="agent", agent="writer"),
        "count": StateSpec(name="count", kind="agent", agent="writer", output_wrapped=True),
        "run_tests": StateSpec(name="run_tests", kind="action"),
        "done": StateSpec(name="done", kind="final"),
    })
    test = TestSpec(name="t", inputs={}, steps=(
        ("reply", "draft", "A draft."),
        ("verdict", "draft", "the draft has unsourced claims"),
        ("reply", "run_tests", {"passed": True}),
        ("reply", "count", 3),
        ("reply", "count", {"value": 4}),
        ("reply", "draft", "Second draft."),
        ("verdict", "draft", None),
    ))

    script = Script.from_test(machine, test)

    assert [r.value for r in script.replies("agent", "draft")] == ["A draft.", "Second draft."]
    assert [r.value for r in script.replies("verifier", "draft")] == [
        {"choice": "the draft has unsourced claims", "reason": "scripted verdict", "feedback": ""},
        {"choice": "none", "reason": "scripted verdict", "feedback": ""},
    ]
    assert [r.value for r in script.replies("tool", "run_tests")] == [{"passed": True}]
    assert script.has("tool", "run_tests") and not script.has("agent", "run_tests")
    # a state whose output the model wraps in {"value": ...} gets its replies wrapped, once
    assert [r.value for r in script.replies("agent", "count")] == [{"value": 3}, {"value": 4}]


# --- test blocks: run_test / run_tests / format_outcome -------------------------------------------------

def review_machine(*tests: TestSpec) -> MachineSpec:
    """draft -> review; the verifier can send the draft back (at most twice); otherwise publish."""
    writer = AgentSpec(name="writer", prompt="You write.", model="openai/gpt-4o-mini")
    critic = AgentSpec(name="critic", prompt="You review.", model="anthropic/claude-haiku-4-5",
                       fallbacks=("openai/gpt-4o",))
    states = {
        "draft": StateSpec(name="draft", kind="agent", agent="writer", instruction="Write about {{ topic }}.",
                           tell=("critic",), transitions=(TransitionSpec("always", "review"),)),
        "review": StateSpec(name="review", kind="agent", agent="critic", instruction="Review the draft.",
                            transitions=(
                                TransitionSpec("condition", "draft", text="the draft has unsourced claims",
                                               max=2),
                                TransitionSpec("always", "publish"))),
        "publish": StateSpec(name="publish", kind="final", result="{{ draft.output }}"),
    }
    return MachineSpec(name="review_pipeline", description="", inputs=(InputSpec("topic", str),),
                       model="openai/gpt-4o-mini", verifier_model="openai/gpt-4o-mini", temperature=None,
                       limits=LimitsSpec(), agents={"writer": writer, "critic": critic}, states=states,
                       start="draft", tests=tests)


FIRST_PASS = (("reply", "draft", "A draft."), ("reply", "review", "Fine."), ("verdict", "review", None))
SENT_BACK = (("reply", "draft", "A draft."), ("reply", "review", "No sources."),
             ("verdict", "review", "the draft has unsourced claims"),
             ("reply", "draft", "A sourced draft."), ("reply", "review", "Fine."),
             ("verdict", "review", None))


def block(name: str, steps=FIRST_PASS, **expect) -> TestSpec:
    if "expect_result" in expect:
        expect["has_expect_result"] = True
    return TestSpec(name=name, inputs={"topic": "FSMs"}, steps=steps, origin="review.fsm:40:5", **expect)


def test_a_test_block_that_matches_its_run_passes():
    test = block("good draft publishes", expect_path=("draft", "review", "publish"), expect_final="publish",
                 expect_result="A draft.")

    outcome = run_test(review_machine(test), test)

    assert outcome.passed, outcome.messages
    assert outcome.actual_path == ["draft", "review", "publish"]
    assert outcome.result is not None and outcome.result.result == "A draft."
    assert format_outcome(outcome) == "PASS  good draft publishes"


def test_scripted_verdicts_drive_a_traceback():
    test = block("sent back once", SENT_BACK, expect_path=("draft", "review", "draft", "review", "publish"),
                 expect_result="A sourced draft.")

    outcome = run_test(review_machine(test), test)

    assert outcome.passed, outcome.messages


def test_every_model_of_the_machine_answers_from_the_script(tmp_path):
    test = block("sent back once", SENT_BACK, expect_final="publish")

    run_test(review_machine(test), test, trace_path=str(tmp_path / "t.jsonl"))

    calls = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    models = {c["model"] for c in calls if c["event"] == "llm_call"}
    roles = {c["role"] for c in calls if c["event"] == "llm_call"}
    assert models == {"scripted/test"} and roles == {"agent", "verifier"}


def test_a_wrong_path_fails_and_shows_both_paths_side_by_side():
    test = block("skips review", expect_path=("draft", "publish"))

    outcome = run_test(review_machine(test), test)

    assert not outcome.passed
    assert format_outcome(outcome).splitlines() == [
        "FAIL  skips review  (review.fsm:40:5)",
        "      expected path    actual path",
        "      draft            draft",
        "  >>  publish          review",
        "      -                publish",
        "      the path differs from the expected path",
    ]


def test_a_script_that_runs_out_fails_the_test_without_raising():
    test = block("too few replies", (("reply", "draft", "A draft."),), expect_final="publish")

    outcome = run_test(review_machine(test), test)

    assert not outcome.passed
    assert outcome.actual_path == ["draft", "review"]
    assert outcome.messages[0] == ("the run failed (script): state 'review': "
                                   "script has no reply #1 for agent of state 'review' (it has 0)")


def test_an_expected_failure_kind_passes_only_when_the_run_fails_that_way():
    runs_out = block("runs out", (("reply", "draft", "A draft."),), expect_failure="script")
    wrong_kind = block("wrong kind", (("reply", "draft", "A draft."),), expect_failure="steps")
    no_failure = block("no failure", expect_failure="script")

    outcomes = run_tests(review_machine(runs_out, wrong_kind, no_failure))

    assert [o.passed for o in outcomes] == [True, False, False]
    assert outcomes[1].messages[0].startswith("expected failure steps, got (script): ")
    assert outcomes[2].messages == ["expected a failure (script), but the run ended in 'publish'"]


def test_a_step_limit_failure_matches_the_limit_name():
    test = block("loops", SENT_BACK, expect_failure="steps")
    machine = review_machine(test)
    machine = MachineSpec(**{**machine.__dict__, "limits": LimitsSpec(steps=2)})

    outcome = run_test(machine, test)

    assert outcome.passed, outcome.messages
    assert outcome.result.failure.kind == "limit" and outcome.result.failure.limit == "steps"


def test_a_different_result_is_reported_with_both_values():
    test = block("wrong result", expect_result="Another draft.")

    outcome = run_test(review_machine(test), test)

    assert outcome.messages == ['expected result "Another draft.", got "A draft."']


def test_run_tests_filters_by_name_and_writes_one_trace_per_test(tmp_path):
    machine = review_machine(block("good draft publishes", expect_final="publish"),
                             block("sent back once", SENT_BACK, expect_final="publish"),
                             block("good draft twice", expect_final="publish"))

    outcomes = run_tests(machine, trace_dir=str(tmp_path / "traces"), name_filter="good*")

    assert [o.name for o in outcomes] == ["good draft publishes", "good draft twice"]
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == [
        "good-draft-publishes.jsonl", "good-draft-twice.jsonl"]
    assert [o.name for o in run_tests(machine, name_filter="sent back")] == ["sent back once"]


# --- who answers for the provider: scripted_provider / current_script ------------------------------------

def test_scripted_provider_answers_from_its_script_inside_the_block_and_restores_the_one_before():
    outer = install({"agent": {"draft": ["from the outer script"]}})
    inner = Script.from_json({"agent": {"draft": ["from the inner script"]}})

    with scripted_provider(inner) as active:
        assert active is inner and current_script() is inner
        assert ask("agent", "draft", 0) == "from the inner script"

    assert current_script() is outer
    assert ask("agent", "draft", 0) == "from the outer script"


def test_scripted_provider_restores_the_script_before_when_the_block_raises():
    outer = install({"agent": {"draft": ["outer"]}})

    with pytest.raises(RuntimeError, match="inside the block"), scripted_provider(Script()):
        raise RuntimeError("inside the block")

    assert current_script() is outer


def test_after_a_block_with_no_script_before_the_provider_has_none():
    handler = scripted_module._SCRIPTED_PROVIDER["handler"]
    install({})
    handler.script = None  # as before any script was registered

    with scripted_provider(Script.from_json({"agent": {"draft": ["inside"]}})):
        assert ask("agent", "draft", 0) == "inside"

    assert current_script() is None


def test_running_a_test_block_leaves_the_script_registered_before_it_answering():
    outer = install({"designer": {"machine": ["the designer's machine"]}})
    test = block("good draft publishes", expect_final="publish")

    assert run_test(review_machine(test), test).passed

    assert current_script() is outer
    assert ask("designer", "machine", 0) == "the designer's machine"

