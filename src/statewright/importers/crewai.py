"""A CrewAI project -> a statewright machine: tasks become states in the crew's order.

Each agent's role, goal and backstory are its prompt; each task is a state whose instruction is the task's
description, its `expected_output` as the contract of the answer, and the outputs its `context` names (or,
as CrewAI does without one, every earlier task's). `{placeholder}`s become inputs, output models become
types, `human_input` a person's review, async tasks side by side a parallel state, and a hierarchical
crew a manager that routes to its coworkers with a typed choice. docs/import.md explains each mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, quoted_list
from . import repair
from .crewai_spec import CrewAgent, CrewSpec, CrewTask, read_project
from .crewai_tools import ToolMapper
from .crewai_types import ModelTypes
from .emit import placeholder_template, placeholders
from .header import Header
from .model import Agent, FieldDecl, Input, Machine, Shape, State, Transition, TypeDecl
from .names import Namespace, identifier, type_name
from .skeleton import shortest_path_test

REVIEW_ROUNDS = 3  # how often a person's feedback may send a task back before the run moves on
DELEGATIONS = 3  # how often a manager may hand one task to the same coworker
DIVIDER = "\n\n----------\n\n"  # what CrewAI puts between the outputs of a task's context
MANAGER_ROLE = "Crew Manager"
MANAGER_GOAL = "Manage the team to complete the task in the best way possible."
MANAGER_BACKSTORY = ("You are a seasoned manager with a knack for getting the best out of your team. You "
                     "decide which coworker does what, check their work, and give the final answer yourself.")
APPROVAL = "Approval"


@dataclass
class _Names:
    """The machine's names for the crew's inputs, agents and tasks, and each task's states."""

    values: Namespace = field(default_factory=Namespace)
    agents: dict[str, str] = field(default_factory=dict)  # agent key -> agent name
    inputs: dict[str, str] = field(default_factory=dict)  # placeholder -> input name
    state: dict[str, str] = field(default_factory=dict)  # task key -> its state
    review: dict[str, str] = field(default_factory=dict)  # task key -> its review state (human_input)
    manager: str = ""
    approval: str = APPROVAL  # the type of a person's review


def import_crewai(path: str, diags: Diagnostics, *, repair_mode: bool, bound: int, header: Header
                  ) -> Machine | None:
    spec = read_project(path, diags)
    if spec is None:
        return None
    later, siblings = _lint(spec, diags)
    machine, names = _build(spec, diags, header)
    if repair_mode:
        header.repairs += _drop_unready_reads(machine, spec, names, later, siblings)
        header.repairs += repair.bound_back_edges(machine, bound)
        header.repairs += repair.end_where_stuck(machine, names.values)
    inputs = {name: spec.example_inputs.get(key, f"An example {key.replace('_', ' ')}.")
              for key, name in names.inputs.items()}
    machine.test = shortest_path_test(machine, inputs)
    if machine.test is None:
        machine.test_comment = "No test block: no final state can be reached from the start state."
    return machine


# ---- lint notes on the original ----------------------------------------------------------------------


def _lint(spec: CrewSpec, diags: Diagnostics) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """Notes on the crew; returns the context reads of a later task and of a task that runs at the same
    time, as (reader, read) pairs."""
    position = {t.key: i for i, t in enumerate(spec.tasks)}
    group_of = _async_groups(spec) if not spec.hierarchical else {}
    later: set[tuple[str, str]] = set()
    siblings: set[tuple[str, str]] = set()
    for task in spec.tasks:
        for name, span in task.context or []:
            if position[name] >= position[task.key]:
                later.add((task.key, name))
                diags.report("SW8110", f"task '{task.key}' reads '{name}', which runs after it", span,
                             label="not done yet when this task runs",
                             help=f"CrewAI refuses a context that names a later task: move '{name}' before "
                                  f"'{task.key}', or drop it from the context")
            elif group_of.get(name) is not None and group_of.get(name) == group_of.get(task.key):
                siblings.add((task.key, name))
                diags.report("SW8113", f"async task '{task.key}' reads '{name}', which runs at the same time",
                             span, label="still running when this task starts",
                             help="the output is not there yet: make one of the two tasks synchronous, or drop "
                                  "it from the context")
    if not spec.hierarchical:
        used = {t.agent[0] for t in spec.tasks if t.agent is not None}
        for agent in spec.agents:
            if agent.key not in used:
                diags.report("SW8115", f"agent '{agent.key}' does no task", agent.span, label="no task names it",
                             help="a sequential crew runs only its tasks' agents: give it a task or remove it "
                                  "(the import keeps it, unused)")
    return later, siblings


def _async_groups(spec: CrewSpec) -> dict[str, int]:
    """Runs of two or more consecutive async tasks without human input: CrewAI runs each run side by side."""
    groups: dict[str, int] = {}
    run: list[CrewTask] = []
    count = 0
    for task in [*spec.tasks, None]:
        if task is not None and task.async_execution and not task.human_input:
            run.append(task)
            continue
        if len(run) >= 2:
            count += 1
            for t in run:
                groups[t.key] = count
        run = []
    return groups


# ---- building the machine ------------------------------------------------------------------------


def _build(spec: CrewSpec, diags: Diagnostics, header: Header) -> tuple[Machine, _Names]:
    machine = Machine(identifier(spec.name, "machine"))
    names = _Names()
    for text in _texts(spec):
        for key in placeholders(text):
            if key not in names.inputs:
                names.inputs[key] = names.values.claim(key, "input")
                machine.inputs.append(Input(names.inputs[key], comments=[
                    f"{{{key}}} in the crew's YAML: given when the crew is kicked off"]))
    types = ModelTypes()
    for tree in spec.python:
        types.add_module(tree)
    tools = ToolMapper(machine, diags)
    tools.custom = spec.custom_tools
    _agents(spec, machine, names, tools)
    outputs = _output_types(spec, types, diags, header)
    machine.types = types.types
    for task in spec.tasks:
        names.state[task.key] = names.values.claim(task.key, "state")
        if task.human_input:
            names.review[task.key] = names.values.claim(f"review_{task.key}", "state")
    if any(t.human_input for t in spec.tasks):
        machine.types.append(_approval_type(types.names))
        names.approval = machine.types[-1].name
    done = State(names.values.claim("done", "state"), final=True)
    if spec.hierarchical:
        _hierarchical_states(spec, machine, names, outputs, done, types.names)
    else:
        _sequential_states(spec, machine, names, outputs, done, header)
    machine.states.append(done)
    _describe(spec, machine, names, header, types, tools)
    return machine, names


def _texts(spec: CrewSpec) -> list[str]:
    out: list[str] = []
    for agent in [*spec.agents, *([spec.manager] if spec.manager else [])]:
        out += [agent.role or "", agent.goal or "", agent.backstory or ""]
    for task in spec.tasks:
        out += [task.description or "", task.expected_output or ""]
    return out


def _agents(spec: CrewSpec, machine: Machine, names: _Names, tools: ToolMapper) -> None:
    agent_names = Namespace()
    task_tools: dict[str, list[tuple[str, object]]] = {}
    for task in spec.tasks:
        if task.agent is not None:
            task_tools.setdefault(task.agent[0], []).extend(task.tools)
    for crew_agent in spec.agents:
        agent = _agent(crew_agent, agent_names, names, spec.memory)
        for tool, span in [*crew_agent.tools, *task_tools.get(crew_agent.key, [])]:  # type: ignore[misc]
            mapped = tools.map(tool, span)  # type: ignore[arg-type]
            if mapped not in agent.tools:
                agent.tools.append(mapped)
        if crew_agent.code_execution and "std.python" not in agent.tools:
            agent.tools.append("std.python")
        machine.agents.append(agent)
    if spec.hierarchical:
        manager = spec.manager or CrewAgent("manager", spec.process_span or spec.tasks[0].span,  # type: ignore[arg-type]
                                            MANAGER_ROLE, MANAGER_GOAL, MANAGER_BACKSTORY,
                                            spec.manager_llm)
        agent = _agent(manager, agent_names, names, True)
        if spec.manager is None:
            agent.comments.append("CrewAI makes this manager for a crew with manager_llm")
        names.manager = agent.name
        machine.agents.append(agent)


def _agent(crew_agent: CrewAgent, agent_names: Namespace, names: _Names, memory: bool) -> Agent:
    agent = Agent(agent_names.claim(crew_agent.key, "agent"))
    names.agents[crew_agent.key] = agent.name
    if agent.name != crew_agent.key:
        agent.comments.append(f"CrewAI agent \"{crew_agent.key}\"")
    role, goal, backstory = (crew_agent.role or "", crew_agent.goal or "", crew_agent.backstory or "")
    prompt = f"You are {role}. {backstory}\nYour personal goal is: {goal}"
    agent.prompt = placeholder_template(prompt, names.inputs)
    agent.model = crew_agent.llm
    if not memory:
        agent.memory = "none"  # CrewAI runs each task afresh: the agent sees only what the task gives it
    return agent


def _output_types(spec: CrewSpec, types: ModelTypes, diags: Diagnostics, header: Header) -> dict[str, Shape]:
    outputs: dict[str, Shape] = {}
    for task in spec.tasks:
        if task.output_model is None:
            continue
        model, span = task.output_model
        declared = types.type_of(model)
        if declared is None:
            diags.report("SW8111", f"task '{task.key}'s {task.output_kind} model '{model}' is not in the crew's "
                         "Python source", span, label="no class of this name beside crew.py",
                         help="the import reads the models in crew.py and the Python files beside it; the "
                              "task's output is text until the model is declared there")
            header.stand_ins.append(f"Task '{task.key}': its {task.output_kind} model '{model}' is not in the "
                                    "crew's Python source, so its output is text.")
            continue
        outputs[task.key] = ("named", declared)
    return outputs


def _approval_type(type_names: Namespace) -> TypeDecl:
    return TypeDecl(type_name(APPROVAL, type_names), [
        FieldDecl("approved", ("bool",), "true when the answer can be used as it is"),
        FieldDecl("feedback", ("str",), "what to change, when it cannot"),
    ], comments=["A person's review of a task's answer (CrewAI's human_input)"])


def _instruction(task: CrewTask, spec: CrewSpec, names: _Names, reads: list[str]) -> str:
    text = placeholder_template(task.description or "", names.inputs)
    expected = placeholder_template(task.expected_output or "", names.inputs)
    parts = [text, (f"This is the expected criteria for your final answer: {expected}\n"
                   "You MUST return the actual complete content as the final answer, not a summary.")]
    if reads:
        suffix = ".output.answer" if spec.hierarchical else ".output"
        outputs = DIVIDER.join("{{ " + names.state[r] + suffix + " }}" for r in reads)
        parts.append(f"This is the context you're working with:\n{outputs}")
    if task.key in names.review:
        review, state = names.review[task.key], names.state[task.key]
        answer = f"{state}.output.answer" if spec.hierarchical else f"{state}.output"
        previous = ("{% if " + state + ".output %}" + "{{ " + answer + " }}{% endif %}" if spec.hierarchical
                    else "{{ " + answer + " }}")
        parts.append("{% if " + review + ".output %}A person reviewed your previous answer and asked for "
                     "changes:\n{{ " + review + ".output.feedback }}\n\nYour previous answer:\n" + previous +
                     "{% endif %}")
    return "\n\n".join(p for p in parts if p)


def _reads(task: CrewTask, spec: CrewSpec, last_sync: str | None) -> list[str]:
    """The tasks whose outputs this task reads: its context, or CrewAI's default without one (every
    earlier task; for an async task, the last synchronous one)."""
    if task.context is not None:
        return [name for name, _ in task.context]
    if task.async_execution and not spec.hierarchical:
        return [last_sync] if last_sync else []
    earlier = [t.key for t in spec.tasks]
    return earlier[: earlier.index(task.key)]


def _review_state(task: CrewTask, names: _Names, then: str, spec: CrewSpec) -> State:
    state, review = names.state[task.key], names.review[task.key]
    answer = f"{state}.output.answer" if spec.hierarchical else f"{state}.output"
    expected = placeholder_template(task.expected_output or "", names.inputs)
    question = (f"Review the answer to the task '{task.key}' (expected: {expected}):\n\n{{{{ {answer} }}}}\n\n"
                "Approve it, or say what to change.")
    return State(review, ask=question, output=("named", names.approval), transitions=[
        Transition(then, guard="output.approved", sample_fires=True),
        Transition(state, bound=REVIEW_ROUNDS),
        Transition(then, otherwise=True),
    ], comments=[f"CrewAI's human_input on task '{task.key}'"])


def _sequential_states(spec: CrewSpec, machine: Machine, names: _Names, outputs: dict[str, Shape], done: State,
                       header: Header) -> None:
    groups = _async_groups(spec)
    units: list[list[State]] = []  # each unit's states; its first is its entry, its last leads on
    last_sync: str | None = None
    i = 0
    while i < len(spec.tasks):
        task = spec.tasks[i]
        group = [t for t in spec.tasks[i:] if groups.get(t.key) == groups.get(task.key)] if task.key in groups \
            else [task]
        if task.key in groups:
            fan = State(names.values.claim(f"{group[0].key}_parallel", "state"), parallel=[names.state[t.key] for t in group])
            fan.comments.append(f"CrewAI runs the async tasks {quoted_list(t.key for t in group)} at the same time")
            branches = []
            for t in group:
                branches.append(_task_state(t, spec, names, outputs, _reads(t, spec, last_sync), branch=True))
            units.append([fan, *branches])
        else:
            state = _task_state(task, spec, names, outputs, _reads(task, spec, last_sync))
            unit = [state]
            if task.key in names.review:
                unit.append(State(names.review[task.key]))  # its transitions are made below
            units.append(unit)
            if not task.async_execution:
                last_sync = task.key
        i += len(group)
    for index, unit in enumerate(units):
        then = units[index + 1][0].name if index + 1 < len(units) else done.name
        head = unit[0]
        head.start = index == 0
        if head.parallel:
            head.transitions.append(Transition(then))
        else:
            head.transitions.append(Transition(unit[1].name if len(unit) > 1 else then))
            if len(unit) > 1:
                task = next(t for t in spec.tasks if names.state[t.key] == head.name)
                unit[1] = _review_state(task, names, then, spec)
        machine.states.extend(unit)
    last = spec.tasks[-1]
    if last.key in names.review or last.key in groups:
        done.result = "{{ " + names.state[last.key] + ".output }}"


def _task_state(task: CrewTask, spec: CrewSpec, names: _Names, outputs: dict[str, Shape], reads: list[str],
                branch: bool = False) -> State:
    agent = task.agent[0] if task.agent is not None else None
    state = State(names.state[task.key], agent=names.agents.get(agent) if agent else None, origin=task.span,
                  branch=branch, output=outputs.get(task.key))
    if state.name != task.key:
        state.comments.append(f"CrewAI task \"{task.key}\"")
    state.instruction = _instruction(task, spec, names, reads)
    return state


def _hierarchical_states(spec: CrewSpec, machine: Machine, names: _Names, outputs: dict[str, Shape], done: State,
                         type_names: Namespace) -> None:
    delegations: dict[tuple[tuple[str, ...], Shape], str] = {}
    for index, task in enumerate(spec.tasks):
        workers = [task.agent[0]] if task.agent is not None else [a.key for a in spec.agents]
        answer: Shape = outputs.get(task.key, ("str",))
        key = (tuple(workers), answer)
        if key not in delegations:
            delegations[key] = _delegation_type(machine, type_names, [names.agents[w] for w in workers], answer)
        following = spec.tasks[index + 1] if index + 1 < len(spec.tasks) else None
        then = names.state[following.key] if following is not None else done.name
        state = State(names.state[task.key], start=index == 0, agent=names.manager, origin=task.span,
                      output=("named", delegations[key]))
        if state.name != task.key:
            state.comments.append(f"CrewAI task \"{task.key}\"")
        coworkers = "\n".join(f"- {names.agents[w]}: " + placeholder_template(spec.agent(w).role or w, names.inputs)  # type: ignore[union-attr]
                              for w in workers)
        state.instruction = (_instruction(task, spec, names, _reads(task, spec, None)) +
                             "\n\nYour coworkers:\n" + coworkers + "\n\nHand the next piece of work to one coworker "
                             "(name it as the coworker and write the request with all it needs), or choose done and "
                             "give your final answer.")
        after = names.review.get(task.key, then)
        worker_states = []
        for w in workers:
            worker = names.values.claim(f"{task.key}_{names.agents[w]}", "state")
            state.transitions.append(Transition(worker, guard=f"output.coworker == \"{names.agents[w]}\"",
                                                bound=DELEGATIONS))
            worker_states.append(State(worker, agent=names.agents[w], instruction="{{ " + state.name +
                                       ".output.request }}", tell=[names.manager], tell_origins=[None],
                                       transitions=[Transition(state.name)],
                                       comments=[f"{names.agents[w]} works for the manager on '{task.key}'"]))
        state.transitions.append(Transition(after))
        machine.states.append(state)
        if task.key in names.review:
            machine.states.append(_review_state(task, names, then, spec))
        machine.states.extend(worker_states)
    done.result = "{{ " + names.state[spec.tasks[-1].key] + ".output.answer }}"


def _delegation_type(machine: Machine, type_names: Namespace, workers: list[str], answer: Shape) -> str:
    name = type_name("Delegation", type_names)
    machine.types.append(TypeDecl(name, [
        FieldDecl("coworker", ("enum", ("done", *workers)), "who works next: a coworker, or done to give the answer"),
        FieldDecl("request", ("str",), "the work or the question for the coworker, with all it needs"),
        FieldDecl("answer", ("opt", answer), "your final answer to the task, when the coworker is done"),
    ], comments=["The manager's choice in a hierarchical crew"]))
    return name


def _describe(spec: CrewSpec, machine: Machine, names: _Names, header: Header, types: ModelTypes,
              tools: ToolMapper) -> None:
    d = header.differences
    if not spec.memory:
        d.append("An agent works on each task afresh (`memory none`): it sees its prompt, the task and the "
                 "outputs the task reads, as in CrewAI without crew memory.")
    if any(t.output_model for t in spec.tasks):
        d.append("A typed output (output_pydantic, output_json) is requested as structured output and validated; "
                 "an invalid answer is sent back with the errors at most twice, then the run fails with `output`.")
    files = [f"'{t.key}' ({t.output_file})" for t in spec.tasks if t.output_file]
    if files:
        d.append("No file is written for output_file: each task's answer is its state's output, and the last one "
                 "the run's result (" + ", ".join(files) + ").")
    d.append("Tool lists are enforced: an agent can call only the tools listed for it.")
    if any(t.tools for t in spec.tasks):
        d.append("Tools given to a task are given to its agent for every task the agent does.")
    for task in spec.tasks:
        if task.key in names.review:
            d.append(f"A person reviews the answer to '{task.key}' and may send it back at most {REVIEW_ROUNDS} "
                     "times; CrewAI asks again until the person answers with nothing.")
    if spec.hierarchical:
        d.append(f"The manager chooses one coworker at a time with a typed choice, at most {DELEGATIONS} times "
                 "per coworker and task, and gives the task's answer when it chooses done; CrewAI's manager calls "
                 "its delegation tools until its iterations (max_iter) run out.")
        if any(t.async_execution for t in spec.tasks):
            d.append("The manager does the tasks one after another: async_execution is not kept in a hierarchical "
                     "crew.")
    if spec.planning:
        d.append("CrewAI's planning (planning=True) is not kept: no plan is made and added to the tasks before "
                 "the crew runs; a planning state before the first task would do it.")
    if not spec.has_crew_class:
        d.append("No @CrewBase class binds the YAML: the tasks run in the order tasks.yaml writes them.")
    for where in types.as_text:
        header.stand_ins.append(f"Field {where} has no counterpart in the language: it is text.")
    for tool in machine.tools:
        header.stand_ins.append(f"Tool '{tool.name}' is a stand-in ({tool.import_path}) until you point it at "
                                "your own function.")


def _drop_unready_reads(machine: Machine, spec: CrewSpec, names: _Names, later: set[tuple[str, str]],
                        siblings: set[tuple[str, str]]) -> list[str]:
    """--repair: a task no longer reads a task that has not finished when it starts (SW8110, SW8113)."""
    changes: list[str] = []
    for reader, read in sorted(later | siblings, key=lambda p: ([t.key for t in spec.tasks].index(p[0]), p[1])):
        task = next(t for t in spec.tasks if t.key == reader)
        assert task.context is not None
        task.context = [(n, s) for n, s in task.context if n != read]
        why = "runs after it" if (reader, read) in later else "runs at the same time"
        changes.append(f"Task '{reader}' no longer reads '{read}', which {why}.")
        machine.state(names.state[reader]).instruction = _instruction(task, spec, names, _reads(task, spec, None))
    return changes
