"""Scripted replies: a Script answered in process by the ScriptedClient (test blocks, `--script`), with the
same request and response contract as the litellm client — proved here through litellm's real call path."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import types
from dataclasses import replace

import pytest
from support.scripted_litellm import register_scripted_provider

from statewright.runtime import scripted as scripted_module
from statewright.runtime.client import ModelError, ModelRequest, ToolCallRequest
from statewright.runtime.engine import Engine
from statewright.runtime.litellm_client import LiteLLMClient, RetryPolicy
from statewright.runtime.scripted import (
    Script,
    ScriptedClient,
    ScriptedReply,
    ScriptError,
    ScriptExhausted,
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
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def request(role: str = "agent", state: str = "draft", seq: int | None = 0, *, model: str = "openai/gpt-4o-mini",
            run_id: str = "run-1", **options) -> ModelRequest:
    identity = {"run_id": run_id, "state": state, "role": role}
    if seq is not None:
        identity["seq"] = seq
    return ModelRequest(role=role, state=state, model=model, messages=MESSAGES,
                        metadata={"statewright": identity}, **options)


def ask(client: ScriptedClient, role: str, state: str, seq: int | None, **options) -> str:
    return client.complete(request(role, state, seq, **options)).content


def client_for(data: dict) -> ScriptedClient:
    return ScriptedClient(Script.from_json(data))


# --- the scripted client ------------------------------------------------------------------------------

def test_replies_come_in_order_for_each_role_and_state():
    client = client_for({
        "agent": {"draft": ["first draft", "second draft"], "review": ["looks fine"]},
        "verifier": {"draft": [{"choice": "none", "reason": "ok", "feedback": ""}]},
    })

    assert ask(client, "agent", "draft", 0) == "first draft"
    assert ask(client, "agent", "review", 0) == "looks fine"
    assert ask(client, "agent", "draft", 1) == "second draft"
    assert json.loads(ask(client, "verifier", "draft", 0)) == {"choice": "none", "reason": "ok", "feedback": ""}


def test_the_seq_from_the_core_picks_the_reply_so_a_resumed_run_gets_the_right_one():
    client = client_for({"agent": {"draft": ["first", "second", "third"]}})

    # a resumed run whose first two draft calls completed before the crash asks for #3 directly
    assert ask(client, "agent", "draft", 2) == "third"
    assert client.calls == [("agent", "draft", 2)]


def test_without_a_seq_the_next_unserved_reply_answers():
    client = client_for({"agent": {"draft": ["first", "second"]}})

    assert [ask(client, "agent", "draft", None), ask(client, "agent", "draft", None)] == ["first", "second"]


def test_values_that_are_not_strings_are_sent_as_json():
    client = client_for({"agent": {"review": [{"score": 90, "fixes": []}, ["a", "b"], 42, None]}})

    replies = [ask(client, "agent", "review", n) for n in range(4)]

    assert replies == ['{"score": 90, "fixes": []}', '["a", "b"]', "42", "null"]


def test_usage_numbers_are_plausible_and_nothing_is_charged():
    response = client_for({"agent": {"draft": ["x" * 40]}}).complete(request())

    assert response.completion_tokens == 10
    assert response.prompt_tokens == len(MESSAGES[0]["content"]) // 4
    assert response.cost_usd == 0.0 and response.attempts == 1
    assert response.model == "openai/gpt-4o-mini"  # the model the request named: scripted runs keep names


def test_a_missing_reply_is_a_model_error_that_names_the_call_and_what_the_script_has():
    client = client_for({"agent": {"review": ["one", "two"]}})

    with pytest.raises(ScriptExhausted) as caught:
        ask(client, "agent", "review", 2)

    assert isinstance(caught.value, ModelError) and caught.value.scripted  # the core reports kind "script"
    assert str(caught.value) == "script has no reply #3 for agent of state 'review' (it has 2)"
    assert client.calls == []


def test_every_answered_call_is_recorded_and_logged_to_the_script_log(tmp_path, monkeypatch):
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("STATEWRIGHT_SCRIPT_LOG", str(log))
    client = client_for({"agent": {"draft": ["a", "b"]}, "verifier": {"draft": ["{}"]}})

    for role, seq in (("agent", 0), ("verifier", 0), ("agent", 1)):
        client.complete(request(role, "draft", seq, run_id="r7"))

    assert client.calls == [("agent", "draft", 0), ("verifier", "draft", 0), ("agent", "draft", 1)]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["role"], x["state"], x["seq"], x["run_id"]) for x in lines] == [
        ("agent", "draft", 0, "r7"), ("verifier", "draft", 0, "r7"), ("agent", "draft", 1, "r7")]


def test_a_delay_is_slept_before_answering(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(scripted_module, "time", types.SimpleNamespace(sleep=slept.append,
                                                                       perf_counter=lambda: 0.0))
    client = client_for({"agent": {"draft": [{"value": "slow", "delay": 0.25}, "quick"]}})

    assert [ask(client, "agent", "draft", 0), ask(client, "agent", "draft", 1)] == ["slow", "quick"]
    assert slept == [0.25]


def test_the_async_path_answers_and_awaits_the_delay(monkeypatch):
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(scripted_module, "asyncio", types.SimpleNamespace(sleep=fake_sleep))
    client = client_for({"agent": {"draft": [{"value": {"ok": True}, "delay": 0.5}]}})

    response = asyncio.run(client.acomplete(request()))

    assert response.content == '{"ok": true}'
    assert slept == [0.5]


def test_a_tool_calls_reply_answers_as_native_tool_calls():
    client = client_for({"agent": {"draft": [{"tool_calls": [{"name": "lookup", "arguments": {"q": "FSM"}}]}]}})

    response = client.complete(request(tools=TOOLS))

    assert response.tool_calls == [ToolCallRequest(id="call_0_0", name="lookup", arguments='{"q": "FSM"}')]
    assert response.content == ""


def test_scripted_runs_never_import_litellm():
    code = (
        "import sys\n"
        "from statewright.runtime.scripted import Script, ScriptedClient\n"
        "from statewright.runtime.client import ModelRequest\n"
        "c = ScriptedClient(Script.from_json({'agent': {'s': ['hi']}}))\n"
        "r = c.complete(ModelRequest('agent', 's', 'openai/x', [], metadata={'statewright': {'seq': 0}}))\n"
        "assert r.content == 'hi'\n"
        "print('litellm' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# --- one contract: the scripted client answers as litellm does ----------------------------------------

CONTRACT_CASES = [
    ("a text reply", "A haiku.", {}),
    ("a JSON reply to a typed request", {"score": 90}, {"response_schema": SCHEMA, "schema_name": "Critique"}),
    ("a list reply", ["a", "b"], {}),
    ("tool calls", {"tool_calls": [{"name": "lookup", "arguments": {"q": "FSM"}},
                                   {"name": "lookup", "arguments": {}}]}, {"tools": TOOLS}),
    ("a final answer with tools offered", "Done.", {"tools": TOOLS, "response_schema": SCHEMA}),
    ("text that is not ASCII", "état — ✓", {"temperature": 0.2, "max_tokens": 50}),
]


@pytest.mark.parametrize("value, options", [c[1:] for c in CONTRACT_CASES], ids=[c[0] for c in CONTRACT_CASES])
def test_the_scripted_client_answers_exactly_as_the_litellm_client_through_litellms_call_path(value, options):
    script = Script({("agent", "draft"): [ScriptedReply(value)], ("verifier", "draft"): [ScriptedReply(value)]})
    register_scripted_provider(script)
    for role in ("agent", "verifier"):
        through_litellm = LiteLLMClient(retry=RetryPolicy(max_retries=0)).complete(
            request(role, model="scripted/contract", **options))
        in_process = ScriptedClient(script).complete(request(role, model="scripted/contract", **options))
        assert replace(in_process, latency_ms=0.0) == replace(through_litellm, latency_ms=0.0), role


def test_the_litellm_client_raises_script_exhausted_itself_without_retrying():
    register_scripted_provider(Script.from_json({"agent": {"review": ["only"]}}))
    client = LiteLLMClient(retry=RetryPolicy(max_retries=3, initial_delay=0.01, jitter=0))
    lonely = request("agent", "review", 1, model="scripted/test", fallbacks=("scripted/other",))

    with pytest.raises(ScriptExhausted) as caught:
        client.complete(lonely)

    assert str(caught.value) == "script has no reply #2 for agent of state 'review' (it has 1)"


# --- scripts -------------------------------------------------------------------------------------------

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
        {"choice": 0, "reason": "scripted verdict", "feedback": ""},  # none: 0, never a condition's text
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
    # the spec's own model names: the script answers for each of them, nothing is renamed
    assert models == {"openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"} and roles == {"agent", "verifier"}


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
    test = block("loops", SENT_BACK, expect_failure="steps", allow_unused=True)  # the limit stops it early
    machine = review_machine(test)
    machine = replace(machine, limits=LimitsSpec(steps=2))

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


def test_tests_whose_names_clean_to_one_file_name_write_a_trace_each(tmp_path):
    # "good draft" and "good-draft" (and "good draft!") had written into one file; a long name was a file name
    # the system refused
    names = ["good draft", "good-draft", "good draft!", "x" * 300]
    machine = review_machine(*(block(n, expect_final="publish") for n in names))
    outcomes = run_tests(machine, trace_dir=str(tmp_path / "traces"))
    assert [o.passed for o in outcomes] == [True] * 4
    files = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert len(files) == 4 and "good-draft.jsonl" in files and all(len(f) <= 106 for f in files)
    assert all(len(p.read_text().splitlines()) > 0 and p.read_text().count('"run_start"') == 1
               for p in (tmp_path / "traces").iterdir())


# --- isolation: every run answers from its own script -------------------------------------------------

def test_two_concurrent_runs_with_different_scripts_each_get_their_own_replies():
    writer = AgentSpec(name="writer", prompt="You write.", model="openai/gpt-4o-mini")
    machine = MachineSpec(
        name="m", description="", inputs=(), model="openai/gpt-4o-mini", verifier_model="openai/gpt-4o-mini",
        temperature=None, limits=LimitsSpec(), agents={"writer": writer},
        states={"draft": StateSpec("draft", "agent", agent="writer", instruction="Write.",
                                   transitions=(TransitionSpec("always", "again"),)),
                "again": StateSpec("again", "agent", agent="writer", instruction="Again.",
                                   transitions=(TransitionSpec("always", "done"),)),
                "done": StateSpec("done", "final")},
        start="draft")
    scripts = {name: Script.from_json({"agent": {
        "draft": [{"value": f"{name} one", "delay": 0.05}], "again": [{"value": f"{name} two", "delay": 0.01}]}})
        for name in ("left", "right")}

    async def both():
        engines = {name: Engine(machine, script=script) for name, script in scripts.items()}
        return await asyncio.gather(*(engines[name].arun({}, run_id=name) for name in ("left", "right")))

    left, right = asyncio.run(both())
    assert (left.ok, right.ok) == (True, True)
    assert left.outputs == {"draft": "left one", "again": "left two"}
    assert right.outputs == {"draft": "right one", "again": "right two"}


def test_one_engine_serves_concurrent_runs_of_one_script_without_mixing_them():
    test = block("good draft publishes", expect_final="publish")
    machine = review_machine(test)
    engine = Engine(machine, script=Script.from_test(machine, test))

    async def many():
        return await asyncio.gather(*(engine.arun({"topic": f"t{i}"}, run_id=f"r{i}") for i in range(20)))

    results = asyncio.run(many())
    assert all(r.ok and r.path == ["draft", "review", "publish"] for r in results)
    assert sorted(r.run_id for r in results) == sorted(f"r{i}" for i in range(20))
