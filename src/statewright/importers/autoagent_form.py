"""AutoAgent agent form XML, read with positions: the agents, who hands the request to whom, and what is wrong.

An agent form (`<agents>`, what AutoAgent's agent former writes) declares the system's input and output,
global variables and one `<agent>` per agent: name, description, instructions, tools, and the one input
(`<agent_input>`) and one output (`<agent_output>`) it works with. With two or more agents AutoAgent's agent
creator puts an orchestrator over them (create_orchestrator_agent): the orchestrator hands the request to an
agent through `transfer_to_<agent>(<agent_input>)`, and the agent hands its answer back through
`transfer_back_to_<orchestrator>(<agent_output>)`. A form may name those hand-offs itself, as tools of the
agent that makes them: an agent whose tools include `transfer_to_<agent>` orchestrates that agent. Names
match as AutoAgent makes function names of them: lower case, spaces as underscores.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, Span, did_you_mean, quoted_list
from .emit import literal_template
from .xml_source import XmlElement

TRANSFER_TO = "transfer_to_"
TRANSFER_BACK = "transfer_back_to_"


@dataclass
class FormTool:
    name: str
    description: str


@dataclass
class FormAgent:
    name: str
    span: Span
    description: str
    instructions: str | None
    instructions_span: Span | None
    input_key: str
    input_description: str
    output_key: str
    output_description: str
    tools: list[FormTool] = field(default_factory=list)
    hands_to: list[tuple[str, Span]] = field(default_factory=list)  # (AutoAgent name, where) of transfer_to_
    hands_back: list[tuple[str, Span]] = field(default_factory=list)  # the same for transfer_back_to_
    key: str = field(init=False)  # the name AutoAgent gives it (autoagent_name)

    def __post_init__(self) -> None:
        self.key = autoagent_name(self.name)


@dataclass
class AgentForm:
    system_input: str
    system_input_key: str | None  # a <key> inside <system_input> (not AutoAgent's form, but read if given)
    output_key: str
    output_description: str
    variables: list[tuple[str, str, str]]  # (key, description, value)
    agents: list[FormAgent] = field(default_factory=list)
    by_key: dict[str, FormAgent] = field(default_factory=dict)  # the agents by their AutoAgent names

    def agent(self, key: str) -> FormAgent:
        return self.by_key[key]

    def add(self, agent: FormAgent) -> None:
        self.agents.append(agent)
        self.by_key[agent.key] = agent

    def callers(self) -> dict[str, list[str]]:
        """Each agent's AutoAgent name -> the agents that hand it the request, in file order."""
        handed: dict[str, list[str]] = {}
        for agent in self.agents:
            for target, _ in agent.hands_to:
                handed.setdefault(target, []).append(agent.key)
        return handed


def autoagent_name(name: str) -> str:
    """The name AutoAgent's code gives an agent (`get_<name>`, `transfer_to_<name>`)."""
    return name.lower().replace(" ", "_")


def read_agent_form(root: XmlElement, diags: Diagnostics) -> AgentForm | None:
    """The form, or None after reporting why it cannot be imported; every problem is reported."""
    system_input = root.child("system_input")
    text = key = None
    if system_input is None:
        _missing(diags, root, "system_input", "the agent form", "describe what the system receives: "
                 "<system_input>...</system_input>")
    else:
        key = system_input.child_text("key")
        text = system_input.child_text("description") if key else system_input.text
    system_output = root.child("system_output")
    output_key = output_description = None
    if system_output is None:
        _missing(diags, root, "system_output", "the agent form", "say what the system answers with: "
                 "<system_output><key>...</key><description>...</description></system_output>")
    else:
        output_key = _required_text(diags, system_output, "key", "<system_output>")
        output_description = system_output.child_text("description") or ""
    form = AgentForm(text or "", key, output_key or "", output_description or "", [])
    variables = root.child("global_variables")
    for variable in variables.all("variable") if variables is not None else []:
        name = _required_text(diags, variable, "key", "a global variable")
        if name is not None:
            form.variables.append((name, variable.child_text("description") or "", variable.child_text("value") or ""))
    elements = root.all("agent")
    if not elements:
        _missing(diags, root, "agent", "the agent form", "declare the agents: <agent><name>...</name>"
                 "<instructions>...</instructions><agent_input>...</agent_input><agent_output>...</agent_output>"
                 "</agent>")
    for element in elements:
        _read_agent(element, form, diags)
    if diags.has_errors:
        return None
    _check_hand_offs(form, diags)
    return None if diags.has_errors else form


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


def _key_description(diags: Diagnostics, agent: XmlElement, tag: str, what: str) -> tuple[str, str] | None:
    """An agent's <agent_input> or <agent_output>: its key and description (the key is required)."""
    element = agent.child(tag)
    if element is None:
        role = "the request the orchestrator hands it" if tag == "agent_input" else "the answer it hands back"
        _missing(diags, agent, tag, what, f"declare {role}: <{tag}><key>...</key><description>...</description>"
                 f"</{tag}>")
        return None
    key = _required_text(diags, element, "key", f"the <{tag}> of {what}")
    return None if key is None else (key, element.child_text("description") or "")


def _read_agent(element: XmlElement, form: AgentForm, diags: Diagnostics) -> None:
    name = element.attrs.get("name") or element.child_text("name")
    if not name:
        _missing(diags, element, "name", "an agent")
        return
    what = f"agent '{name}'"
    given = _key_description(diags, element, "agent_input", what)
    answer = _key_description(diags, element, "agent_output", what)
    description = element.child_text("description") or ""
    instructions = element.child("instructions")
    if instructions is None or not instructions.text:
        where = element.span if instructions is None else instructions.span
        diags.report("SW8042", f"{what} has no instructions", where,
                     label="<instructions> is missing here" if instructions is None else "empty",
                     help="say how the agent works: <instructions>You ...</instructions> (its <description> "
                          "says what it is for, to whoever hands it the request)")
    agent = FormAgent(name, element.span, description, instructions.text or None if instructions else None,
                      instructions.value_span if instructions is not None else None, *(given or ("", "")),
                      *(answer or ("", "")))
    for group in element.all("tools"):
        for tool in group.all("tool"):
            _read_tool(tool, agent, diags)
    other = form.by_key.get(agent.key)
    if other is not None:
        same = "named" if other.name == name else f"named '{other.name}' and"
        diags.report("SW8007", f"two agents are {same} '{name}'", element.span, label="declared again here",
                     notes=[f"first declared at {other.span.label()}", f"AutoAgent names both '{agent.key}'"],
                     help="give every agent its own name")
        return
    form.add(agent)


def _read_tool(tool: XmlElement, agent: FormAgent, diags: Diagnostics) -> None:
    name_element = tool.child("name")
    name = tool.attrs.get("name") or (name_element.text if name_element is not None else "") or tool.text
    if not name:
        _missing(diags, tool, "name", "a tool")
        return
    where = name_element.value_span if name_element is not None else tool.span
    if name.startswith(TRANSFER_TO) and len(name) > len(TRANSFER_TO):
        agent.hands_to.append((name[len(TRANSFER_TO):], where))
    elif name.startswith(TRANSFER_BACK) and len(name) > len(TRANSFER_BACK):
        agent.hands_back.append((name[len(TRANSFER_BACK):], where))
    elif all(t.name != name for t in agent.tools):
        agent.tools.append(FormTool(name, tool.child_text("description") or ""))


# ---- who hands the request to whom ---------------------------------------------------------------------


def _check_hand_offs(form: AgentForm, diags: Diagnostics) -> None:
    """Every transfer_to_ names an agent of the form, and no chain of hand-offs comes back to where it began
    (an agent cannot wait for itself: a machine may not run itself)."""
    keys = list(form.by_key)
    for agent in form.agents:
        seen: set[str] = set()
        kept = []
        for target, span in agent.hands_to:
            if target not in form.by_key:
                diags.report("SW8041", f"'{TRANSFER_TO}{target}' hands the request to an unknown agent '{target}'",
                             span, label="no agent of the form has this name",
                             help=did_you_mean(target, keys) or (
                                 f"the agents are {quoted_list(keys)} (AutoAgent names a transfer function after "
                                 "the agent's name in lower case, with spaces as underscores)"))
            elif target not in seen:
                seen.add(target)
                kept.append((target, span))
        agent.hands_to = kept
    if not diags.has_errors:
        _report_cycles(form, diags)


def _report_cycles(form: AgentForm, diags: Diagnostics) -> None:
    """One SW8040 for each hand-off that closes a cycle, found by a depth-first walk with a stack of its own."""
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    for root in form.agents:
        if root.key in state:
            continue
        path: list[str] = [root.key]
        todo: list[list[tuple[str, Span]]] = [list(reversed(root.hands_to))]
        state[root.key] = 1
        while todo:
            if not todo[-1]:
                todo.pop()
                state[path.pop()] = 2
                continue
            target, span = todo[-1].pop()
            if state.get(target) == 1:
                chain = [*path[path.index(target):], target]
                diags.report("SW8040", "the hand-offs go round in a cycle: " + " -> ".join(chain), span,
                             label="hands the request back to an agent that handed it on",
                             help="an agent cannot wait for an answer from itself: remove one of the "
                                  f"transfer_to_ tools of {quoted_list(dict.fromkeys(chain[:-1]))}")
            elif target not in state:
                state[target] = 1
                path.append(target)
                todo.append(list(reversed(form.agent(target).hands_to)))


def lint_agent_form(form: AgentForm, diags: Diagnostics) -> None:
    """Warnings on what the original gets wrong: hand-backs to an agent that does not hand over, a single
    agent whose output is not the system's, instructions AutoAgent cannot fill in."""
    callers = form.callers()
    for agent in form.agents:
        mine = callers.get(agent.key, [])
        for target, span in agent.hands_back:
            if mine and target not in mine:
                diags.report("SW8050", f"agent '{agent.name}' hands back to '{target}', which does not hand to it",
                             span, label="not one of the agents that hand it the request",
                             help=did_you_mean(target, mine) or f"it is handed the request by {quoted_list(mine)}; "
                                  "the import hands its answer back to whoever handed it the request")
        _lint_instructions(agent, diags)
    if len(form.agents) == 1 and form.output_key and form.agents[0].output_key != form.output_key:
        agent = form.agents[0]
        diags.report("SW8051", f"the only agent's output '{agent.output_key}' is not the system output "
                     f"'{form.output_key}'", agent.span, label="its <agent_output> key differs",
                     help="AutoAgent's form parser refuses a single-agent form whose agent_output and "
                          "system_output keys differ: give both the same key")


def _lint_instructions(agent: FormAgent, diags: Diagnostics) -> None:
    if agent.instructions is None:
        return
    problem = format_problem(agent.instructions)
    if problem:
        diags.report("SW8052", f"the instructions of agent '{agent.name}' are not a format string AutoAgent can "
                     f"fill in: {problem}", agent.instructions_span or agent.span,
                     label="AutoAgent cannot create this agent",
                     help="write '{{' and '}}' for braces that are text, and {name} only for global variables; "
                          "the import keeps the instructions as they are written")


def format_problem(text: str) -> str:
    """Why AutoAgent could not fill in `text` (it runs `text.format(**variables)` when the text has fields),
    or '' when it can."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as e:
        return str(e)
    for _, name, _, _ in parts:
        if name is not None and not name.isidentifier():
            return f"{{{name}}} is not a variable's name" if name else "'{}' names no variable"
    return ""


def format_fields(text: str) -> list[str]:
    """The variables AutoAgent fills into `text`, in order, each once (none when it cannot fill it in)."""
    if format_problem(text):
        return []
    return list(dict.fromkeys(name for _, name, _, _ in string.Formatter().parse(text) if name))


def format_template(text: str, inputs: dict[str, str]) -> str:
    """`text` as AutoAgent shows it to the model, as a template: with fields, `str.format` fills in each
    variable (here read from its input) and makes `{{` one brace; without, or when it cannot be filled in,
    the text is used as it is."""
    if not format_fields(text):
        return literal_template(text)
    out = []
    for literal, name, _, _ in string.Formatter().parse(text):
        out.append(literal_template(literal))
        if name:
            out.append("{{ " + inputs[name] + " }}")
    return "".join(out)
