"""Approval between tool calls: `ask before [...]`, `tool_rounds N`, and the test steps that answer.

`ask before [std.shell]` makes every call of those tools by the state's agent wait for a person, who
approves it, rejects it (the agent reads the reason as the call's result) or edits its arguments;
`tool_rounds N` caps the rounds of tool calls the agent makes in one step. Both are about an agent's tool
calls, so they belong to a state whose agent has tools. A test answers a call that waits with `approve`,
`reject` or `edit` steps, in order per state; an edit's arguments are checked against a standard tool's
parameters here (a user tool's signature is read when the run calls it).
"""

from __future__ import annotations

from ...diagnostics import Diagnostics, did_you_mean, quoted_list
from ...grammar import ast
from ...runtime.tool_signatures import STD_TOOLS
from .resolve import StateView, Symbols
from .type_algebra import parse_signature_type, type_text
from .values import value_problems

MAX_TOOL_ROUNDS = 100


def check_approvals(symbols: Symbols, diags: Diagnostics) -> None:
    """Every state's `ask before` and `tool_rounds`, and every test step that answers an approval."""
    for view in symbols.states.values():
        if view.ask_before is not None or view.tool_rounds is not None:
            _check_state(view, symbols, diags)
    for test in symbols.tests:
        for item in test.decl.items:
            if isinstance(item, ast.Approval) and ast.state_path(item.state) is None:  # a path: checks/calls.py
                check_approval_step(item, symbols, diags)


def agent_tools(view: StateView, symbols: Symbols) -> list[str] | None:
    """The tools of the state's agent, in order; None when the state has no (known) agent."""
    if view.agent is None or view.kind != "agent":
        return None
    agent = symbols.agents.get(view.agent.name.value)
    if agent is None:
        return None
    return [t.dotted for t in agent.tools.tools] if agent.tools is not None else []


def _check_state(view: StateView, symbols: Symbols, diags: Diagnostics) -> None:
    rounds = view.tool_rounds
    if rounds is not None and not 1 <= rounds.count.value <= MAX_TOOL_ROUNDS:
        diags.report("SW3080", f"tool_rounds {rounds.count.value} is out of range", rounds.count.span,
                     label=f"from 1 to {MAX_TOOL_ROUNDS}",
                     help="the agent makes at most this many rounds of tool calls in one step (8 without it)")
    tools = agent_tools(view, symbols)
    unknown_agent = view.agent is not None and view.agent.name.value not in symbols.agents
    if unknown_agent:
        return  # reported where the state names it
    for setting, word in ((view.ask_before, "ask before"), (view.tool_rounds, "tool_rounds")):
        if setting is not None and not tools:
            why = (f"agent '{view.agent.name.value}' has no tools" if view.agent is not None and view.kind == "agent"
                   else "an action state's call is its step" if view.kind == "action"
                   else "no agent works here")
            diags.report("SW3081", f"'{word}' in state '{view.name}', where no agent calls tools", setting.span,
                         label=why,
                         help="give the state's agent 'tools [...]'; to confirm a tool call of an action state, "
                              "put a state that asks a person before it")
    if view.ask_before is None or not tools:
        return
    seen: set[str] = set()
    for tool in view.ask_before.tools:
        name = tool.dotted
        if name in seen:
            diags.report("SW2082", f"tool '{name}' is listed twice in 'ask before'", tool.span,
                         label="listed again", help="list each tool once")
            continue
        seen.add(name)
        if name not in tools:
            agent = view.agent.name.value if view.agent is not None else "?"
            diags.report("SW2082", f"agent '{agent}' has no tool '{name}', so no call of it waits",
                         tool.span, label="not one of the agent's tools",
                         help=did_you_mean(name, tools) or f"its tools are {quoted_list(tools)}")


def check_approval_step(item: ast.Approval, symbols: Symbols, diags: Diagnostics) -> None:
    """An `approve`, `reject` or `edit` step for a state of the machine of `symbols` (for a path into a called
    machine, the step with the path's last state, against the called machine's symbols)."""
    view = symbols.states.get(item.state.value)
    if view is None:
        return  # reported during name resolution (SW6001)
    if view.ask_before is None or not view.ask_before.tools:
        diags.report("SW6082", f"no tool call of state '{view.name}' waits for a person", item.state.span,
                     label=f"'{item.decision}' answers a call that waits",
                     help=f"write 'ask before [TOOL]' in state '{view.name}' to make its agent's calls of TOOL "
                          "wait for approval")
        return
    waiting = [t.dotted for t in view.ask_before.tools]
    tool = item.tool.dotted if item.tool is not None else None
    if tool is not None and tool not in waiting:
        diags.report("SW6083", f"state '{view.name}' does not ask before calling '{tool}'", item.tool.span
                     if item.tool is not None else item.span, label="no call of this tool waits",
                     help=did_you_mean(tool, waiting) or f"its calls of {quoted_list(waiting)} wait")
        return
    if item.arguments is None:
        return
    if tool is None:
        if len(waiting) > 1:
            diags.report("SW6084", f"the edit does not say which tool of '{view.name}' it is for", item.state.span,
                         label=f"its calls of {quoted_list(waiting)} wait",
                         help=f"name the tool: 'edit {view.name} {waiting[0]} {{ ... }}'")
            return
        tool = waiting[0]
    _check_arguments(item.arguments, tool, symbols, diags)


def _check_arguments(arguments: ast.Value, tool: str, symbols: Symbols, diags: Diagnostics) -> None:
    """An edit's arguments against a standard tool's parameters: each known and of its type, every required
    one given (a user tool's own signature decides when the run calls it)."""
    if tool not in STD_TOOLS or tool in symbols.tools and symbols.tools[tool].import_path is not None:
        return
    params = STD_TOOLS[tool]["params"]
    entries = ast.object_entries(arguments)
    named = {e.key.value for e in entries}
    missing = [p for p, (_, required) in params.items() if required and p not in named]
    unknown = [e for e in entries if e.key.value not in params]
    misspelled = len(unknown) == 1 and len(missing) == 1  # one wrong name for the one missing: a misspelling
    given: set[str] = set()
    for entry in entries:
        key = entry.key.value
        if key in given:
            diags.report("SW6084", f"argument '{key}' is given twice", entry.key.span, label="second value",
                         help=f"give '{key}' once")
            continue
        given.add(key)
        if key not in params:
            hint = did_you_mean(key, params) or (f"did you mean '{missing[0]}'? ('{tool}' needs it)"
                                                 if misspelled else "")
            diags.report("SW6084", f"'{tool}' has no parameter '{key}'", entry.key.span, label="unknown parameter",
                         help=hint or f"its parameters are {quoted_list(params)}")
            continue
        want = parse_signature_type(params[key][0])
        for p in value_problems(entry.value, want, symbols):
            diags.report("SW6084", f"argument '{key}' of '{tool}' must be {type_text(want)}", p.span,
                         label=p.message, help=p.help)
    if missing and not misspelled:
        diags.report("SW6084", f"the edited call of '{tool}' leaves out "
                     + ", ".join(f"'{m}'" for m in missing), arguments.span, label="a required argument is missing",
                     help="an edit gives the call's arguments in full: " + "  ".join(f"{m} ..." for m in missing))
