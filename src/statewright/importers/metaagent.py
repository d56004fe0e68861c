"""MetaAgent FSM JSON -> a statewright machine: agents, states with listeners, natural-language exits.

MetaAgent's runtime gives the user's task to every agent, lets each agent choose its exit by printing
`<STATE_TRANS>: N`, re-prompts four times when it cannot tell which, stops after ten transitions and lets
`is_final` states work before the run ends. docs/import.md explains how each of these is mapped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, SourceFile, Span, quoted_list
from . import fallbacks, repair
from .emit import literal_template
from .header import Header
from .json_source import JsonValue, parse_json
from .model import Agent, Input, Machine, State, Tool, Transition
from .names import Namespace, file_stem, identifier
from .schema import JsonSchema, anchor, unknown
from .skeleton import shortest_path_test

TASK_INPUT = "task"
STEP_LIMIT = 10  # MetaAgent stops a run after ten transitions
STANDARD_TOOLS = {"code_interpreter": "std.python", "file_writer": "std.write_file"}
STAND_IN_MODULE = "statewright.importers.stand_ins"
STAND_IN_TOOLS = {"search_engine": f"{STAND_IN_MODULE}:search_engine"}

# `<STATE_TRANS>: N` and the near misses MetaAgent would not recognise (<STATUS_TRANS>, <state_trans>, ...)
_ROUTING_TOKEN = re.compile(r"<\s*([A-Za-z]*[ _-]?TRANS[A-Za-z]*)\s*>(?:\s*:\s*`?([A-Za-z0-9_.-]+))?",
                            re.IGNORECASE)
_NO_CONDITION_LINE = re.compile(r"^\W*if (no|none of the) conditions? (is|are) met\b", re.IGNORECASE)
_ROUTING_HEADING = re.compile(r"^\W*(state )?transitions?( conditions?)?\s*:\s*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


@dataclass
class _Agent:
    id: str
    span: Span  # the agent_id value
    name: str
    prompt: JsonValue | None
    tools: list[tuple[str, Span]]


@dataclass
class _State:
    id: str
    span: Span  # the state_id value
    agent_id: str
    agent_span: Span
    instruction: JsonValue
    initial: bool
    final: bool
    listeners: list[tuple[str, Span]]
    name: str = ""


@dataclass
class _Transition:
    source: str
    source_span: Span
    target: str
    target_span: Span
    condition: str | None
    span: Span


@dataclass
class _Spec:
    agents: list[_Agent] = field(default_factory=list)
    states: list[_State] = field(default_factory=list)
    transitions: list[_Transition] = field(default_factory=list)


def import_metaagent(source: SourceFile, diags: Diagnostics, *, repair_mode: bool, bound: int,
                     header: Header) -> Machine | None:
    root = parse_json(source, diags)
    if root is None:
        return None
    spec = _read(root, diags)
    if spec is None or diags.has_errors:
        return None
    misspelt = _lint(spec, diags)
    machine = _build(spec, source, diags, header)
    if misspelt:
        header.differences.append(_misspelt_difference(misspelt))
    if repair_mode:
        header.repairs += repair.drop_listener_repeats(machine)
        header.repairs += repair.order_unconditional_last(machine)
        header.repairs += repair.bound_back_edges(machine, bound)
        header.repairs += repair.end_where_stuck(machine, _namespace(machine))
    machine.test = shortest_path_test(machine, {TASK_INPUT: "An example task."}, STEP_LIMIT)
    if machine.test is None:
        machine.test_comment = "No test block: no final state can be reached from the start state."
    return machine


# ---- reading the JSON --------------------------------------------------------------------------


def _read(root: JsonValue, diags: Diagnostics) -> _Spec | None:
    schema = JsonSchema(diags)
    top = schema.object(root, "a MetaAgent FSM file")
    if top is None:
        return None
    spec = _Spec()
    agents_value = schema.require(top, "agents", "the file")
    machine_value = schema.object(schema.require(top, "states", "the file"), "'states'")
    for value in schema.array(agents_value, "'agents'"):
        agent = schema.object(value, "an agent")
        if agent is not None:
            _read_agent(agent, schema, spec)
    if machine_value is not None:
        states_value = schema.require(machine_value, "states", "'states'")
        transitions_value = schema.require(machine_value, "transitions", "'states'")
        for value in schema.array(states_value, "'states.states'"):
            state = schema.object(value, "a state")
            if state is not None:
                _read_state(state, schema, spec)
        for value in schema.array(transitions_value, "'states.transitions'"):
            transition = schema.object(value, "a transition")
            if transition is not None:
                _read_transition(transition, schema, spec)
    if diags.has_errors:
        return None
    _check_references(top, spec, diags)
    return spec


def _read_agent(agent: JsonValue, schema: JsonSchema, spec: _Spec) -> None:
    id_value = schema.require(agent, "agent_id", "an agent")
    agent_id = schema.ident(id_value, "'agent_id'")
    name = schema.text(agent.get("name"), "an agent's 'name'")
    prompt = agent.get("system_prompt")
    schema.text(prompt, "an agent's 'system_prompt'")
    tools = []
    for tool in schema.array(agent.get("tools"), "an agent's 'tools'"):
        tool_name = schema.text(tool, "a tool")
        if tool_name is not None:
            tools.append((tool_name, tool.span))
    if agent_id is None or id_value is None:
        return
    for other in spec.agents:
        if other.id == agent_id:
            schema.diagnostics.report("SW8007", f"two agents have the id '{agent_id}'", id_value.span,
                                      label="used again here", notes=[f"first used at {other.span.label()}"],
                                      help="give every agent its own 'agent_id'")
            return
    spec.agents.append(_Agent(agent_id, id_value.span, name or agent_id, prompt if prompt and prompt.kind == "string" else None,
                              tools))


def _read_state(state: JsonValue, schema: JsonSchema, spec: _Spec) -> None:
    id_value = schema.require(state, "state_id", "a state")
    state_id = schema.ident(id_value, "'state_id'")
    agent_value = schema.require(state, "agent_id", f"state '{state_id}'" if state_id else "a state")
    agent_id = schema.ident(agent_value, "a state's 'agent_id'")
    instruction = schema.require(state, "instruction", f"state '{state_id}'" if state_id else "a state")
    schema.text(instruction, "a state's 'instruction'")
    initial = schema.flag(state.get("is_initial"), "'is_initial'")
    final = schema.flag(state.get("is_final"), "'is_final'")
    listeners = []
    for listener in schema.array(state.get("listener"), "'listener'"):
        listener_id = schema.ident(listener, "a listener")
        if listener_id is not None:
            listeners.append((listener_id, listener.span))
    if state_id is None or id_value is None or agent_id is None or agent_value is None or instruction is None:
        return
    if instruction.kind != "string":
        return
    for other in spec.states:
        if other.id == state_id:
            schema.diagnostics.report("SW8007", f"two states have the id '{state_id}'", id_value.span,
                                      label="used again here", notes=[f"first used at {other.span.label()}"],
                                      help="give every state its own 'state_id'")
            return
    spec.states.append(_State(state_id, id_value.span, agent_id, agent_value.span, instruction, initial, final,
                              listeners))


def _read_transition(transition: JsonValue, schema: JsonSchema, spec: _Spec) -> None:
    source_value = schema.require(transition, "from_state", "a transition")
    target_value = schema.require(transition, "to_state", "a transition")
    source = schema.ident(source_value, "'from_state'")
    target = schema.ident(target_value, "'to_state'")
    condition = schema.text(transition.get("condition"), "a transition's 'condition'")
    if source is None or target is None or source_value is None or target_value is None:
        return
    spec.transitions.append(_Transition(source, source_value.span, target, target_value.span,
                                        condition.strip() if condition and condition.strip() else None,
                                        transition.span))


def _check_references(top: JsonValue, spec: _Spec, diags: Diagnostics) -> None:
    agent_ids = [a.id for a in spec.agents]
    state_ids = [s.id for s in spec.states]
    for state in spec.states:
        if state.agent_id not in agent_ids:
            unknown(diags, "agent id", state.agent_id, state.agent_span, agent_ids, "no agent has this id")
        for listener, span in state.listeners:
            if listener not in agent_ids:
                unknown(diags, "agent id", listener, span, agent_ids, "no agent has this id")
    transitions_owner = top.get("states")
    for t in spec.transitions:
        for ref, span in ((t.source, t.source_span), (t.target, t.target_span)):
            if ref not in state_ids:
                unknown(diags, "state id", ref, span, state_ids, "no state has this id")
    initial = [s for s in spec.states if s.initial]
    if not initial:
        where = transitions_owner.key_span("states") if transitions_owner is not None else None
        diags.report("SW8008", "no state has \"is_initial\": true", where or anchor(top),
                     label="none of these states is initial",
                     help="mark the state the run starts in with \"is_initial\": true")
    for extra in initial[1:]:
        diags.report("SW8008", f"states '{initial[0].id}' and '{extra.id}' are both initial", extra.span,
                     label="a second initial state", help="a run starts in one state: keep one \"is_initial\"")


# ---- lint notes on the original --------------------------------------------------------------------


def _misspelt_difference(misspelt: list[tuple[str, str]]) -> str:
    places = list(dict.fromkeys(where for where, _ in misspelt))
    tokens = quoted_list(dict.fromkeys(token for _, token in misspelt))
    where = ", ".join(places[:-1]) + " and " + places[-1] if len(places) > 1 else places[0]
    return (f"The original spells the routing token {tokens} in {where}: MetaAgent recognises only "
            "<STATE_TRANS>, so an agent that follows that text never leaves its state there (it is re-prompted, "
            "then the run returns the last output); here the verifier routes those states by their transitions.")


def _lint(spec: _Spec, diags: Diagnostics) -> list[tuple[str, str]]:
    """Notes on the original; returns where the routing token is misspelt, and how: (where, token)."""
    misspelt: list[tuple[str, str]] = []
    agent_exits: dict[str, set[str]] = {a.id: set() for a in spec.agents}
    state_exits: dict[str, set[str]] = {s.id: set() for s in spec.states}
    agent_of = {s.id: s.agent_id for s in spec.states}
    for t in spec.transitions:
        agent_exits[agent_of[t.source]].add(t.target)
        state_exits[t.source].add(t.target)
    for agent in spec.agents:
        if agent.prompt is not None:
            misspelt += _lint_routing(agent.prompt, agent_exits[agent.id], f"the prompt of agent '{agent.name}'",
                                      diags)
    for state in spec.states:
        misspelt += _lint_routing(state.instruction, state_exits[state.id], f"the instruction of state '{state.id}'",
                                  diags)
    initial = next(s for s in spec.states if s.initial)
    for t in spec.transitions:
        if t.target == initial.id:
            diags.report("SW8103", f"transition from state '{t.source}' goes back to the initial state "
                         f"'{initial.id}'", t.target_span, label="the initial state",
                         notes=[("MetaAgent sends the sender's output to every agent as the user's task here; "
                                "the imported machine keeps the task and tells only the listeners")],
                         help="make sure the run means to start over")
    _lint_listeners(spec, diags)
    return misspelt


def _lint_routing(text: JsonValue, exits: set[str], where: str, diags: Diagnostics) -> list[tuple[str, str]]:
    misspelt: list[tuple[str, str]] = []
    for m in _ROUTING_TOKEN.finditer(str(text.value)):
        token = m.group(0)[: m.group(0).index(">") + 1]
        if token != "<STATE_TRANS>":
            misspelt.append((where, token))
            diags.report("SW8102", f"{where} spells the routing token '{token}'",
                         text.string_span(m.start(), m.start() + len(token)), label="not <STATE_TRANS>",
                         help="MetaAgent recognises only '<STATE_TRANS>'; an agent that prints this never "
                              "leaves the state (the importer drops the routing text either way)")
            continue
        target = (m.group(2) or "").rstrip(".")  # the full stop of "output `<STATE_TRANS>: 3`." is no id
        if target and target not in exits and target.lower() != "none":  # None: MetaAgent's "stay"
            diags.report("SW8101", f"{where} routes to state '{target}', which is not one of its exits",
                         text.string_span(m.start(2), m.start(2) + len(target)), label="no transition to it",
                         help="the exits are: " + (", ".join(f"'{e}'" for e in sorted(exits)) or "none"))
    return misspelt


def _lint_listeners(spec: _Spec, diags: Diagnostics) -> None:
    """A listener whose agent runs in no state after this one is told things it never reads."""
    successors: dict[str, list[str]] = {s.id: [] for s in spec.states}
    for t in spec.transitions:
        successors[t.source].append(t.target)
    agent_of = {s.id: s.agent_id for s in spec.states}
    final = {s.id: s.final for s in spec.states}
    names = {a.id: a.name for a in spec.agents}
    for state in spec.states:
        after: set[str] = set()
        todo = [] if state.final else list(successors[state.id])  # a final state ends the run
        while todo:
            current = todo.pop()
            if current in after:
                continue
            after.add(current)
            if not final[current]:
                todo.extend(successors[current])
        runs_after = {agent_of[s] for s in after}
        for listener, span in state.listeners:
            if listener not in runs_after and listener != state.agent_id:
                reason = ("the run ends after this final state" if state.final else
                          "no state after this one uses that agent")
                diags.report("SW8104", f"listener '{names.get(listener, listener)}' of state '{state.id}' "
                             "never runs after it", span, label="told, never read", notes=[reason],
                             help="drop the listener, or give it a state after this one")


# ---- building the machine ------------------------------------------------------------------------


def _build(spec: _Spec, source: SourceFile, diags: Diagnostics, header: Header) -> Machine:
    values = Namespace((TASK_INPUT,))
    agent_names = Namespace()
    tool_names = Namespace()
    machine = Machine(identifier(file_stem(source.path), "machine"))
    machine.inputs.append(Input(TASK_INPUT, comments=["The user's task: MetaAgent gives it to every agent."]))
    machine.steps = STEP_LIMIT
    machine.steps_comment = "MetaAgent stops a run after ten transitions."
    agent_name: dict[str, str] = {}
    declared_tools: dict[str, str] = {}
    for a in spec.agents:
        agent = Agent(agent_names.claim(a.name, "agent"))
        agent_name[a.id] = agent.name
        if agent.name != a.id:  # listeners and states name agents by id: say which one this is
            agent.comments.append(f"MetaAgent agent \"{a.name}\" (id {a.id})" if a.name != a.id else
                                  f"MetaAgent agent id {a.id}")
        prompt = strip_routing(str(a.prompt.value)) if a.prompt is not None else ""
        task = "The user's task:\n{{ " + TASK_INPUT + " }}"
        agent.prompt = f"{literal_template(prompt)}\n\n{task}" if prompt else task
        for tool, span in a.tools:
            mapped = _tool(tool, span, machine, declared_tools, tool_names, diags)
            if mapped not in agent.tools:
                agent.tools.append(mapped)
        machine.agents.append(agent)
    for s in spec.states:
        s.name = values.claim(s.id, "state")
    name_of = {s.id: s.name for s in spec.states}
    for s in spec.states:
        state = State(s.name, start=s.initial, agent=agent_name[s.agent_id], origin=s.span)
        if s.name != s.id:
            state.comments.append(f"MetaAgent state \"{s.id}\"")
        state.instruction = literal_template(strip_routing(str(s.instruction.value)))
        for listener, span in s.listeners:
            state.tell.append(agent_name[listener])
            state.tell_origins.append(span)
        for t in spec.transitions:
            if t.source == s.id:
                state.transitions.append(Transition(name_of[t.target], t.condition, origin=t.span))
        machine.states.append(state)
        if s.final:
            fallbacks.work_in_final_state(state)
        elif not any(t.unconditional for t in state.transitions):
            state.transitions.append(fallbacks.no_exit_budget())
    _describe(spec, machine, header)
    return machine


def _tool(tool: str, span: Span, machine: Machine, declared: dict[str, str], names: Namespace,
          diags: Diagnostics) -> str:
    if tool in STANDARD_TOOLS:
        return STANDARD_TOOLS[tool]
    if tool in declared:
        return declared[tool]
    if tool not in STAND_IN_TOOLS:
        diags.report("SW8107", f"unknown MetaAgent tool '{tool}'", span, label="not a MetaAgent tool",
                     help="the importer declares it with a stand-in; point its import path at your function")
    name = names.claim(tool, "tool")
    declared[tool] = name
    path = STAND_IN_TOOLS.get(tool, f"{STAND_IN_MODULE}:unavailable_tool")
    comments = [
        f"MetaAgent's {tool} has no standard counterpart: this stand-in answers that no {tool} is",
        "configured. Point the import path at your own function.",
    ]
    if tool == "search_engine":  # a search API needs a key: named here, read from the environment at run start
        comments.append("A search API key goes in `secrets [SEARCH_API_KEY]`; the function gets it in `secrets`.")
    machine.tools.append(Tool(name, path, comments=comments))
    return name


def _describe(spec: _Spec, machine: Machine, header: Header) -> None:
    header.differences += [
        ("A verifier judges which exit a state takes; in the original the working agent chose by printing "
        "<STATE_TRANS>: N, and that routing text has been removed from the prompts and instructions."),
        "Exhausted turns or loops end the run in a typed failure instead of returning the last output.",
        "Tool lists are enforced: an agent can call only the tools listed for it.",
        ("There is no shared transcript: an agent sees the task, its own exchanges and what the states that "
        "list it as a listener tell it."),
    ]
    initial = next(s for s in spec.states if s.initial)
    if any(t.target == initial.id for t in spec.transitions):
        header.differences.append(
            f"Going back to the initial state ('{initial.name}') does not send the sender's output to every "
            "agent as the user's task, as the original does; only its listeners are told.")
    for tool in machine.tools:
        header.stand_ins.append(f"Tool '{tool.name}' is a stand-in ({tool.import_path}) until you point it at "
                                "your own function.")


def strip_routing(text: str) -> str:
    """`text` without MetaAgent's routing protocol: sentences that print a routing token, the 'if no
    conditions are met' line and a heading left with nothing under it."""
    kept: list[str] = []
    dropped_after: list[bool] = []  # per kept line: was the line after it dropped?
    for line in text.split("\n"):
        if _NO_CONDITION_LINE.search(line):
            _mark_dropped(dropped_after)
            continue
        if _ROUTING_TOKEN.search(line):
            sentences = [s for s in _SENTENCE_END.split(line) if not _ROUTING_TOKEN.search(s)]
            rest = " ".join(sentences)
            if not re.sub(r"[\s\-*•]", "", rest):
                _mark_dropped(dropped_after)
                continue
            indent = line[: len(line) - len(line.lstrip())]
            line = indent + rest.strip()
        kept.append(line)
        dropped_after.append(False)
    lines = [line for line, dropped in zip(kept, dropped_after)
             if not (dropped and _ROUTING_HEADING.match(line))]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in lines)).strip()


def _mark_dropped(dropped_after: list[bool]) -> None:
    if dropped_after:
        dropped_after[-1] = True


def _namespace(machine: Machine) -> Namespace:
    return Namespace((*(i.name for i in machine.inputs), *(s.name for s in machine.states)))
