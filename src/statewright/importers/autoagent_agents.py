"""AutoAgent agent forms -> machines that run machines: each agent a machine, an orchestrator's hand-offs calls.

A form with one agent is one machine: the agent works on the system input and its answer is the result.
With more, AutoAgent puts an orchestrator over them; here the orchestrator is the machine the import writes
to its output, and every agent it hands the request to is a machine in a file of its own, in the folder
beside it (`OUT.fsm` runs `OUT/NAME.fsm`). The orchestrator's step ends in a typed choice — one type per
`transfer_to_<agent>` function, holding that function's argument, or `Answer` — and guards route on it: a
hand-off is a state that runs the agent's machine with the argument as its input and tells the orchestrator
the outcome; the orchestrator then chooses again, at most HANDOFFS times per agent (with --repair, --bound
times), until it answers.
docs/import.md shows the mapping.
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import Diagnostics, quoted_list
from .autoagent_form import AgentForm, FormAgent, format_fields, format_template, lint_agent_form
from .emit import literal_template
from .header import Header
from .model import (
    Agent,
    CalledFile,
    FieldDecl,
    Input,
    Machine,
    Run,
    State,
    TestBlock,
    TestStep,
    Tool,
    Transition,
    TypeDecl,
)
from .names import Namespace, identifier, type_name
from .skeleton import shortest_path_test

HANDOFFS = 3  # how often an orchestrator may hand the request to one agent in a run
STAND_IN_TOOL = "statewright.importers.stand_ins:unavailable_tool"
ORCHESTRATE = "orchestrate"  # the orchestrator's state
WORK = "work"  # an agent's state in its own machine


@dataclasses.dataclass
class _Plan:
    """What every machine of the import shares: their names, the variables, and who runs whom."""

    form: AgentForm
    folder: str  # the folder beside the entry's file that holds the other machines
    machine_of: dict[str, str]  # an agent's AutoAgent name -> its machine's name
    variables: dict[str, str]  # a variable's key (global or context) -> its input's name, in every machine
    defaults: dict[str, str]  # a variable's key -> its default (a global's value; a context variable's is "")
    needs: dict[str, list[str]]  # an agent -> the variables its machine takes (its own and its callees')
    handoffs: int = HANDOFFS  # the bound on each hand-off edge
    built: dict[str, Machine] = dataclasses.field(default_factory=dict)  # an agent -> its machine, once built


def import_agent_form(form: AgentForm, diags: Diagnostics, *, name: str, folder: str, header: Header
                      ) -> Machine:
    """The entry machine, named `name`; the machines it runs are in its `called` list, in `folder`."""
    lint_agent_form(form, diags)
    handed = {target for agent in form.agents for target, _ in agent.hands_to}
    roots = [a for a in form.agents if a.key not in handed]
    entry_agent = roots[0] if len(roots) == 1 else None
    plan = _plan(form, folder, name, entry_agent)
    plan.handoffs = header.bound if header.repair else HANDOFFS  # --repair: loops are bounded with --bound
    for agent in _callees_first(form):
        if agent is not entry_agent:
            plan.built[agent.key] = _agent_machine(plan, agent, plan.machine_of[agent.key], entry=False)
    if entry_agent is not None:
        entry = _agent_machine(plan, entry_agent, name, entry=True)
    else:
        entry = _orchestrator(plan, None, roots, name, entry=True)
    _describe_entry(entry, plan, entry_agent, header)
    callers = form.callers()
    entry.called = [CalledFile(f"{folder}/{plan.machine_of[a.key]}.fsm", plan.built[a.key],
                               _called_header(plan, a, header, name, callers.get(a.key, [])))
                    for a in form.agents if a is not entry_agent]
    return entry


def _plan(form: AgentForm, folder: str, name: str, entry_agent: FormAgent | None) -> _Plan:
    machines = Namespace((name,))
    machine_of = {a.key: name if a is entry_agent else machines.claim(a.name, "machine") for a in form.agents}
    names = Namespace()
    variables: dict[str, str] = {}
    defaults: dict[str, str] = {}
    read = {key for a in form.agents if a.instructions for key in format_fields(a.instructions)}
    for key, _, value in form.variables:
        if key in read and key not in variables:
            variables[key], defaults[key] = names.claim(key, "input"), value
    for agent in form.agents:
        for key in format_fields(agent.instructions or ""):
            if key not in variables:
                variables[key], defaults[key] = names.claim(key, "input"), ""
    plan = _Plan(form, folder, machine_of, variables, defaults, {})
    for agent in _callees_first(form):
        own = set(format_fields(agent.instructions or ""))
        for target, _ in agent.hands_to:
            own.update(plan.needs[target])
        plan.needs[agent.key] = [key for key in variables if key in own]
    return plan


def _callees_first(form: AgentForm) -> list[FormAgent]:
    """The agents, each after every agent it hands to (the hand-offs have no cycle), else in file order."""
    order: list[FormAgent] = []
    done: set[str] = set()
    for root in form.agents:
        stack = [(root, iter(root.hands_to))]
        on_stack = {root.key}
        while stack:
            agent, targets = stack[-1]
            target = next((t for t, _ in targets if t not in done), None)
            if target is None:
                stack.pop()
                on_stack.discard(agent.key)
                if agent.key not in done:
                    done.add(agent.key)
                    order.append(agent)
            elif target not in on_stack:
                stack.append((form.agent(target), iter(form.agent(target).hands_to)))
                on_stack.add(target)
    return order


# ---- one machine per agent -----------------------------------------------------------------------------


def _agent_machine(plan: _Plan, agent: FormAgent, name: str, *, entry: bool) -> Machine:
    """An agent that hands to others is an orchestrator; one that does not works on its input and answers."""
    if agent.hands_to:
        return _orchestrator(plan, agent, [plan.form.agent(t) for t, _ in agent.hands_to], name, entry=entry)
    values = Namespace(tuple(plan.variables.values()))
    machine = Machine(name, returns=("str",))
    given = _main_input(machine, values, agent.input_key, agent.input_description)
    _variable_inputs(machine, plan, agent.key)
    machine.agents.append(_agent(plan, agent, machine))
    work = State(values.claim(WORK, "state"), start=True, agent=machine.agents[0].name,
                 instruction="{{ " + given + " }}", origin=agent.span)
    final = _final(values, plan.form.output_key if entry else agent.output_key,
                   plan.form.output_description if entry else agent.output_description)
    work.transitions.append(Transition(final.name))
    machine.states += [work, final]
    machine.test = shortest_path_test(machine, {given: f"An example {given.replace('_', ' ')}."})
    return machine


def _orchestrator(plan: _Plan, agent: FormAgent | None, agents: list[FormAgent], name: str, *,
                  entry: bool) -> Machine:
    """An orchestrator over `agents`: the form's own (`agent`), or the one AutoAgent would make (None)."""
    values = Namespace(tuple(plan.variables.values()))
    machine = Machine(name, returns=("str",))
    form = plan.form
    if agent is None:
        given = _main_input(machine, values, form.system_input_key or "request", form.system_input,
                            "The system input")
    else:
        given = _main_input(machine, values, agent.input_key, agent.input_description)
    _variable_inputs(machine, plan, agent.key if agent is not None else None, agents)
    types = Namespace()
    answer_key = form.output_key if entry or agent is None else agent.output_key
    answer_doc = form.output_description if entry or agent is None else agent.output_description
    answer = TypeDecl(type_name("Answer", types), [FieldDecl(identifier(answer_key, "field"), ("str",),
                                                             answer_doc or "the answer")],
                      comments=["The orchestrator answers: the run ends with this answer"])
    lead = _agent(plan, agent, machine) if agent is not None else _made_orchestrator(plan, agents)
    machine.agents.append(lead)
    choose = State(values.claim(ORCHESTRATE, "state"), start=True, agent=lead.name,
                   instruction="{{ " + given + " }}", origin=agent.span if agent is not None else None)
    machine.states.append(choose)
    choices: list[str] = []
    hand_offs: list[tuple[FormAgent, State, TypeDecl]] = []
    for callee in agents:
        callee_machine = plan.built[callee.key]
        field = callee_machine.inputs[0].name
        transfer = TypeDecl(type_name("TransferTo" + _pascal(plan.machine_of[callee.key]), types), [
            FieldDecl(field, ("str",), callee.input_description or f"the request for {callee.name}")],
            comments=[f"transfer_to_{callee.key}: hands the request to agent \"{callee.name}\""])
        machine.types.append(transfer)
        choices.append(transfer.name)
        runs = State(values.claim(plan.machine_of[callee.key], "state"), tell=[lead.name], tell_origins=[None],
                     transitions=[Transition(choose.name)], run=Run(plan.machine_of[callee.key], [
                         (field, f"{choose.name}.output.{field}"),
                         *((plan.variables[k], plan.variables[k]) for k in plan.needs[callee.key])]))
        runs.comments.append(f"agent \"{callee.name}\" works on the request and hands its answer back")
        machine.states.append(runs)
        machine.uses.append(_use_path(plan, callee, entry))
        choose.transitions.append(Transition(runs.name, guard=f"output is {transfer.name}", bound=plan.handoffs))
        hand_offs.append((callee, runs, transfer))
    machine.types.append(answer)
    choose.output = ("variant", (*choices, answer.name))
    final = _final(values, answer_key, answer_doc)
    final.result = "{{ " + f"{choose.name}.output.{answer.fields[0].name}" + " }}"
    choose.transitions.append(Transition(final.name, guard=f"output is {answer.name}"))
    machine.states.append(final)
    machine.tests = [_hand_off_test(plan.built[callee.key], choose.name, given, runs, transfer, answer, final.name)
                     for callee, runs, transfer in hand_offs]
    return machine


def _main_input(machine: Machine, values: Namespace, key: str, description: str, what: str = "The request"
                ) -> str:
    item = Input(values.claim(key, "input"))
    item.comments.append(f"{what}: {description}" if description else what)
    machine.inputs.append(item)
    return item.name


def _variable_inputs(machine: Machine, plan: _Plan, key: str | None, agents: list[FormAgent] | None = None
                     ) -> None:
    """The variables a machine takes: those its agent reads, and those the machines it runs take."""
    keys = plan.needs[key] if key is not None else [
        k for k in plan.variables if any(k in plan.needs[a.key] for a in agents or [])]
    described = {k: d for k, d, _ in plan.form.variables}
    for k in keys:
        if k in described:
            note = f"A global variable: {described[k]}" if described[k] else "A global variable"
        else:
            note = "A context variable of AutoAgent: empty unless the run gives it"
        machine.inputs.append(Input(plan.variables[k], plan.defaults[k], comments=[note]))


def _agent(plan: _Plan, agent: FormAgent, machine: Machine) -> Agent:
    made = Agent(identifier(agent.name, "agent"))
    if made.name != agent.name:
        made.comments.append(f"AutoAgent agent \"{agent.name}\"")
    if agent.description:
        made.comments.append(f"Description: {agent.description}")
    made.prompt = format_template(agent.instructions or "", plan.variables)  # the form has them (SW8042)
    tools = Namespace()
    for tool in agent.tools:
        name = tools.claim(tool.name, "tool")
        note = f" ({tool.description})" if tool.description else ""
        machine.tools.append(Tool(name, STAND_IN_TOOL, comments=[
            (f"AutoAgent tool \"{tool.name}\"{note}: a stand-in until you point the import path at your own "
            "function.")]))
        made.tools.append(name)
    return made


def _made_orchestrator(plan: _Plan, agents: list[FormAgent]) -> Agent:
    """The orchestrator AutoAgent's agent creator would make over `agents`: its prompt names each of them."""
    lines = [("You orchestrate the agents below. Hand the request to the agent that should work on it next, "
             "with the input that agent needs; it hands its answer back to you. Hand the request on as often "
             "as the work needs, and answer once you have what the request asks for."), "", "The agents:"]
    for agent in agents:
        about = f": {agent.description}" if agent.description else ""
        lines.append(f"- {plan.machine_of[agent.key]}{about}")
    if plan.form.output_description:
        lines += ["", f"Your answer: {plan.form.output_description}"]
    made = Agent("orchestrator", prompt=literal_template("\n".join(lines)))
    made.comments.append("The orchestrator AutoAgent's agent creator makes over the form's agents "
                         "(create_orchestrator_agent)")
    return made


def _final(values: Namespace, key: str, description: str) -> State:
    final = State(values.claim(key or "done", "state"), final=True)
    final.comments.append(f"The answer: {description}" if description else "The answer")
    return final


def _use_path(plan: _Plan, callee: FormAgent, entry: bool) -> str:
    """A callee's file from the caller's folder: the entry is beside the folder, the others are in it."""
    file = f"{plan.machine_of[callee.key]}.fsm"
    return f"{plan.folder}/{file}" if entry else file


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


# ---- test blocks ---------------------------------------------------------------------------------------


def _hand_off_test(called: Machine, choose: str, given: str, runs: State, transfer: TypeDecl, answer: TypeDecl,
                   final: str) -> TestBlock:
    """The orchestrator hands the request on through `runs` once, the machine it runs takes its shortest
    path, and the orchestrator answers."""
    steps = [TestStep("reply", choose, None, f"{transfer.name} {_sample(transfer)}")]
    steps += [dataclasses.replace(step, state=f"{runs.name}/{step.state}") for step in _shortest_steps(called)]
    steps.append(TestStep("reply", choose, None, f"{answer.name} {_sample(answer)}"))
    assert runs.run is not None
    return TestBlock(f"hands the request to {runs.run.machine} and answers",
                     {given: f"An example {given.replace('_', ' ')}."}, steps, [choose, runs.name, choose, final],
                     final, outputs=[(runs.name, f'{{ ok true, final "{_final_of(called)}" }}')])


def _shortest_steps(machine: Machine) -> list[TestStep]:
    """The replies of a machine's shortest run: its agent's one reply, or its orchestrator's answer."""
    if machine.test is not None:
        return machine.test.steps
    start = machine.start
    assert start is not None and start.output is not None
    answer = next(t for t in machine.types if t.name == start.output[1][-1])
    return [TestStep("reply", start.name, None, f"{answer.name} {_sample(answer)}")]


def _final_of(machine: Machine) -> str:
    return next(s.name for s in machine.states if s.final)


def _sample(decl: TypeDecl) -> str:
    from ..compiler.views.source_text import double_quoted

    return "{ " + ", ".join(f"{f.name} {double_quoted('An example ' + f.name.replace('_', ' ') + '.')}"
                            for f in decl.fields) + " }"


# ---- headers -------------------------------------------------------------------------------------------


def _describe_entry(entry: Machine, plan: _Plan, entry_agent: FormAgent | None, header: Header) -> None:
    form = plan.form
    d = header.differences
    if len(form.agents) > 1:
        if entry_agent is None:
            d.append("The form names no orchestrator: AutoAgent's agent creator makes one over its agents "
                     "(create_orchestrator_agent) when it builds them. This one, 'orchestrator', is the import's; "
                     "its prompt lists the agents.")
        times = "once" if plan.handoffs == 1 else f"{plan.handoffs} times"
        d.append(f"An orchestrator hands the request to one agent at a time with a typed choice (a type per "
                 f"transfer_to_ function, holding its argument, or Answer), at most {times} per agent "
                 "in a run; in the original it calls the transfer_to_ functions, and nothing bounds how often. A "
                 "choice whose hand-offs are used up ends the run in a typed failure (`bound`).")
        d.append(f"Each agent the request is handed to is a machine of its own, in {plan.folder}/, run by a "
                 "`run` state: it works on the request afresh at each hand-off, and its answer is the call's "
                 "result, which the orchestrator is told. In the original every agent reads one shared "
                 "transcript and hands back by calling transfer_back_to_ (AutoAgent makes it call a tool at "
                 "every turn).")
    _common_differences(d, entry, entry_agent)
    unused = [key for key, _, _ in form.variables if key not in plan.variables]
    if unused:
        d.append(f"Global variables no agent's instructions read are left out: {quoted_list(unused)}.")
    context = [key for key in plan.variables if key not in {k for k, _, _ in form.variables}]
    if context:
        d.append(f"Instructions read {quoted_list(context)}, which the form does not declare: AutoAgent fills "
                 "in a context variable of that name, empty when the run gives none; here it is an input of "
                 "each machine that reads it, empty by default.")
    header.stand_ins += _stand_ins(entry)


def _called_header(plan: _Plan, agent: FormAgent, entry_header: Header, entry_name: str, handed_by: list[str]
                   ) -> Header:
    header = Header(entry_header.source_format, entry_header.path, entry_header.sha256, entry_header.repair,
                    entry_header.bound)
    callers = [plan.machine_of[key] for key in handed_by]
    runs = quoted_list(callers) if callers else f"'{entry_name}'"
    header.part = f"Agent \"{agent.name}\" of the agent form, as a machine that {runs} run{'s' if len(callers) < 2 else ''}."
    _common_differences(header.differences, plan.built[agent.key], agent)
    header.stand_ins += _stand_ins(plan.built[agent.key])
    return header


def _common_differences(d: list[str], machine: Machine, agent: FormAgent | None) -> None:
    if machine.tools:
        d.append("Tool lists are enforced: an agent can call only the tools listed for it.")
    if agent is not None and agent.hands_back:
        d.append("transfer_back_to_ is no tool here: the agent's answer ends its machine, and the call hands it "
                 "back.")


def _stand_ins(machine: Machine) -> list[str]:
    return [f"Tool '{t.name}' is a stand-in ({t.import_path}) until you point it at your own function."
            for t in machine.tools]

