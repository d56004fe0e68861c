"""An agent's step: its instruction and memory sent to its model, a typed reply validated (bad replies fed
back and asked again, within the state's `retries`), and the tool calls the model asks for run between its
replies (at most MAX_TOOL_ROUNDS rounds). `AgentSteps` is the core's part that does this; RunCore (core.py)
mixes it in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

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

    def _agent_step(self, run: Run, plan: StatePlan, feedback: str | None) -> Steps:
        agent = plan.agent
        assert agent is not None
        instruction = plan.instruction if plan.constant else self._render(run, plan.instruction, plan.name)
        if run.observe is not None and run.item is None:  # (a map's elements: at their join, together)
            run.observe("instruction", plan.name, run.visits[plan.name], instruction)
        user_text = instruction if feedback is None else f"{instruction}\n\n{feedback}"
        memory = run.memories[agent.name]
        system = run.system_prompts.get(agent.name)
        if system is None:
            system = self._render(run, agent.prompt, plan.name, run.inputs)
            run.system_prompts[agent.name] = system
        messages = [{"role": "system", "content": system}, *memory.view(),
                    {"role": "user", "content": user_text}]
        if plan.output is None:
            if agent.tools:
                response = yield from self._converse(run, plan, messages)
            else:  # (the common case, without the tool loop's frame)
                response = yield from self._call_model(run, "agent", plan.name, plan.agent_key, agent, messages,
                                                       None, plan.schema_name, None)
            output: Any = response.content
            reply_text = output
        else:
            model, wrapped = plan.output, plan.wrapped
            try:
                output, _response = yield from self._ask_until_valid(
                    run, plan, "agent", messages, lambda text: parse_typed_reply(model, wrapped, text),
                    lambda conversation: self._converse(run, plan, conversation))
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
                         call: Callable[[list[dict[str, Any]]], Steps]) -> Steps:
        """Call, parse, and on a bad reply feed the error back and ask again, `retries` more times at most.

        The bad reply and the error message go into the conversation of the retry only. Raises ReplyError
        when every attempt failed."""
        conversation = messages
        last_error = ""
        retries = plan.retries
        for attempt in range(retries + 1):
            response = yield from call(conversation)
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

    def _converse(self, run: Run, plan: StatePlan, messages: list[dict[str, Any]]) -> Steps:
        """One reply of the state's agent, running the tool calls it asks for (at most MAX_TOOL_ROUNDS)."""
        agent = plan.agent
        assert agent is not None
        if not agent.tools:
            return (yield from self._call_model(run, "agent", plan.name, plan.agent_key, agent, messages,
                                                plan.schema, plan.schema_name, None))
        schemas, names = yield from self._agent_tools(run, plan, agent)
        conversation = list(messages)
        for _round in range(MAX_TOOL_ROUNDS + 1):
            response = yield from self._call_model(run, "agent", plan.name, plan.agent_key, agent, conversation,
                                                   plan.schema, plan.schema_name, schemas)
            if not response.tool_calls:
                return response
            if _round == MAX_TOOL_ROUNDS:
                break
            conversation.append({
                "role": "assistant",
                "content": response.content or None,
                "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name,
                                                                          "arguments": c.arguments}}
                               for c in response.tool_calls],
            })
            for call in response.tool_calls:
                content = yield from self._agent_tool_call(run, plan.name, plan.agent_tool_key, agent, names, call)
                conversation.append({"role": "tool", "tool_call_id": call.id, "content": content})
        raise RunFailed(Failure(
            "tool", f"state '{plan.name}': agent '{agent.name}' still asked for tools after "
                    f"{MAX_TOOL_ROUNDS} rounds of tool calls", state=plan.name, origin=plan.spec.origin))

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

    def _agent_tool_call(self, run: Run, state: str, key: str, agent: AgentPlan, names: dict[str, str],
                         call: Any) -> Steps:
        """Run one tool call a model asked for; any problem becomes the tool message the model reads."""
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
                seq = run.seqs.get(key, 0)
                run.seqs[key] = seq + 1
                run.count("seqs", key)
                try:
                    outcome: ToolOutcome = yield CallTool(state, tool, args, seq, agent=agent.name, call=run.call_path,
                                                          machine=self.machine)
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
