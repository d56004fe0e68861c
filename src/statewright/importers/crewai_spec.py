"""A CrewAI project read into one spec: its agents and tasks as config/agents.yaml and config/tasks.yaml
write them, merged with what the `@CrewBase` class in crew.py binds (keywords given in code win over the
YAML, as in CrewAI), in the crew's order, with every reference checked and every problem positioned.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..diagnostics import Diagnostics, SourceFile, Span
from ..grammar.parser import read_limited, read_named_file, read_source
from .crewai_python import PyCall, PySource, call_name, parse_python, self_method
from .json_source import JsonValue
from .schema import JsonSchema, anchor, unknown
from .yaml_source import parse_yaml

Ref = tuple[str, Span]  # a name, and where it was written


@dataclass
class CrewAgent:
    key: str  # the name tasks use for it: its @agent method, or its key in agents.yaml
    span: Span
    role: str | None = None
    goal: str | None = None
    backstory: str | None = None
    llm: str | None = None
    tools: list[Ref] = field(default_factory=list)
    code_execution: bool = False


@dataclass
class CrewTask:
    key: str
    span: Span
    description: str | None = None
    expected_output: str | None = None
    agent: Ref | None = None
    context: list[Ref] | None = None  # None: not given (the earlier tasks' outputs)
    tools: list[Ref] = field(default_factory=list)
    output_model: Ref | None = None
    output_kind: str = ""  # output_pydantic or output_json
    human_input: bool = False
    async_execution: bool = False
    output_file: str | None = None


@dataclass
class CrewSpec:
    name: str
    files: list[SourceFile]
    agents: list[CrewAgent] = field(default_factory=list)
    tasks: list[CrewTask] = field(default_factory=list)
    hierarchical: bool = False
    process_span: Span | None = None
    manager: CrewAgent | None = None  # a custom manager agent (manager_agent=...)
    manager_llm: str | None = None
    memory: bool = False
    python: list[ast.Module] = field(default_factory=list)  # every Python file read, for the models
    example_inputs: dict[str, str] = field(default_factory=dict)  # from main.py's `inputs = {...}`
    has_crew_class: bool = False
    custom_tools: set[str] = field(default_factory=set)  # the crew's own @tool functions and methods
    planning: bool = False  # Crew(planning=True): CrewAI plans every task before the crew runs

    def agent(self, key: str) -> CrewAgent | None:
        return next((a for a in self.agents if a.key == key), None)


# ---- finding the files ------------------------------------------------------------------------------


@dataclass
class ProjectFiles:
    root: Path
    crew: Path | None
    agents: Path | None
    tasks: Path | None
    python: list[Path]  # every .py file beside crew.py (models live there too)
    main: Path | None


def locate(path: str) -> ProjectFiles:
    """The files of the project at `path`: the project folder, its package folder, crew.py itself or the
    config folder. Raises FileNotFoundError when none of these is there."""
    given = Path(path)
    if given.is_file():
        if given.suffix != ".py":
            raise FileNotFoundError(f"{path} is not a CrewAI project: give the project's folder or its crew.py")
        crew: Path | None = given
    elif given.is_dir():
        crew = _find_crew(given)
    else:
        raise FileNotFoundError(f"{path}: no such file or folder")
    if crew is not None:
        base = crew.parent
        agents_rel, tasks_rel = _config_paths(crew)
        agents, tasks = base / agents_rel, base / tasks_rel
    elif (given / "agents.yaml").exists() or (given / "tasks.yaml").exists():
        base, agents, tasks = given, given / "agents.yaml", given / "tasks.yaml"
    else:
        base, agents, tasks = given, given / "config" / "agents.yaml", given / "config" / "tasks.yaml"
    # only regular files (a folder, a FIFO or a device named *.py is not Python to read)
    python = sorted(p for p in base.glob("*.py") if p != crew and p.name != "main.py" and p.is_file()) if crew else []
    main = base / "main.py" if crew is not None and (base / "main.py").is_file() else None
    if crew is not None:
        text = _head_text(crew)
        for config, kind in ((agents, "agents_config"), (tasks, "tasks_config")):
            if not config.is_file() and f"{kind}[" in text.replace(" ", "").replace("self.", ""):
                what = "not a regular file" if config.exists() else "not there"
                raise FileNotFoundError(f"{crew} reads its {kind} from {os.path.relpath(config, base)}, which is "
                                        f"{what}")
    found = ProjectFiles(given, crew, agents if agents.is_file() else None, tasks if tasks.is_file() else None,
                         python, main)
    if found.crew is None and (found.agents is None or found.tasks is None):
        raise FileNotFoundError(f"{path} is not a CrewAI project: found no crew.py and no config/agents.yaml "
                                "with config/tasks.yaml in it")
    return found


def _find_crew(folder: Path) -> Path | None:
    """crew.py at the top, under src/NAME/ or one folder down; else the one Python file in those places (or a
    flow's crews/NAME/) that holds a @CrewBase class (a flow's crew is NAME_crew.py). Several such files
    are ambiguous: FileNotFoundError names them."""
    for candidate in [folder / "crew.py", *sorted(folder.glob("src/*/crew.py")), *sorted(folder.glob("*/crew.py"))]:
        if candidate.is_file():
            return candidate
    patterns = ("*.py", "src/*/*.py", "*/*.py", "crews/*/*.py", "src/*/crews/*/*.py")
    found = sorted({p for pattern in patterns for p in folder.glob(pattern) if p.is_file() and _binds_crew(p)})
    if len(found) > 1:
        names = ", ".join(str(p.relative_to(folder)) for p in found)
        raise FileNotFoundError(f"{folder} holds several crews ({names}): name the one to import")
    return found[0] if found else None


def _binds_crew(path: Path) -> bool:
    try:
        return "@CrewBase" in _head_text(path)
    except OSError:
        return False


def _head_text(path: Path) -> str:
    """A Python file's text as far as the size limit reads it (one past it: longer files are refused when
    they are read for the import; what decides which file is the crew never reads further)."""
    with path.open("rb") as stream:
        return read_limited(stream).decode("utf-8", errors="replace")


def _config_paths(crew: Path) -> tuple[str, str]:
    """The config paths the crew class names (`agents_config = 'config/agents.yaml'`), or CrewAI's defaults."""
    agents, tasks = "config/agents.yaml", "config/tasks.yaml"
    try:
        tree = ast.parse(_head_text(crew))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return agents, tasks
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                if node.targets[0].id == "agents_config":
                    agents = value.value
                elif node.targets[0].id == "tasks_config":
                    tasks = value.value
    return agents, tasks


def display_path(file: Path, root: Path, given: str) -> str:
    """How diagnostics name a file of the project: as a path from where the command was given."""
    base = root if root.is_dir() else root.parent
    rel = os.path.relpath(file, base)
    if given in (".", "./") or (root.is_file() and os.path.dirname(given) in ("", ".")):
        return rel
    prefix = given if root.is_dir() else os.path.dirname(given)
    return os.path.normpath(os.path.join(prefix, rel))


# ---- reading ----------------------------------------------------------------------------------------


def read_project(path: str, diags: Diagnostics) -> CrewSpec | None:
    files = locate(path)
    sources: list[SourceFile] = []

    def load(file: Path | None, into: Diagnostics = diags) -> SourceFile | None:
        if file is None:
            return None
        # a regular file, read no further than the size limit (SW1021 past it, into `into`); OSError names
        # the file
        source = read_source(display_path(file, files.root, path), read_named_file(str(file)), into)
        if source is None:
            return None
        sources.append(source)
        return source

    agents_source, tasks_source, crew_source = load(files.agents), load(files.tasks), load(files.crew)
    name = (files.crew.parent if files.crew else files.root).name
    spec = CrewSpec(name, sources)
    py = parse_python(crew_source, diags) if crew_source is not None else None
    agents_yaml = _yaml_mapping(agents_source, "agents", diags)
    tasks_yaml = _yaml_mapping(tasks_source, "tasks", diags)
    if diags.has_errors:
        return None
    if py is not None:
        spec.python.append(py.tree)
        spec.has_crew_class = py.class_name is not None
        spec.custom_tools = set(py.tool_functions) | py.tool_methods
        if py.class_name:
            spec.name = py.class_name
        for extra in files.python:
            try:  # (one too large to read, like one that does not parse, only hides its models)
                source = load(extra, Diagnostics())
            except OSError:  # swapped for what cannot be read since it was found: it only hides its models
                continue
            extra_py = parse_python(source, Diagnostics()) if source is not None else None
            if extra_py is not None:  # a sibling that does not parse only hides its models
                spec.python.append(extra_py.tree)
        if files.main is not None:
            try:
                main_source = load(files.main, Diagnostics())
            except OSError:  # as for the models: only its example inputs are lost
                main_source = None
            main_py = parse_python(main_source, Diagnostics()) if main_source is not None else None
            if main_py is not None:
                spec.example_inputs = _example_inputs(main_py.tree)
    schema = JsonSchema(diags)
    _read_agents(spec, py, agents_yaml, schema)
    _read_tasks(spec, py, tasks_yaml, schema)
    if py is not None and py.crew is not None:
        _read_crew(spec, py, py.crew, diags)
    if diags.has_errors:
        return None
    check_references(spec, diags)
    return None if diags.has_errors else spec


def _yaml_mapping(source: SourceFile | None, what: str, diags: Diagnostics) -> JsonValue | None:
    if source is None:
        return None
    if not source.text.strip():
        diags.report("SW8003", f"the {what} file is empty", source.span(0, len(source.text)), label="nothing here",
                     help=f"CrewAI's {what}.yaml maps each {what[:-1]}'s name to its settings")
        return None
    root = parse_yaml(source, diags)
    if root is None:
        return None
    if root.kind != "object":
        diags.report("SW8005", f"the {what} file must map names to settings, not hold {_kind(root)}", root.span,
                     label="expected a mapping", help=f"write each {what[:-1]} as `name:` followed by its settings")
        return None
    return root


def _kind(value: JsonValue) -> str:
    from .json_source import describe

    return describe(value)


def _text(schema: JsonSchema, value: JsonValue | None, what: str) -> str | None:
    text = schema.text(value, what)
    return " ".join(text.split()) if text is not None and "\n" not in text.strip() else (
        text.strip() if text is not None else None)


def _read_agents(spec: CrewSpec, py: PySource | None, yaml: JsonValue | None, schema: JsonSchema) -> None:
    configs = yaml.members if yaml is not None else {}
    methods = py.agents if py is not None and py.agents else []
    manager = py.crew.keywords.get("manager_agent") if py is not None and py.crew is not None else None
    helper = next((h for h in py.helpers if h.method == self_method(manager)), None) if py and manager else None
    if helper is not None and helper.call == "Agent":  # a manager agent the crew class does not mark @agent
        methods = [*methods, helper]
    if methods:
        for method in methods:
            agent = CrewAgent(method.method, method.span)
            config = _config(method, configs, "agent", schema, py)
            _agent_settings(agent, config, schema)
            _agent_code(agent, method, py, schema)  # type: ignore[arg-type]
            _require(agent.role, agent.goal, agent.backstory, agent, config, schema)
            spec.agents.append(agent)
        return
    for key, (key_span, value) in configs.items():
        agent = CrewAgent(key, key_span)
        config = schema.object(value, f"agent '{key}'")
        _agent_settings(agent, config, schema)
        _require(agent.role, agent.goal, agent.backstory, agent, config, schema)
        spec.agents.append(agent)


def _require(role: str | None, goal: str | None, backstory: str | None, agent: CrewAgent,
             config: JsonValue | None, schema: JsonSchema) -> None:
    if config is None and agent.role is None and agent.goal is None and agent.backstory is None and \
            schema.diagnostics.has_errors:
        return  # its config was refused already
    for key, value in (("role", role), ("goal", goal), ("backstory", backstory)):
        if value is None and (config is None or config.get(key) is None):
            schema.diagnostics.report("SW8004", f"agent '{agent.key}' has no '{key}'",
                                      anchor(config) if config is not None else agent.span,
                                      label=f"'{key}' is missing here",
                                      help=f"CrewAI requires every agent's role, goal and backstory: add `{key}: ...`")


def _config(method: PyCall, configs: dict[str, tuple[Span, JsonValue]], kind: str, schema: JsonSchema,
            py: PySource | None) -> JsonValue | None:
    key = method.config_key
    if key is None:
        return None
    if key not in configs:
        node = method.keywords.get("config")
        span = py.span(node) if py is not None and node is not None else method.span
        unknown(schema.diagnostics, f"{kind} config", key, span, configs, f"not in {kind}s.yaml")
        return None
    return schema.object(configs[key][1], f"{kind} '{key}'")


def _agent_settings(agent: CrewAgent, config: JsonValue | None, schema: JsonSchema) -> None:
    if config is None:
        return
    agent.role = _text(schema, config.get("role"), "an agent's 'role'")
    agent.goal = _text(schema, config.get("goal"), "an agent's 'goal'")
    agent.backstory = _text(schema, config.get("backstory"), "an agent's 'backstory'")
    llm = schema.text(config.get("llm"), "an agent's 'llm'")
    agent.llm = llm.strip() if llm is not None else None
    agent.tools = _yaml_names(schema, config.get("tools"), "an agent's 'tools'")
    agent.code_execution = schema.flag(config.get("allow_code_execution"), "'allow_code_execution'")


def _yaml_names(schema: JsonSchema, value: JsonValue | None, what: str) -> list[Ref]:
    refs = []
    if value is not None and value.kind == "string":  # `context: research_task`: one name
        return [(str(value.value).strip(), value.span)]
    for item in schema.array(value, what):
        name = schema.text(item, what.replace("'s '", "'s item of '"))
        if name is not None:
            refs.append((name.strip(), item.span))
    return refs


def _agent_code(agent: CrewAgent, method: PyCall, py: PySource, schema: JsonSchema) -> None:
    kw = method.keywords
    for key in ("role", "goal", "backstory"):
        if key in kw:
            value = _code_text(kw[key], py, schema, f"agent '{agent.key}'s {key}")
            if value is not None:
                setattr(agent, key, " ".join(value.split()))
    if "llm" in kw:
        agent.llm = _llm(kw["llm"])
        if agent.llm is None:
            computed(schema.diagnostics, py.span(kw["llm"]), f"agent '{agent.key}'s llm")
    if "tools" in kw:
        agent.tools = code_tools(kw["tools"], py, schema)
    flag = kw.get("allow_code_execution")
    if isinstance(flag, ast.Constant) and flag.value is True:
        agent.code_execution = True


def _code_text(node: ast.expr, py: PySource, schema: JsonSchema, what: str) -> str | None:
    """A text given in code: a literal, a module-level constant or an f-string without fields; anything
    else is noted (SW8114) and stands as a marker the reader of the import will see."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)  # type: ignore[attr-defined]
    if isinstance(node, ast.Name) and isinstance(py.assigned.get(node.id), ast.Constant):
        value = py.assigned[node.id].value  # type: ignore[attr-defined]
        if isinstance(value, str):
            return value
    computed(schema.diagnostics, py.span(node), what)
    return f"({what.split(' ', 2)[-1]}: computed in crew.py when the crew runs)"


def computed(diags: Diagnostics, span: Span, what: str) -> None:
    diags.report("SW8114", f"{what} is computed when the crew runs: the importer reads only literal values",
                 span, label="not a literal", help="write the value out, in the YAML or as a string literal, and "
                 "import again; the imported machine leaves it out")


def _llm(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Call):  # LLM(model="..."), ChatOpenAI(model_name="...")
        for kw in node.keywords:
            if kw.arg in ("model", "model_name") and isinstance(kw.value, ast.Constant) and isinstance(
                    kw.value.value, str):
                return kw.value.value
    return None


def code_tools(node: ast.expr, py: PySource, schema: JsonSchema) -> list[Ref]:
    """The tools a `tools=[...]` list names: a class it instantiates, a `@tool` function or method, or a
    module-level variable holding one of those."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        computed(schema.diagnostics, py.span(node), "this list of tools")
        return []
    refs: list[Ref] = []
    for item in node.elts:
        name = self_method(item) if self_method(item) in py.tool_methods else None
        if name is None and isinstance(item, ast.Name):
            value = py.assigned.get(item.id)
            name = item.id if item.id in py.tool_functions or value is None else call_name(value) or item.id
        if name is None:
            name = call_name(item)
        if name is None:
            computed(schema.diagnostics, py.span(item), "this tool")
            continue
        refs.append((name, py.span(item)))
    return refs


def _read_tasks(spec: CrewSpec, py: PySource | None, yaml: JsonValue | None, schema: JsonSchema) -> None:
    configs = yaml.members if yaml is not None else {}
    methods = py.tasks if py is not None and py.tasks else []
    if methods:
        for method in methods:
            task = CrewTask(method.method, method.span)
            config = _config(method, configs, "task", schema, py)
            _task_settings(task, config, schema)
            _task_code(task, method, py, schema)  # type: ignore[arg-type]
            _require_task(task, config, schema)
            spec.tasks.append(task)
        return
    for key, (key_span, value) in configs.items():
        task = CrewTask(key, key_span)
        config = schema.object(value, f"task '{key}'")
        _task_settings(task, config, schema)
        _require_task(task, config, schema)
        spec.tasks.append(task)


def _require_task(task: CrewTask, config: JsonValue | None, schema: JsonSchema) -> None:
    if config is None and task.description is None and schema.diagnostics.has_errors:
        return  # its config was refused already
    for key in ("description", "expected_output"):
        if getattr(task, key) is None and (config is None or config.get(key) is None):
            schema.diagnostics.report("SW8004", f"task '{task.key}' has no '{key}'",
                                      anchor(config) if config is not None else task.span,
                                      label=f"'{key}' is missing here",
                                      help=f"CrewAI requires every task's description and expected_output: add "
                                           f"`{key}: ...`")


def _task_settings(task: CrewTask, config: JsonValue | None, schema: JsonSchema) -> None:
    if config is None:
        return
    task.description = _text(schema, config.get("description"), "a task's 'description'")
    task.expected_output = _text(schema, config.get("expected_output"), "a task's 'expected_output'")
    agent = config.get("agent")
    name = schema.text(agent, "a task's 'agent'")
    if name is not None and agent is not None:
        task.agent = (name.strip(), agent.span)
    if config.get("context") is not None:
        task.context = _yaml_names(schema, config.get("context"), "a task's 'context'")
    task.tools = _yaml_names(schema, config.get("tools"), "a task's 'tools'")
    for kind in ("output_pydantic", "output_json"):
        value = config.get(kind)
        model = schema.text(value, f"a task's '{kind}'")
        if model is not None and value is not None:
            task.output_model, task.output_kind = (model, value.span), kind
    task.output_file = schema.text(config.get("output_file"), "a task's 'output_file'")
    task.human_input = schema.flag(config.get("human_input"), "'human_input'")
    task.async_execution = schema.flag(config.get("async_execution"), "'async_execution'")


def _task_code(task: CrewTask, method: PyCall, py: PySource, schema: JsonSchema) -> None:
    kw = method.keywords
    for key in ("description", "expected_output"):
        if key in kw:
            value = _code_text(kw[key], py, schema, f"task '{task.key}'s {key}")
            if value is not None:
                setattr(task, key, value.strip())
    if "agent" in kw:
        target = self_method(kw["agent"])
        if target is None:
            computed(schema.diagnostics, py.span(kw["agent"]), f"task '{task.key}'s agent")
        else:
            task.agent = (target, py.span(kw["agent"]))
    if "context" in kw:
        node = kw["context"]
        if isinstance(node, (ast.List, ast.Tuple)):
            task.context = []
            for item in node.elts:
                target = self_method(item)
                if target is None:
                    computed(schema.diagnostics, py.span(item), "this context task")
                else:
                    task.context.append((target, py.span(item)))
        else:
            computed(schema.diagnostics, py.span(node), f"task '{task.key}'s context")
    if "tools" in kw:
        task.tools = code_tools(kw["tools"], py, schema)
    for kind in ("output_pydantic", "output_json"):
        if kind in kw and (model := call_name(kw[kind])) is not None:
            task.output_model, task.output_kind = (model, py.span(kw[kind])), kind
    output_file = kw.get("output_file")
    if isinstance(output_file, ast.Constant) and isinstance(output_file.value, str):
        task.output_file = output_file.value
    for flag in ("human_input", "async_execution"):
        flag_value = kw.get(flag)
        if isinstance(flag_value, ast.Constant) and isinstance(flag_value.value, bool):
            setattr(task, flag, flag_value.value)


def _read_crew(spec: CrewSpec, py: PySource, crew: PyCall, diags: Diagnostics) -> None:
    kw = crew.keywords
    process = kw.get("process")
    if process is not None:
        spec.process_span = py.span(process)
        spec.hierarchical = call_name(process) == "hierarchical" or (
            isinstance(process, ast.Constant) and process.value == "hierarchical")
    if "manager_llm" in kw:
        spec.manager_llm = _llm(kw["manager_llm"]) or "the manager's model"
    if "manager_agent" in kw:
        key = self_method(kw["manager_agent"])
        manager = spec.agent(key) if key is not None else None
        if manager is None:
            computed(diags, py.span(kw["manager_agent"]), "the crew's manager agent")
        else:
            spec.manager = manager
            spec.agents.remove(manager)  # CrewAI keeps the manager out of the crew's agents
    memory = kw.get("memory")
    spec.memory = isinstance(memory, ast.Constant) and memory.value is True
    planning = kw.get("planning")
    spec.planning = isinstance(planning, ast.Constant) and planning.value is True
    tasks = kw.get("tasks")
    if isinstance(tasks, (ast.List, ast.Tuple)):  # an explicit order: tasks=[self.a(), self.b()]
        by_key = {t.key: t for t in spec.tasks}
        ordered = [by_key[m] for item in tasks.elts if (m := self_method(item)) in by_key]
        if ordered:
            spec.tasks = ordered


def _example_inputs(tree: ast.Module) -> dict[str, str]:
    """The first `inputs = {"topic": "..."}` in main.py: the values the crew is kicked off with."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                isinstance(t, ast.Name) and t.id == "inputs" for t in node.targets):
            found = {}
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Constant):
                    found[k.value] = str(v.value)
            return found
    return {}


# ---- references -------------------------------------------------------------------------------------


def check_references(spec: CrewSpec, diags: Diagnostics) -> None:
    agent_keys = [a.key for a in spec.agents] + ([spec.manager.key] if spec.manager else [])
    task_keys = [t.key for t in spec.tasks]
    for task in spec.tasks:
        if task.agent is not None and task.agent[0] not in agent_keys:
            unknown(diags, "agent", task.agent[0], task.agent[1], agent_keys, "no agent of the crew has this name")
        if task.agent is None and not spec.hierarchical:
            diags.report("SW8004", f"task '{task.key}' has no agent", task.span, label="no agent does this task",
                         help="a sequential crew needs an agent for every task: add `agent: NAME` to it (only a "
                              "hierarchical crew's manager chooses the agent itself)")
        for name, span in task.context or []:
            if name not in task_keys:
                unknown(diags, "task", name, span, task_keys, "no task of the crew has this name")
    if spec.hierarchical and spec.manager is None and spec.manager_llm is None:
        diags.report("SW8013", "a hierarchical crew without a manager", spec.process_span,
                     label="Process.hierarchical", help="give the crew `manager_llm=\"...\"` or "
                     "`manager_agent=self.NAME()`, as CrewAI requires")
    if not diags.has_errors:
        _check_context_cycles(spec, diags)


def _check_context_cycles(spec: CrewSpec, diags: Diagnostics) -> None:
    reads = {t.key: [name for name, _ in t.context or []] for t in spec.tasks}
    spans = {t.key: {name: span for name, span in t.context or []} for t in spec.tasks}
    reported: set[frozenset[str]] = set()
    for task in spec.tasks:
        path = _cycle_from(task.key, reads)
        if path is None or frozenset(path) in reported:
            continue
        reported.add(frozenset(path))
        shown = " -> ".join([*path, path[0]])
        diags.report("SW8012", f"the tasks' context goes round in a cycle: {shown}", spans[path[0]][path[1 % len(path)]],
                     label="reads a task that reads this one, in the end",
                     help="a task can read only tasks that finish before it: remove one of these context entries")


def _cycle_from(start: str, reads: dict[str, list[str]]) -> list[str] | None:
    """The cycle of context reads through `start`, as the tasks in order, or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        current, path = stack.pop()
        for nxt in reads.get(current, []):
            if nxt == start:
                return path
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None
