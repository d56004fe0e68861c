"""AutoAgent workflow form XML -> a statewright machine: events become states, listens become the order.

An AutoAgent workflow is a set of events: `on_start` takes the system input; every other event listens to
earlier ones, runs a task with an agent and ends with one of its outputs, whose action continues with the
events that listen to it (RESULT), jumps to another event (GOTO) or ends the workflow (ABORT). Several
events listening to one run in parallel; one listening to several waits for all. docs/import.md explains
how each of these is mapped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, SourceFile, Span, did_you_mean, quoted_list
from . import fallbacks, repair
from .autoagent_agents import import_agent_form
from .autoagent_form import read_agent_form
from .emit import placeholder_template
from .header import Header
from .model import Agent, Input, Machine, State, Tool, Transition
from .names import Namespace, file_stem, identifier
from .schema import unknown
from .skeleton import shortest_path_test
from .xml_source import XmlElement, parse_xml

START_EVENT = "on_start"
# The start of a workflow whose on_start does work, or that has none (older forms): an event no file can
# name (XML text holds no NUL), which the event that starts the run listens to.
SYSTEM_START = "\x00start"
ACTIONS = ("RESULT", "ABORT", "GOTO")
STAND_IN_TOOL = "statewright.importers.stand_ins:unavailable_tool"


@dataclass
class _Output:
    key: str
    condition: str | None
    action: str
    target: str | None  # the event a GOTO jumps to
    target_span: Span | None
    span: Span


@dataclass
class _Event:
    name: str
    span: Span
    inputs: list[str]
    task: str | None
    outputs: list[_Output]
    listens: list[tuple[str, Span]]
    agent: str | None
    agent_span: Span | None
    model: str | None
    state: str = ""  # the state's name in the imported machine


@dataclass
class _Agent:
    name: str
    span: Span
    prompt: str | None
    tools: list[tuple[str, str]]  # (name, description)


@dataclass
class _Spec:
    name: str | None
    input_key: str
    input_description: str
    output_key: str | None
    output_description: str
    variables: list[tuple[str, str, str]]  # (key, description, value)
    agents: list[_Agent] = field(default_factory=list)
    events: list[_Event] = field(default_factory=list)
    start: str = START_EVENT  # the event that takes the system input and does no work

    def event(self, name: str) -> _Event:
        return next(e for e in self.events if e.name == name)


def import_autoagent(source: SourceFile, diags: Diagnostics, *, repair_mode: bool, bound: int,
                     header: Header, folder: str = "imported") -> Machine | None:
    """A workflow form as one machine; an agent form (autoagent_agents.py) as a machine and the machines it
    runs, which go to files in `folder`, beside the machine's own file."""
    root = parse_xml(source, diags)
    if root is None:
        return None
    if root.tag == "agents":
        form = read_agent_form(root, diags)
        if form is None:
            return None
        name = identifier(file_stem(source.path), "machine")
        return import_agent_form(form, diags, name=name, folder=folder, header=header)
    spec = _read(root, source, diags)
    if spec is None or diags.has_errors:
        return None
    if not _adopt_start(root, spec, diags, header):
        return None
    order = _run_order(spec, diags)
    if order is None:
        return None
    _lint(spec, diags)
    machine, unproduced, late = _build(spec, order, source, header, diags, repair_mode)
    if repair_mode:
        header.repairs += _declare_unproduced_inputs(machine, unproduced, late)
        header.repairs += repair.order_unconditional_last(machine)
        header.repairs += repair.bound_back_edges(machine, bound)
        header.repairs += repair.end_where_stuck(machine, Namespace(tuple(_taken(machine))))
    inputs = {i.name: f"An example {i.name}." for i in machine.inputs if i.default is None}
    machine.test = shortest_path_test(machine, inputs)
    if machine.test is None:
        machine.test_comment = "No test block: no final state can be reached from the start state."
    return machine


# ---- reading the XML ---------------------------------------------------------------------------


def _missing(diags: Diagnostics, owner: XmlElement, tag: str, what: str, help: str = "") -> None:
    diags.report("SW8004", f"{what} has no <{tag}>", owner.span, label=f"<{tag}> is missing here",
                 help=help or did_you_mean(tag, [c.tag for c in owner.children]) or f"add <{tag}> to it")


def _required_text(diags: Diagnostics, owner: XmlElement, tag: str, what: str) -> str | None:
    child = owner.child(tag)
    if child is None:
        _missing(diags, owner, tag, what)
        return None
    if not child.text:
        diags.report("SW8004", f"the <{tag}> of {what} is empty", child.span, label="empty",
                     help=f"write the {tag} inside <{tag}>...</{tag}>")
        return None
    return child.text


def _read(root: XmlElement, source: SourceFile, diags: Diagnostics) -> _Spec | None:
    if root.tag != "workflow":
        diags.report("SW8005", f"the root element must be <workflow> or <agents>, not <{root.tag}>", root.span,
                     label="expected <workflow> or <agents>",
                     help="an AutoAgent workflow form is one <workflow> element, an agent form one <agents> element")
        return None
    system_input = root.child("system_input")
    input_key = None
    if system_input is None:
        _missing(diags, root, "system_input", "the workflow", "declare the workflow's input: "
                 "<system_input><key>...</key><description>...</description></system_input>")
    else:
        input_key = _required_text(diags, system_input, "key", "<system_input>")
    system_output = root.child("system_output")
    spec = _Spec(
        name=root.child_text("name"),
        input_key=input_key or "",
        input_description=(system_input.child_text("description") or "") if system_input is not None else "",
        output_key=system_output.child_text("key") if system_output is not None else None,
        output_description=(system_output.child_text("description") or "") if system_output is not None else "",
        variables=[],
    )
    variables = root.child("global_variables")
    for variable in variables.all("variable") if variables is not None else []:
        key = _required_text(diags, variable, "key", "a global variable")
        if key is not None:
            spec.variables.append((key, variable.child_text("description") or "", variable.child_text("value") or ""))
    agents = root.child("agents")
    for agent in agents.all("agent") if agents is not None else []:
        _read_agent(agent, spec, diags)
    events_parent = root.child("events") or root
    events = events_parent.all("event")
    if not events:
        _missing(diags, root, "events", "the workflow", "list the workflow's events in <events>")
    for event in events:
        _read_event(event, spec, diags)
    if diags.has_errors:
        return None
    _check_references(root, spec, diags)
    return spec


def _read_agent(element: XmlElement, spec: _Spec, diags: Diagnostics) -> None:
    name = element.attrs.get("name") or element.child_text("name")
    if not name:
        _missing(diags, element, "name", "an agent")
        return
    prompt = element.child_text("instructions") or element.child_text("description")
    tools = []
    for group in element.all("tools"):
        for tool in group.all("tool"):
            tool_name = tool.attrs.get("name") or tool.child_text("name") or tool.text
            if not tool_name:
                _missing(diags, tool, "name", "a tool")
                continue
            tools.append((tool_name, tool.child_text("description") or ""))
    for other in spec.agents:
        if other.name == name:
            diags.report("SW8007", f"two agents are named '{name}'", element.span, label="declared again here",
                         notes=[f"first declared at {other.span.label()}"], help="give every agent its own name")
            return
    spec.agents.append(_Agent(name, element.span, prompt, tools))


def _read_event(element: XmlElement, spec: _Spec, diags: Diagnostics) -> None:
    name = _required_text(diags, element, "name", "an event")
    if name is None:
        return
    what = f"event '{name}'"
    inputs_parent = element.child("inputs") or element
    inputs = []
    for item in inputs_parent.all("input"):
        key = _required_text(diags, item, "key", f"an input of {what}")
        if key is not None:
            inputs.append(key)
    outputs = []
    outputs_element = element.child("outputs")
    if outputs_element is None or not outputs_element.all("output"):
        if name != START_EVENT:
            _missing(diags, element if outputs_element is None else outputs_element,
                     "outputs" if outputs_element is None else "output", what,
                     "say how the event ends: <outputs><output><key>...</key><action><type>RESULT</type>"
                     "</action></output></outputs>")
    else:
        for output in outputs_element.all("output"):
            read = _read_output(output, what, diags)
            if read is not None:
                outputs.append(read)
    listens = []
    listen = element.child("listen")
    for source in listen.all("event") if listen is not None else []:
        if source.text:
            listens.append((source.text, source.value_span))
    agent = element.child("agent")
    agent_name = model = None
    agent_span = None
    if agent is not None:
        agent_name = agent.attrs.get("name") or agent.child_text("name")
        model = agent.attrs.get("model") or agent.child_text("model")
        name_element = agent.child("name")
        agent_span = name_element.value_span if name_element is not None else agent.span
        if not agent_name:
            _missing(diags, agent, "name", f"the agent of {what}")
    elif name != START_EVENT:
        _missing(diags, element, "agent", what, "name the agent that handles the event: "
                 "<agent><name>...</name><model>...</model></agent>")
    task = element.child_text("task")
    if name != START_EVENT and not task:
        _missing(diags, element, "task", what, "say what the event should accomplish: <task>...</task>")
    for other in spec.events:
        if other.name == name:
            diags.report("SW8007", f"two events are named '{name}'", element.span, label="declared again here",
                         notes=[f"first declared at {other.span.label()}"], help="give every event its own name")
            return
    spec.events.append(_Event(name, element.span, inputs, task, outputs, listens, agent_name, agent_span, model))


def _read_output(output: XmlElement, what: str, diags: Diagnostics) -> _Output | None:
    key = _required_text(diags, output, "key", f"an output of {what}")
    action = output.child("action")
    if action is None:
        _missing(diags, output, "action", f"an output of {what}",
                 "say what happens next: <action><type>RESULT</type></action> (or ABORT, or GOTO)")
        return None
    kind_element = action.child("type")
    kind = (kind_element.text if kind_element is not None else action.attrs.get("type", "")).strip()
    if not kind:
        _missing(diags, action, "type", "an action", "give it a type: RESULT, ABORT or GOTO")
        return None
    if kind.upper() not in ACTIONS:
        where = kind_element.value_span if kind_element is not None else action.span
        diags.report("SW8005", f"unknown action type '{kind}'", where, label="not RESULT, ABORT or GOTO",
                     help=did_you_mean(kind.upper(), ACTIONS) or "the action types are RESULT, ABORT and GOTO")
        return None
    target = target_span = None
    if kind.upper() == "GOTO":
        value = action.child("value")
        if value is None or not value.text:
            _missing(diags, action if value is None else value, "value", "a GOTO action",
                     "name the event to go to: <value>EVENT</value>")
            return None
        target, target_span = value.text, value.value_span
    condition = output.child_text("condition")
    if key is None:
        return None
    return _Output(key, condition or None, kind.upper(), target, target_span, output.span)


def _check_references(root: XmlElement, spec: _Spec, diags: Diagnostics) -> None:
    event_names = [e.name for e in spec.events]
    agent_names = [a.name for a in spec.agents]
    for event in spec.events:
        for source, span in event.listens:
            if source not in event_names and source != START_EVENT:  # an on_start left implicit: see _adopt_start
                unknown(diags, "event", source, span, event_names, "no event has this name")
        for output in event.outputs:
            if output.target is not None and output.target not in event_names:
                assert output.target_span is not None
                unknown(diags, "event", output.target, output.target_span, event_names, "no event has this name")
        if event.agent is not None and event.agent not in agent_names:
            assert event.agent_span is not None
            unknown(diags, "agent", event.agent, event.agent_span, agent_names, "not declared in <agents>")


def _adopt_start(root: XmlElement, spec: _Spec, diags: Diagnostics, header: Header) -> bool:
    """Find where the run starts. An on_start that does work (an agent and a task of its own, older forms)
    is the start state, after a start of the system's; a workflow without on_start (older forms) starts with
    the first event that listens to nothing and reads only the system input and variables."""
    names = [e.name for e in spec.events]
    if START_EVENT in names:
        on_start = spec.event(START_EVENT)
        if on_start.agent is None or not on_start.task:
            return True
        diags.report("SW8116", f"'{START_EVENT}' does work of its own: agent '{on_start.agent}' and a task",
                     on_start.span, label="not only the system input",
                     help="the import keeps it as the start state; its outputs are read from it, not asked for "
                          "as inputs")
        header.differences.append(f"'{START_EVENT}' has its own agent ('{on_start.agent}') and task: it is the start "
                                  "state, and the events that read its outputs read them from it.")
        first: _Event | None = on_start
    elif any(source == START_EVENT for e in spec.events for source, _ in e.listens):
        header.differences.append(f"The workflow has no '{START_EVENT}' event, though events listen to it: the run "
                                  "starts with them, as if it were there to pass the system input on.")
        spec.events.insert(0, _Event(START_EVENT, spec.events[0].span, [], None, [], [], None, None, None))
        return True
    else:
        system = {spec.input_key, *(key for key, _, _ in spec.variables)}
        first = next((e for e in spec.events if not e.listens and set(e.inputs) <= system and e.agent), None)
        if first is None:
            events = root.child("events") or root
            diags.report("SW8008", f"the workflow has no '{START_EVENT}' event", events.span,
                         label=f"no {START_EVENT} among these events",
                         help=f"add the event that takes the system input: <event><name>{START_EVENT}</name>"
                              "<inputs>...</inputs><outputs>...</outputs></event>; without one, the first "
                              "event that listens to nothing and reads only the system input starts the run")
            return False
        header.differences.append(f"The workflow has no '{START_EVENT}' (an older form): '{first.name}', the first "
                                  "event that listens to nothing and reads only the system input, starts the run.")
    assert first is not None
    spec.events.insert(0, _Event(SYSTEM_START, first.span, [], None, [], [], None, None, None))
    first.listens = [(SYSTEM_START, first.span)]
    spec.start = SYSTEM_START
    return True


def _ancestors(spec: _Spec) -> dict[str, set[str]]:
    """For every event, the events that have surely finished when it starts: those it listens to, the
    events a GOTO into it comes from, and (transitively) theirs."""
    before: dict[str, set[str]] = {e.name: {s for s, _ in e.listens} for e in spec.events}
    for event in spec.events:
        for output in event.outputs:
            if output.target is not None and output.target in before:
                before[output.target].add(event.name)
    changed = True
    while changed:
        changed = False
        for found in before.values():
            more = set().union(*(before.get(s, set()) for s in found)) - found
            if more:
                found |= more
                changed = True
    return before


def _run_order(spec: _Spec, diags: Diagnostics) -> list[str] | None:
    """The events that follow from on_start, in the order they run: file order, made topological."""
    listens = {e.name: [s for s, _ in e.listens] for e in spec.events}
    reachable = {spec.start}
    changed = True
    while changed:
        changed = False
        for event in spec.events:
            if event.name not in reachable and any(s in reachable for s in listens[event.name]):
                reachable.add(event.name)
                changed = True
    pending = [e.name for e in spec.events if e.name in reachable and e.name != spec.start]
    order: list[str] = []
    done = {spec.start}
    while pending:
        ready = next((n for n in pending if all(s in done or s not in reachable for s in listens[n])), None)
        if ready is None:  # a cycle of listens: AutoAgent never runs these; keep file order
            ready = pending[0]
        pending.remove(ready)
        order.append(ready)
        done.add(ready)
    if not order:
        start = spec.event(spec.start)
        diags.report("SW8008", f"no event listens to '{START_EVENT}'", start.span, label="nothing follows it",
                     help=f"let the first event listen to it: <listen><event>{START_EVENT}</event></listen>")
        return None
    return order


# ---- lint notes on the original --------------------------------------------------------------------


def _lint(spec: _Spec, diags: Diagnostics) -> None:
    position = {e.name: i for i, e in enumerate(spec.events)}
    for event in spec.events:
        for source, span in event.listens:
            if position[source] > position[event.name]:
                diags.report("SW8106", f"event '{event.name}' listens to '{source}', which comes later in the file",
                             span, label="a later event",
                             help=f"move '{source}' above '{event.name}': AutoAgent's validator requires it")
        for output in event.outputs:
            if output.target is None:
                continue
            target = spec.event(output.target)
            if any(source == event.name for source, _ in target.listens):
                assert output.target_span is not None
                diags.report("SW8105", f"GOTO from '{event.name}' into '{target.name}', which listens to it",
                             output.target_span, label="this event also listens to the one it is sent from",
                             help=f"jump to an event that does not listen to '{event.name}', or use RESULT")


# ---- building the machine ------------------------------------------------------------------------


def _build(spec: _Spec, order: list[str], source: SourceFile, header: Header, diags: Diagnostics,
           repair_mode: bool) -> tuple[Machine, dict[str, list[str]], dict[str, list[str]]]:
    values = Namespace()
    machine = Machine(identifier(spec.name or file_stem(source.path), "machine"))
    input_names = _declare_inputs(spec, machine, values)
    working = [spec.event(name) for name in order] + [e for e in spec.events
                                                         if e.name not in order and e.name != spec.start]
    working.sort(key=lambda e: spec.events.index(e))
    for event in working:
        event.state = values.claim(event.name, "state")
    state_of = {e.name: e.state for e in working}
    agent_for = _agents(spec, working, machine, header, input_names)
    listens = {e.state: [state_of.get(s, s) for s, _ in e.listens] for e in working}
    forks, reduced, reduced_listens = _forks(working, [state_of[n] for n in order], listens, state_of, values,
                                             spec.start)
    following, parallel, branches = fallbacks.sequence_parallel_branches(reduced, reduced_listens, spec.start)
    state_of[spec.start] = reduced[0]
    state_of.setdefault(START_EVENT, reduced[0])
    output_name = identifier(spec.output_key or "done", "state")
    success = State(values.claim(output_name if output_name not in values.taken else "done", "state"), final=True)
    if spec.output_description:
        success.comments.append(f"The system output: {spec.output_description}")
    aborts = _abort_finals(working, values)
    producers = _producers(spec, state_of)
    unproduced: dict[str, list[str]] = {}
    late: dict[str, list[str]] = {}  # an input name nothing writes in time -> the events that write it late
    fork_of = {b: (name, fork) for name, fork in forks.items() for b in fork.branches}
    ancestors = _ancestors(spec)
    branch_of = {b: name for b, (name, _) in fork_of.items()}
    run_order = [s for n in reduced for s in (forks[n].branches if n in forks else (n,))]
    for event in working:
        in_fork = fork_of.get(event.state)
        if in_fork is not None and in_fork[1].branches[0] == event.state:  # its parallel state comes first
            name, fork = in_fork
            machine.states.append(_fan_out_state(name, fork, spec.start, reduced[0] == name,
                                                 following[name] or success.name))
        state = State(event.state, start=reduced[0] == event.state, agent=agent_for[event.name], origin=event.span,
                      branch=in_fork is not None)
        if event.state != event.name:
            state.comments.append(f"AutoAgent event \"{event.name}\"")
        state.comments.extend(parallel.get(event.state, []))
        reads = _Reads(producers, ancestors[event.name], run_order, branch_of, repair_mode)
        state.instruction = _instruction(event, input_names, reads, unproduced)
        _report_unready(event, reads, late, diags, header)
        if in_fork is not None:  # a branch ends in its one state: its result is the branch's output
            machine.states.append(state)
            continue
        for output in event.outputs:
            if output.action == "RESULT":
                target = following[event.state] or success.name
            elif output.action == "GOTO":
                assert output.target is not None
                target = state_of[output.target]
            else:
                target = aborts[output.key].name
            state.transitions.append(Transition(target, output.condition, origin=output.span))
        machine.states.append(state)
    machine.states.append(success)
    machine.states.extend(aborts.values())
    _describe(machine, header, branches, aborts)
    return machine, unproduced, late


def _declare_inputs(spec: _Spec, machine: Machine, values: Namespace) -> dict[str, str]:
    """The machine's inputs: the system input and each global variable; their names by the original's key."""
    input_names: dict[str, str] = {}
    system_input = Input(values.claim(spec.input_key, "input"))
    if spec.input_description:
        system_input.comments.append(f"The system input: {spec.input_description}")
    machine.inputs.append(system_input)
    input_names[spec.input_key] = system_input.name
    for key, description, value in spec.variables:
        variable = Input(values.claim(key, "input"), value)
        variable.comments.append(f"A global variable: {description}" if description else "A global variable")
        machine.inputs.append(variable)
        input_names[key] = variable.name
    return input_names


def _abort_finals(working: list[_Event], values: Namespace) -> dict[str, State]:
    """A failing final state for each output key some event ABORTs with, naming the events that do."""
    abort_events: dict[str, list[str]] = {}
    for event in working:
        for output in event.outputs:
            if output.action == "ABORT" and event.state not in abort_events.setdefault(output.key, []):
                abort_events[output.key].append(event.state)
    return {key: fallbacks.failing_final(key, values, f"ABORT from {', '.join(repr(s) for s in events)} in the "
                                         "original") for key, events in abort_events.items()}


def _fan_out_state(name: str, fork: fallbacks.Fork, start_event: str, start: bool, after_it: str) -> State:
    """The parallel state for events the original runs at once: its branches are those events' states."""
    fan_out = State(name, start=start, parallel=list(fork.branches))
    after = "the run starts" if fork.source == start_event else f"'{fork.source}' is done"
    fan_out.comments.append(f"The original runs {quoted_list(fork.branches)} in parallel once {after}, "
                            f"and '{fork.join}' waits for all of them: here they are branches.")
    fan_out.transitions.append(Transition(after_it))
    return fan_out


def _report_unready(event: _Event, reads: _Reads, late: dict[str, list[str]], diags: Diagnostics,
                    header: Header) -> None:
    """SW8117 for each key `event` reads before it is written; what --repair did about it, in the header."""
    for key, writers in reads.unready.items():
        late.setdefault(identifier(key, "input"), writers)
        diags.report("SW8117", f"event '{event.name}' reads '{key}', which only {quoted_list(writers)} "
                     "write, and they have not finished when it starts", event.span,
                     label="starts before its input is written",
                     help=f"let '{event.name}' listen to the event that writes '{key}'")
    header.repairs += reads.repairs


def _forks(working: list[_Event], order: list[str], listens: dict[str, list[str]], state_of: dict[str, str],
           values: Namespace, start: str) -> tuple[dict[str, fallbacks.Fork], list[str], dict[str, list[str]]]:
    """The original's fan-outs that become parallel states (by the parallel state's name), and the run order
    and listens with each one's branches replaced by its parallel state."""
    plain = {e.state for e in working
             if len(e.outputs) == 1 and e.outputs[0].action == "RESULT" and e.outputs[0].condition is None}
    jumped_to = {state_of.get(o.target, o.target) for e in working for o in e.outputs
                 if o.action == "GOTO" and o.target is not None}
    forks = {values.claim(f"{fork.join}_branches", "state"): fork
             for fork in fallbacks.parallel_branches(order, listens, start, plain)
             if not jumped_to & set(fork.branches)}  # a branch is entered through its parallel state only
    reduced: list[str] = []
    reduced_listens = {name: list(sources) for name, sources in listens.items()}
    for name in order:
        owner = next((p for p, f in forks.items() if name in f.branches), None)
        if owner is None:
            reduced.append(name)
        elif forks[owner].branches[0] == name:
            reduced.append(owner)
    for owner, fork in forks.items():
        reduced_listens[owner] = [fork.source]
        reduced_listens[fork.join] = [owner]
        for branch in fork.branches:
            reduced_listens.pop(branch, None)
    return forks, reduced, reduced_listens


def _agents(spec: _Spec, working: list[_Event], machine: Machine, header: Header, variables: dict[str, str]
            ) -> dict[str, str]:
    """One agent per (agent, model) pair: an agent that runs with different models is several agents."""
    models = Counter(e.model for e in working if e.model)
    machine.model = models.most_common(1)[0][0] if models else None
    names = Namespace()
    tools = Namespace()
    tool_names: dict[str, str] = {}
    agent_for: dict[str, str] = {}
    split: list[str] = []
    for declared in spec.agents:
        pairs: list[str | None] = []
        for event in working:
            if event.agent == declared.name and event.model not in pairs:
                pairs.append(event.model)
        for model in pairs or [None]:
            label = declared.name if len(pairs) < 2 else f"{declared.name} {_model_words(model)}"
            agent = Agent(names.claim(label, "agent"))
            if agent.name != identifier(declared.name, "agent") or len(pairs) > 1:
                agent.comments.append(f"AutoAgent agent \"{declared.name}\"" + (f" with {model}" if model else ""))
            agent.model = model if model != machine.model else None
            agent.prompt = placeholder_template(declared.prompt, variables) if declared.prompt else None
            for tool_name, description in declared.tools:
                if tool_name not in tool_names:
                    tool_names[tool_name] = tools.claim(tool_name, "tool")
                    note = f" ({description})" if description else ""
                    machine.tools.append(Tool(tool_names[tool_name], STAND_IN_TOOL, comments=[
                        (f"AutoAgent tool \"{tool_name}\"{note}: a stand-in until you point the import path "
                        "at your own function.")]))
                agent.tools.append(tool_names[tool_name])
            machine.agents.append(agent)
            for event in working:
                if event.agent == declared.name and event.model == model:
                    agent_for[event.name] = agent.name
        if len(pairs) > 1:
            split.append(declared.name)
    if split:
        header.differences.append(
            "An agent that runs with different models in different events is one agent per (agent, model) "
            "pair, each with its own memory: " + ", ".join(f"'{s}'" for s in split) + ".")
    return agent_for


def _model_words(model: str | None) -> str:
    return (model or "default").rsplit("/", 1)[-1]


def _producers(spec: _Spec, state_of: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """For every output key, the events that produce it, as (event name, state name), in file order."""
    producers: dict[str, list[tuple[str, str]]] = {}
    for event in spec.events:
        if event.name == spec.start or (event.name == START_EVENT and event.agent is None):
            continue
        for output in event.outputs:
            entry = (event.name, state_of[event.name])
            if entry not in producers.setdefault(output.key, []):
                producers[output.key].append(entry)
    return producers


@dataclass
class _Reads:
    """How an event's inputs are read: from the events that write them and have surely finished when it
    starts (its ancestors); a key only events beside it or after it write is not ready (SW8117)."""

    producers: dict[str, list[tuple[str, str]]]  # key -> (event, state) of its writers, in file order
    ancestors: set[str]  # the events that have finished when this one starts
    run_order: list[str]  # states in the order the import runs them
    branch_of: dict[str, str]  # a branch state -> its parallel state
    repair_mode: bool
    unready: dict[str, list[str]] = field(default_factory=dict)  # key -> its writers, none of them ready
    repairs: list[str] = field(default_factory=list)

    def value(self, event: _Event, key: str) -> str | None:
        """The template that reads `key` for `event`, or None when nothing can give it."""
        found = self.producers.get(key, [])
        ready = [p for p in found if p[0] in self.ancestors]
        if found and not ready:
            self.unready[key] = [e for e, _ in found]
            ready = [p for p in found if self._runs_first(p[1], event.state)] if self.repair_mode else []
            if ready:
                self.repairs.append(f"Event '{event.name}' reads '{key}', which {quoted_list(e for e, _ in ready)} "
                                    "write while it runs in the original: it now reads their output, which is there "
                                    "first here.")
        if not ready:
            return None
        listened = {s for s, _ in event.listens}
        preferred = [p for p in ready if p[0] in listened] or ready
        return "{{ " + " or ".join(f"{state}.output" for _, state in reversed(preferred)) + " }}"

    def _runs_first(self, writer: str, reader: str) -> bool:
        if writer not in self.run_order or reader not in self.run_order:
            return False
        if self.branch_of.get(writer) is not None and self.branch_of.get(writer) == self.branch_of.get(reader):
            return False  # two branches of one parallel state: neither is there for the other
        return self.run_order.index(writer) < self.run_order.index(reader)


def _instruction(event: _Event, input_names: dict[str, str], reads: _Reads, unproduced: dict[str, list[str]]
                 ) -> str:
    """The event's task, followed by its inputs: each one read from the machine's inputs or from the output
    of the events that produce it (the latest first, when several do)."""
    task = placeholder_template(event.task or "", input_names)
    lines = []
    for key in event.inputs:
        value = "{{ " + input_names[key] + " }}" if key in input_names else reads.value(event, key)
        if value is None:
            name = identifier(key, "input")
            unproduced.setdefault(name, []).append(event.state)
            value = "{{ " + name + " }}"
        lines.append(f"{key}: {value}")
    if not lines:
        return task
    return f"{task}\n\n" + "\n".join(lines) if task else "\n".join(lines)


def _declare_unproduced_inputs(machine: Machine, unproduced: dict[str, list[str]], late: dict[str, list[str]]
                               ) -> list[str]:
    """An input no event produces (SW2008 in literal mode), or none in time for its reader (SW8117), becomes
    a machine input."""
    changes = []
    taken = set(_taken(machine))
    for name, states in unproduced.items():
        if name in taken:
            continue
        readers = ", ".join(f"'{s}'" for s in states)
        if name in late:
            writers = quoted_list(late[name])
            machine.inputs.append(Input(name, comments=[(f"--repair: {writers} write '{name}' only while {readers} "
                                                       "run; given when the machine runs")]))
            changes.append(f"{writers} write '{name}' only while {readers} run (SW8117), and no earlier state "
                           "does here: declared it as an input of the machine.")
        else:
            machine.inputs.append(Input(name, comments=[(f"--repair: no event produces '{name}', which {readers} "
                                                       "read; given when the machine runs")]))
            changes.append(f"No event produces '{name}' ({readers} read it): declared it as an input of the "
                           "machine.")
        taken.add(name)
    return changes


def _describe(machine: Machine, header: Header, branches: list[str], aborts: dict[str, State]) -> None:
    transitions = [t for s in machine.states for t in s.transitions]
    if any(t.condition is not None for t in transitions):
        header.differences.insert(0, "A verifier judges which output an event ends with when its outputs have "
                                     "conditions; in the original the event's agent chose.")
    only_conditions = [s.name for s in machine.states
                       if s.transitions and all(t.condition is not None for t in s.transitions)]
    if only_conditions:
        header.differences.append(
            "When the verifier finds that none of a state's conditions holds, the run ends in a typed failure "
            f"({quoted_list(only_conditions)}).")
    if machine.has_cycle():
        header.differences.append("A loop ends the run in a typed failure once its bound or the step limit is "
                                  "used up; the original bounds no loop.")
    header.differences += [
        "Tool lists are enforced: an agent can call only the tools listed for it.",
        ("There is no shared transcript: each instruction carries the event's inputs, and an agent keeps only "
         "its own exchanges."),
    ]
    if branches:
        header.stand_ins.append(fallbacks.PARALLEL_NOTE.format(names=quoted_list(branches)))
    for tool in machine.tools:
        header.stand_ins.append(f"Tool '{tool.name}' is a stand-in ({tool.import_path}) until you point it at "
                                "your own function.")


def _taken(machine: Machine) -> list[str]:
    return [*(i.name for i in machine.inputs), *(s.name for s in machine.states)]
