"""An agent's step: its instruction and memory sent to its model, a typed reply validated (bad replies fed
back and asked again, within the state's `retries`), and the tool calls the model asks for run between its
replies (at most `tool_rounds` rounds, MAX_TOOL_ROUNDS without it). A call of a tool the state asks before
waits for a person's approval (approvals.py); the step keeps where its tool loop is (`ToolLoop`), so a run
resumed at such a call continues the loop there. `AgentSteps` is the core's part that does this; RunCore
(core.py) mixes it in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .approvals import ApprovalRecord, ToolLoop, approval_key, rejection_text
from .effects import CallTool, DescribeTools, ToolOutcome
from .plan import AgentPlan, StatePlan, output_label, output_text
from .result import Failure, RunFailed
from .run_state import Run, Steps
from .spec import MachineSpec
from .structured import ReplyError, parse_typed_reply, to_text
from .untrusted import read_json

MAX_TOOL_ROUNDS = 8


class AgentSteps:
    """The core's steps of agent states (mixed into RunCore)."""

    if TYPE_CHECKING:  # what these steps use of the rest of the core (core.py)
        _plans: Mapping[str, StatePlan]
        machine: MachineSpec

        def _render(self, run: Run, source: str, state: str, context: Mapping[str, Any] | None = None) -> str: ...
        def _call_model(self, run: Run, role: str, state: str, key: str, agent: AgentPlan | None,
                        messages: list[dict[str, Any]], schema: dict[str, Any] | None, schema_name: str,
                        tools: list[dict[str, Any]] | None) -> Steps: ...
        def _approve(self, run: Run, plan: Any, tool: str, call: Any, arguments: dict[str, Any],
                     parameters: dict[str, Any], loop: ToolLoop) -> Steps: ...

    def _agent_step(self, run: Run, plan: StatePlan, feedback: str | None) -> Steps:
        agent = plan.agent
        assert agent is not None
        waiting: ApprovalRecord | None = run.approvals.get(approval_key(plan.name, run.item)) if run.approvals else None
        if waiting is not None:  # a run resumed at a tool call that waited for a person: the loop goes on
            loop = waiting.loop
            instruction, user_text, messages = loop.instruction, loop.user_text, loop.conversation
        else:
            instruction = plan.instruction if plan.constant else self._render(run, plan.instruction, plan.name)
            if run.observe is not None and run.item is None:  # (a map's elements: at their join, together)
                run.observe("instruction", plan.name, run.visits[plan.name], instruction)
            user_text = instruction if feedback is None else f"{instruction}\n\n{feedback}"
            system = run.system_prompts.get(agent.name)
            if system is None:
                system = self._render(run, agent.prompt, plan.name, run.inputs)
                run.system_prompts[agent.name] = system
            messages = [{"role": "system", "content": system}, *run.memories[agent.name].view(),
                        {"role": "user", "content": user_text}]
            loop = ToolLoop(instruction, user_text)
        memory = run.memories[agent.name]
        if plan.output is None:
            if agent.tools:
                loop.conversation = messages
                response = yield from self._converse(run, plan, messages, loop, waiting)
            else:  # (the common case, without the tool loop's frame)
                response = yield from self._call_model(run, "agent", plan.name, plan.agent_key, agent, messages,
                                                       None, plan.schema_name, None)
            output: Any = response.content
            reply_text = output
        else:
            model, wrapped = plan.output, plan.wrapped
            resumed = [waiting] if waiting is not None else []

            def converse(conversation: list[dict[str, Any]], attempt: int) -> Steps:
                loop.conversation, loop.attempt = conversation, attempt
                return self._converse(run, plan, conversation, loop, resumed.pop() if resumed else None)

            try:
                output, _response = yield from self._ask_until_valid(
                    run, plan, "agent", messages, lambda text: parse_typed_reply(model, wrapped, text), converse,
                    start=loop.attempt if waiting is not None else 0)
            except ReplyError as exc:
                raise RunFailed(Failure(
                    "output",
                    f"state '{plan.name}': the reply did not match {output_label(plan)} after "
                    f"{exc.attempts} attempt(s); last error: {exc.last_error}",
                    state=plan.name, origin=plan.spec.origin,
                )) from None
            reply_text = output_text(plan, output)
        memory.keep_exchange(user_text, reply_text)
        return output, instruction

    def _ask_until_valid(self, run: Run, plan: StatePlan, role: str, messages: list[dict[str, Any]],
                         parse: Callable[[str], tuple[Any, list[str]]],
                         call: Callable[[list[dict[str, Any]], int], Steps], *, start: int = 0) -> Steps:
        """Call, parse, and on a bad reply feed the error back and ask again, `retries` more times at most.

        The bad reply and the error message go into the conversation of the retry only. Raises ReplyError
        when every attempt failed. `start`: the attempt a resumed step is at (`messages` is then that
        attempt's conversation)."""
        conversation = messages
        last_error = ""
        retries = plan.retries
        for attempt in range(start, retries + 1):
            response = yield from call(conversation, attempt)
            try:
                value, repairs = parse(response.content)
            except ValueError as exc:
                last_error = str(exc)
                if attempt == retries:
                    break
                if run.events:
                    run.emit("reask", {"state": plan.name, "role": role, "attempt": attempt + 1,
                                       "error": last_error})
                conversation = conversation + [
                    {"role": "assistant", "content": response.content},
                    {"role": "user", "content": f"Your reply could not be used: {last_error}\n"
                                                "Reply again with only the JSON value, matching the schema."},
                ]
                continue
            if repairs and run.events:
                run.emit("repair", {"state": plan.name, "role": role, "repairs": repairs})
            return value, response
        raise ReplyError(last_error, retries + 1)

    def _converse(self, run: Run, plan: StatePlan, messages: list[dict[str, Any]], loop: ToolLoop,
                  waiting: ApprovalRecord | None = None) -> Steps:
        """One reply of the state's agent, running the tool calls it asks for (at most `tool_rounds` rounds);
        `waiting`, a call that waited for a person, whose round this resumed step goes on with."""
        agent = plan.agent
        assert agent is not None
        if not agent.tools:
            return (yield from self._call_model(run, "agent", plan.name, plan.agent_key, agent, messages,
                                                plan.schema, plan.schema_name, None))
        schemas, names = yield from self._agent_tools(run, plan, agent)
        rounds = plan.tool_rounds if plan.tool_rounds is not None else MAX_TOOL_ROUNDS
        if waiting is not None:
            conversation = list(waiting.loop.tool_conversation)
            first = waiting.loop.round
        else:
            conversation = list(messages)
            first = 0
        for _round in range(first, rounds + 1):
            if waiting is not None and _round == first:
                calls = [_AgentToolCall(c) for c in waiting.loop.calls]
                start = waiting.loop.index
            else:
                response = yield from self._call_model(run, "agent", plan.name, plan.agent_key, agent,
                                                       conversation, plan.schema, plan.schema_name, schemas)
                if not response.tool_calls:
                    return response
                if _round == rounds:
                    break
                calls = [_AgentToolCall({"id": c.id, "name": c.name, "arguments": c.arguments}) for c in response.tool_calls]
                conversation.append({
                    "role": "assistant",
                    "content": response.content or None,
                    "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name,
                                                                              "arguments": c.arguments}}
                                   for c in calls],
                })
                start = 0
            loop.round, loop.calls = _round, [c.data for c in calls]
            for index in range(start, len(calls)):
                call = calls[index]
                loop.index, loop.tool_conversation = index, conversation
                content = yield from self._agent_tool_call(run, plan, agent, names, schemas, call, loop)
                conversation.append({"role": "tool", "tool_call_id": call.id, "content": content})
        raise RunFailed(Failure(
            "tool", f"state '{plan.name}': agent '{agent.name}' still asked for tools after "
                    f"{rounds} rounds of tool calls", state=plan.name, origin=plan.spec.origin))

    def _agent_tools(self, run: Run, plan: StatePlan, agent: AgentPlan) -> Steps:
        cached = run.tool_schemas.get(agent.name)
        if cached is None:
            try:
                cached = yield DescribeTools(plan.name, agent.name, agent.tools, machine=self.machine)
            except Exception as exc:  # noqa: BLE001 - ToolError, or a user tool that does not import
                raise RunFailed(Failure("tool", f"state '{plan.name}': the tools of agent '{agent.name}' are "
                                                f"not available: {exc}", state=plan.name,
                                        origin=plan.spec.origin)) from None
            run.tool_schemas[agent.name] = cached
        return cached

    def _agent_tool_call(self, run: Run, plan: StatePlan, agent: AgentPlan, names: dict[str, str],
                         schemas: list[dict[str, Any]], call: _AgentToolCall, loop: ToolLoop) -> Steps:
        """Run one tool call a model asked for; any problem becomes the tool message the model reads. A call
        of a tool the state asks before waits for a person first: rejected, it does not run."""
        state, key = plan.name, plan.agent_tool_key
        tool = names.get(call.name) or (call.name if call.name in agent.tools else None)
        args: Any = None
        ok = False
        latency = 0.0
        if tool is None:
            content = f"error: there is no tool named '{call.name}'; the tools are: {', '.join(names)}"
        else:
            try:
                args = read_json(call.arguments or "{}", "the arguments")
                if not isinstance(args, dict):
                    raise ValueError("the arguments must be a JSON object")  # noqa: TRY004 - reported like bad JSON
            except ValueError as exc:
                content = f"error: the arguments are not a valid JSON object: {exc}"
            else:
                decision = None
                if tool in plan.ask_before:
                    parameters = _tool_parameters(schemas, names, tool)
                    decision = yield from self._approve(run, plan, tool, call, args, parameters, loop)
                    if decision.decision == "edit":
                        args = decision.arguments
                        _rewrite_call(loop.tool_conversation, call.id, args)  # the agent called it with these
                if decision is not None and decision.decision == "reject":
                    return rejection_text(decision.reason)
                seq = run.seqs.get(key, 0)
                run.seqs[key] = seq + 1
                run.count("seqs", key)
                try:
                    outcome: ToolOutcome = yield CallTool(state, tool, args, seq, agent=agent.name, item=run.item,
                                                          call=run.call_path, machine=self.machine)
                except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
                    content = f"error: {exc}"
                    latency = getattr(exc, "latency_ms", 0.0)
                else:
                    content = to_text(outcome.value)
                    latency = outcome.latency_ms
                    ok = True
        if run.events:
            fields: dict[str, Any] = {"state": state, "agent": agent.name, "tool": tool or call.name, "ok": ok,
                                      "latency_ms": latency}
            if not ok:
                fields["error"] = content
            if run.content:
                fields["args"] = args if args is not None else call.arguments
                if ok:
                    fields["result"] = content
            run.emit("tool_call", fields)
        return content


class _AgentToolCall:
    """A tool call a model asked for: its id, the function name it used and its arguments (JSON text)."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def id(self) -> str:
        return str(self.data.get("id") or "")

    @property
    def name(self) -> str:
        return str(self.data.get("name") or "")

    @property
    def arguments(self) -> str:
        return str(self.data.get("arguments") or "")


def _tool_parameters(schemas: list[dict[str, Any]], names: dict[str, str], tool: str) -> dict[str, Any]:
    """The JSON Schema of the arguments of `tool`, described under its function name (`std_shell`): a call
    may name the tool itself (`std.shell`, as scripts do), and an edit of it is checked all the same."""
    function = next((f for f, t in names.items() if t == tool), tool)
    for schema in schemas:
        described = schema.get("function") or {}
        if described.get("name") == function:
            return dict(described.get("parameters") or {})
    return {"type": "object"}


def _rewrite_call(conversation: list[dict[str, Any]], call_id: str, arguments: dict[str, Any]) -> None:
    """Put the arguments a person gave in place of the model's, in the reply that asked for the call."""
    for index in range(len(conversation) - 1, -1, -1):
        message = conversation[index]
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls or not any(c.get("id") == call_id for c in calls):
            continue
        conversation[index] = {**message, "tool_calls": [
            {**c, "function": {**c.get("function", {}), "arguments": json.dumps(arguments)}}
            if c.get("id") == call_id else c for c in calls]}
        return
