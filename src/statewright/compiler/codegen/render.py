"""IR -> the source of a runner module, rendered through layouts/runner.py.jinja.

Everything the template prints is made here as finished Python source: names, annotations and every string
written with repr(). The template only loops and places blocks, so no spec text is ever interpreted by Jinja
or pasted into code unescaped.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import textwrap
import zlib
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Any

from ...diagnostics import Span
from ...runtime import spec as runtime_spec
from ...runtime.runner_options import RUN_OPTIONS
from .. import ir
from . import GENERATED_MARKER
from .functions import MachineFunctions
from .module_text import ModuleText, ModuleWriter
from .names_used import literal_names, used_names
from .python_expr import spec_source
from .python_literals import Call, Position, Raw, comment_text, docstring_text, json_string, py_source
from .runtime_source import SPEC_IMPORTS, ModuleImport, RuntimeIndex, installed_runtime_index, reserved_names
from .source_layout import INDENT, WIDTH, import_block, layout_environment, wrap_words
from .types_py import (
    ModelPlan,
    ModelPlans,
    NameAllocator,
    annotation_source,
    constraint_arguments,
    holds_float,
    plan_models,
    py_string,
)

LAYOUT = "runner.py.jinja"
# The names of the dicts (and the list of tests) the entry machine's parts are put in; a machine it runs
# gets them with its own name after them (STATES_review).
COLLECTION_NAMES = {"agents": "AGENTS", "states": "STATES", "tools": "TOOLS", "tests": "TESTS"}
# Entries of SOURCE_MAP per statement (`SOURCE_MAP.update({...})` after the first): the loader compiles a
# statement at a time, and compiling a dict of a thousand entries took some 2 MB for its syntax tree
SOURCE_MAP_GROUP = 250
# Where the machine part of a module finds the runtime: in the package statewright_runtime/ beside it
# (`statewright compile`, the default), in marked sections above it (`compile --standalone`, one file), or
# in the installed statewright (`statewright run`, `test` and the Python API, compiled in memory).
RUNTIME_SHARED, RUNTIME_STANDALONE, RUNTIME_INSTALLED = "shared", "standalone", "installed"
RUNTIME_FORMS = (RUNTIME_SHARED, RUNTIME_STANDALONE)  # what `compile` writes
INSTALLED_RUNTIME = "statewright.runtime"


def origin(span: Span | None) -> str:
    """A construct's place in its source as "file:line:col" ("" for IR built without a source)."""
    return span.label() if span is not None else ""


def transition_condition_text(t: ir.Transition) -> str:
    """The condition a transition fires on, for traces and messages: the guard as spec source, the
    natural-language condition, or `after DURATION`; "" for any other."""
    if t.kind == "guard" and t.guard is not None:
        return spec_source(t.guard)
    if t.kind == "condition":
        return t.condition or ""
    if t.kind == "timeout" and t.seconds is not None:
        return f"after {ir.duration_text(t.seconds)}"
    return ""


def scripted_step(step: ir.Reply | ir.ToolCalls | ir.Verdict | ir.Timeout | ir.Approval) -> tuple[str, str, Any]:
    if isinstance(step, ir.Approval):  # a person's answer as the run reads one (runtime/approvals.py)
        answer: dict[str, Any] = {"decision": step.decision}
        if step.tool is not None:
            answer["tool"] = step.tool
        if step.reason is not None:
            answer["reason"] = step.reason
        if step.arguments is not None:
            answer["arguments"] = dict(step.arguments)
        return ("approval", step.state, answer)
    if isinstance(step, ir.ToolCalls):  # the agent's reply as a model writes tool calls
        return ("calls", step.state, [{"name": tool, "arguments": dict(args)} for tool, args in step.calls])
    if isinstance(step, ir.Reply):
        # a variant reply is written as the model writes it: `{"Answer": {...}}`
        return ("reply", step.state, {step.variant: step.value} if step.variant is not None else step.value)
    if isinstance(step, ir.Timeout):
        return ("timeout", step.state, None)
    return ("verdict", step.state, step.condition)


def render_runner(machine: ir.Machine, *, source_text: str, source_path: str,
                  runtime: str = RUNTIME_SHARED) -> str:
    """The module for a checked machine: byte-identical for the same input, whatever the hash seed.

    `runtime` "shared" writes the runner that imports the runtime from the package statewright_runtime/
    beside it (runtime_package.py); "standalone" the same machine part after the runtime's modules, in one
    file (standalone.py); "installed" the machine part importing the runtime from the installed
    statewright (what `run`, `test` and the API execute)."""
    from ... import __version__

    if runtime not in (*RUNTIME_FORMS, RUNTIME_INSTALLED):
        raise ValueError(f"unknown runtime {runtime!r}; choose one of {', '.join(RUNTIME_FORMS)}")
    view = _RunnerView(machine, installed_runtime_index(), source_text, source_path, __version__, runtime)
    text = _rendered(view).text()
    if runtime == RUNTIME_STANDALONE:
        from .standalone import fill_runtime

        text = fill_runtime(text, view.runtime_names)
    return text


def render_installed_module(machine: ir.Machine, *, source_text: str, source_path: str) -> ModuleText:
    """`render_runner(..., runtime="installed")` encoded in UTF-8 and compressed as it is written, for
    load_machine_module: the text is never one str (which, for a module holding one character past
    Latin-1, takes two or four bytes a character where its UTF-8 takes about one; the module of a machine
    of 1 MB is some 4 MB), nor one block of bytes, nor held whole beside the machine it makes."""
    from ... import __version__

    view = _RunnerView(machine, installed_runtime_index(), source_text, source_path, __version__,
                       RUNTIME_INSTALLED)
    return _rendered(view, compressed=True)


_SLOT = "\0"  # a slot's name stands between two NULs, which appear nowhere else (every spec text is escaped)


def _slot(name: str) -> str:
    return f"{_SLOT}{name}{_SLOT}"


def _rendered(view: _RunnerView, *, compressed: bool = False) -> ModuleText:
    """The layout rendered with `view`, written as the template goes: the view makes each state's
    statement when the template reaches it, and it is encoded (and compressed) and let go at once. What
    the template places before the text it depends on (the imports, which name what the whole module
    uses; each SOURCE_MAP, made as the statements after it are) is a slot, filled once the rest is
    written."""
    out = ModuleWriter(compressed)
    slots: list[tuple[int, str]] = []
    for piece in layout_environment().get_template(LAYOUT).generate(view.context()):
        if _SLOT not in piece:
            out.write(piece)
            continue
        texts = piece.split(_SLOT)
        if len(texts) % 2 == 0:  # a spec text written unescaped: a bug of code generation, caught here
            raise ValueError("a NUL character outside the slots of a generated module")
        for i, text in enumerate(texts):
            if i % 2 == 0:
                out.write(text)
            else:
                slots.append((out.slot(), text))
    module = out.close()
    view.finish()
    for index, name in slots:
        out.fill(index, view.slot_lines(name))
    return module


# ---- the view: finished source for the template, made as it asks ---------------------------------


class _RunnerView:
    """The whole module: the runtime (or its import), then a part for each machine — every machine the
    entry machine runs (directly or through others, each once) before the machines that run it, the entry
    last — and the module's own API. All the parts take their names from one allocator, so no class,
    function or literal of one machine can take another's name."""

    def __init__(self, machine: ir.Machine, index: RuntimeIndex, source_text: str, source_path: str,
                 version: str, runtime: str) -> None:
        self.machine = machine
        self.index = index
        self.runtime_mode = runtime
        self.runtime_names: dict[str, list[str]] = {}  # module -> the names the machine part imports from it
        self.source_path = source_path
        self.version = version
        machines = ir.iter_machines(machine)  # the entry last
        self.sha256 = machine_digest(machine, source_text)
        reserved = reserved_names(index.names)
        # the entry's names first, so a machine that runs none is written as it always was
        classes = NameAllocator([*reserved, *dir(builtins)])
        plans = {id(m): plan_models(m, reserved, classes) for m in (machines[-1], *machines[:-1])}
        # Function names avoid the runtime's names and the classes', and the state names (which share
        # SOURCE_MAP with them).
        names = NameAllocator([*reserved, *(n for p in plans.values() for n in _class_names(p)),
                               *(s.name for m in machines for s in m.states)])
        # the names imports are chosen from: of the names the parts' code uses, only these are kept (a
        # function's own name, say, never is)
        importable = frozenset(index.defined_in) | {i.bound for i in SPEC_IMPORTS}
        self.parts: dict[int, _MachinePart] = {}
        for m in (machines[-1], *machines[:-1]):
            entry = m is machine
            self.parts[id(m)] = _MachinePart(
                m, plans[id(m)], names, source_text if entry else m.origin.source.text if m.origin else "",
                source_path if entry else (m.origin.path if m.origin else m.name),
                "MACHINE" if entry else names.claim(f"MACHINE_{m.name}"),
                "SOURCE_MAP" if entry else names.claim(f"SOURCE_MAP_{m.name}"),
                {key: name if entry else names.claim(f"{name}_{m.name}") for key, name in COLLECTION_NAMES.items()},
                importable)
        for m in machines:
            part = self.parts[id(m)]
            part.callees = {name: self.parts[id(callee)].literal_name for name, callee in m.machines}
        self.ordered = [self.parts[id(m)] for m in machines]

    def context(self) -> dict[str, Any]:
        """What the template places. The parts' statements are made as the template reaches them; the
        imports (and a runner's import of its runtime) are slots, filled by `finish` once they are."""
        self.part_contexts = [part.context() for part in self.ordered]
        self.api = self._api()
        return {
            "header": [
                f"{GENERATED_MARKER} {self.version} from {comment_text(self.source_path)} — do not edit.",
                f"# source-sha256: {self.sha256}",
                # generated code is not linted or reformatted where it is committed: it is regenerated
                "# ruff: noqa",
                "# fmt: off",
            ],
            "docstring": self._docstring(),
            "imports": _slot("imports"),
            "runtime": _slot("runtime") if self.runtime_mode != RUNTIME_INSTALLED else "",
            "parts": self.part_contexts,
            "api": self.api,
        }

    def finish(self) -> None:
        """Once the template is rendered: the names the machine parts use, for their imports. The functions
        and classes are parsed; the MACHINE literals, which are most of the text, are read from the values
        they were written from. A block at a time (each is whole statements): the names of all are the
        names of each, and no syntax tree or list of words is made for the whole module at once."""
        used: set[str] = set()
        parts = self.part_contexts
        for block in [c for p in parts for c in (*p["classes"], *p["rebuilds"])] + self.api:
            used |= used_names(block)
        for part in self.ordered:
            used |= part.functions.used
            used |= literal_names(part.machine_call)
            used |= part.entry_names
        used |= {"MACHINE", "SOURCE_MAP", "main"}
        for name in sorted(used & self.index.defined_in.keys()):
            self.runtime_names.setdefault(self.index.defined_in[name], []).append(name)
        mode = self.runtime_mode
        self.runtime = ""
        if mode == RUNTIME_SHARED:
            from .runtime_package import runtime_import_block

            self.imports = import_block(SPEC_IMPORTS, used)
            self.runtime = runtime_import_block(self.runtime_names)
        elif mode == RUNTIME_STANDALONE:
            from .standalone import PLACEHOLDER

            self.imports = import_block(SPEC_IMPORTS, used)
            self.runtime = "\n" + PLACEHOLDER  # the runtime's place: render_runner puts it there, knowing its line
        else:
            # each runtime name the machine part uses, from the installed module defining it
            defined = [ModuleImport(f"{INSTALLED_RUNTIME}.{module}", name, name)
                       for module, names in self.runtime_names.items() for name in names]
            self.imports = import_block([*defined, *SPEC_IMPORTS], used)
        assert self.runtime or mode == RUNTIME_INSTALLED, "the template placed the runtime's slot"

    def slot_lines(self, name: str) -> Iterator[str]:
        """What stands in the slot `name` (after `finish`), in lines or blocks of lines."""
        if name == "imports":
            yield self.imports
        elif name == "runtime":
            yield self.runtime
        else:
            kind, _, literal = name.partition(" ")
            part = next((p for p in self.ordered if p.literal_name == literal), None)
            if kind != "source_map" or part is None:
                raise ValueError(f"no slot {name!r} in a generated module")
            yield from part.source_map_statements_text()

    # -- header

    def _docstring(self) -> str:
        lines = [f"Runner for the statewright machine `{self.machine.name}`."]
        called = [p for p in self.ordered if p.machine is not self.machine]
        if called:
            lines += wrap_words("It runs " + ", ".join(f"`{p.machine.name}` ({docstring_text(p.source_path)})"
                                                       for p in called) + ", written below.", WIDTH)
        description = self.machine.description.strip()
        if description and _fits_docstring(description):
            lines += ["", description]
        lines += [
            "",
            "Python: `run(inputs)` or `await arun(inputs)` return a RunResult.",
            "Command line: `python <this file> --help`. Needs pydantic and jinja2, and litellm for models",
            "that are not OpenAI-compatible (docs/models.md); not statewright.",
        ]
        if self.runtime_mode == RUNTIME_SHARED:
            lines[-2:] = [
                "Command line: `python <this file> --help`. Needs the package statewright_runtime/ beside it",
                "(generated with it), pydantic and jinja2, and litellm for models that are not OpenAI-compatible",
                "(docs/models.md); not statewright.",
            ]
        return '"""' + "\n".join(lines) + '\n"""'

    # -- the module's own API

    def _api(self) -> list[str]:
        """The module's own `run` and `arun`: every option of the runtime's, spelled out."""
        parameters = "".join(f"{INDENT}{name}: {annotation} = {default},\n"
                             for name, annotation, default, _ in RUN_OPTIONS)
        passed = "".join(f"{INDENT * 2}{name}={name},\n" for name, _, _, _ in RUN_OPTIONS)
        documented = "".join(
            "\n".join(textwrap.wrap(f"{name}: {doc}", WIDTH, initial_indent=INDENT * 2,
                                    subsequent_indent=INDENT * 3)) + "\n"
            for name, _, _, doc in RUN_OPTIONS)
        blocks = []
        for prefix, lead, summary in (
            ("", "", "Run the machine to its end and return the RunResult; a failed run is a result too."),
            ("async ", "await ", "`run` for async code: the same run, the same options, on the running event loop."),
        ):
            name = "arun" if prefix else "run"
            blocks.append(
                f"{prefix}def {name}(\n"
                f"{INDENT}inputs: Mapping[str, Any] | None = None,\n"
                f"{INDENT}*,\n"
                f"{parameters}"
                f") -> RunResult:\n"
                f'{INDENT}"""{summary}\n\n'
                f"{INDENT}inputs: the machine's inputs by name (see MACHINE.inputs).\n"
                f"{INDENT}Options:\n"
                f"{documented}"
                f'{INDENT}"""\n'
                f"{INDENT}return {lead}{name}_machine(\n"
                f"{INDENT * 2}MACHINE,\n"
                f"{INDENT * 2}inputs,\n"
                f"{passed}"
                f"{INDENT})\n"
            )
        return blocks



class _MachinePart:
    """One machine's part of the module: its classes, guard and argument functions, source map and
    MachineSpec literal (bound to `literal_name`), with names from the module's one allocator."""

    def __init__(self, machine: ir.Machine, plans: ModelPlans, names: NameAllocator, source_text: str,
                 source_path: str, literal_name: str, source_map_name: str,
                 collection_names: dict[str, str], importable: frozenset[str]) -> None:
        self.machine = machine
        self.plans = plans
        self.source_path = source_path
        self.sha256 = machine_digest(machine, source_text)
        self.literal_name = literal_name
        self.source_map_name = source_map_name
        self.collection_names = collection_names  # "states" -> the name of the dict its states are put in
        self.callees: dict[str, str] = {}  # the machines it runs, by the name it runs them by -> their literal
        # the branch class of each variant's type, for every annotation of a variant (one table for all of
        # them: a machine with thousands of variants has as many classes)
        self.branch_classes = {name: p.class_name for name, p in self.plans.branches.items()}
        # Every source position of the machine, in one table: a change to the spec shifts the positions after
        # it, and that shows as a change of this one block (and of the lines that changed), nowhere else. Its
        # statements (SOURCE_MAP_GROUP entries each) are written as the positions come, the last one open.
        self.source_map_statements: list[bytes] = []
        self.source_map_group: dict[str, str] = {}
        self.importable = importable  # the names imports are chosen from (the view's)
        self.functions = MachineFunctions(machine, plans, names, importable)
        self.machine_call: Call | None = None
        self.entry_names: set[str] = set()  # the importable names the statements of the collections use

    def context(self) -> dict[str, Any]:
        classes = [self._model_source(p) for p in self.plans.types]
        classes += [self._model_source(p) for p in self.plans.branches.values()]
        classes += [self._model_source(p) for p in self._wrappers()]
        rebuilds = [f"{p.class_name}.model_rebuild()" for p in self.plans.types if p.forward]
        return {
            "machine_name": self.machine.name,
            "source_path": comment_text(self.source_path),
            "classes": classes,
            "rebuilds": rebuilds,
            "guards": self.functions.guard_sources(),
            "arg_builders": self.functions.arg_builder_sources(),
            "source_map": _slot(f"source_map {self.literal_name}"),
            "collections": self._collections(),
            "machine": _Later(self._machine_source),
        }

    def _machine_source(self) -> str:
        """The MACHINE literal: made after the collections' statements (its variables' positions follow
        theirs in SOURCE_MAP)."""
        self.machine_call = self._machine_call()
        return f"{self.literal_name} = " + py_source(self.machine_call)

    # -- types

    def _wrappers(self) -> list[ModelPlan]:
        seen: list[str] = []
        out = []
        wrappers = list(self.plans.outputs.values())
        if self.plans.result is not None and self.plans.result.wrapper:
            wrappers.append(self.plans.result)
        for plan in wrappers:
            if plan.wrapper and plan.class_name not in seen:
                seen.append(plan.class_name)
                out.append(plan)
        return out

    def _model_source(self, plan: ModelPlan) -> str:
        # No docstring: pydantic would put it into the JSON schema the model sees.
        lines = []
        base = "BaseModel"
        if plan.variant:
            lines.append(f"# the output of state `{_state_of(self.plans, plan)}`: one of its variants, in an object "
                         "for the model")
            base = "VariantOutput"
        elif plan.branch_of is not None:
            lines.append(f"# `{comment_text(plan.branch_of)}` as one variant of an output: "
                         f"{{{comment_text(json_string(plan.branch_of))}: ...}}")
            base = "VariantBranch"
        elif plan.wrapper and plan is self.plans.result:
            lines.append("# the result of the machine (`returns`), wrapped in an object as an output is")
        elif plan.wrapper:
            lines.append(f"# the output of state `{_state_of(self.plans, plan)}`, wrapped in an object for the model")
        lines.append(f"class {plan.class_name}({base}):")
        config = [f"title={py_string(plan.title)}"] if plan.title != plan.class_name else []
        if any(holds_float(f.type) for f in plan.fields):
            config.append("allow_inf_nan=False")  # a float is a finite number, whatever text pydantic converts
        if config:
            lines.append(f"{INDENT}model_config = ConfigDict({', '.join(config)})")
        for f in plan.fields:
            ann = annotation_source(f.type, self.plans.class_names, self.branch_classes)
            arguments: list[tuple[str, object]] = []
            if f.optional:
                arguments.append(("default", None))
            if f.attribute != f.name:
                arguments.append(("alias", f.name))
            if f.doc:
                arguments.append(("description", f.doc))
            if f.constraints is not None:
                arguments += [(k, Raw(v)) for k, v in constraint_arguments(f.constraints, f.type)]
            if not arguments:
                lines.append(f"{INDENT}{f.attribute}: {ann}")
            elif [k for k, _ in arguments] == ["default"]:
                lines.append(f"{INDENT}{f.attribute}: {ann} = None")
            else:
                prefix = f"{INDENT}{f.attribute}: {ann} = "
                lines.append(prefix + py_source(Call("Field", arguments), 1))
        return "\n".join(lines) + "\n"

    # -- guards and tool arguments

    def _position(self, key: str, span: Span | None) -> object:
        """A construct's place in the source, as a reference into SOURCE_MAP ("" for IR with no source).
        Each key is made once (a construct's kind and its unique name or index)."""
        if span is None:
            return ""
        group = self.source_map_group
        group[key] = origin(span)
        if len(group) == SOURCE_MAP_GROUP:
            self._close_source_map_group()
        return Position(f"{self.source_map_name}[{py_string(key)}]")

    def _close_source_map_group(self) -> None:
        name = self.source_map_name
        head = f"{name} = " if not self.source_map_statements else f"{name}.update("
        tail = "" if not self.source_map_statements else ")"
        # kept compressed until the module is finished (a twentieth of their text)
        self.source_map_statements.append(zlib.compress((head + py_source(self.source_map_group) + tail).encode()))
        self.source_map_group = {}

    # -- the MachineSpec literal

    def _machine_call(self) -> Call:
        m = self.machine
        agents = self._collection("agents", m.agents)
        states = self._collection("states", m.states)
        tools = self._collection("tools", m.tools)
        tests = self._collection("tests", m.tests)
        return _spec_call(runtime_spec.MachineSpec, [
            ("name", m.name),
            ("description", m.description),
            ("inputs", tuple(self._input(i) for i in m.inputs)),
            ("model", m.model),
            ("verifier_model", m.verifier_model),
            ("temperature", m.temperature),
            ("limits", _spec_call(runtime_spec.LimitsSpec, [
                ("steps", m.limits.steps), ("cost_usd", m.limits.cost_usd),
                ("tokens", m.limits.tokens), ("seconds", m.limits.seconds),
            ])),
            ("agents", agents),
            ("states", states),
            ("start", m.start),
            ("tools", tools),
            ("tests", tests),
            ("source_sha256", self.sha256),
            ("source_path", self.source_path),
            ("variant_types", {name: Raw(self.plans.class_names[name]) for name in self.plans.branches}),
            ("machines", {name: Raw(literal) for name, literal in self.callees.items()}),
            ("result_type", Raw(self.plans.result.class_name) if self.plans.result is not None else None),
            ("result_wrapped", self.plans.result is not None and self.plans.result.wrapper),
            ("variables", tuple(self._variable(v) for v in m.variables)),
        ])

    def source_map_statements_text(self) -> Iterator[str]:
        """SOURCE_MAP, a statement of SOURCE_MAP_GROUP entries at most at a time (compiled a statement at a
        time, see load.py); once the MACHINE literal is made."""
        if self.source_map_group or not self.source_map_statements:
            self._close_source_map_group()
        for statement in self.source_map_statements:
            yield zlib.decompress(statement).decode("utf-8")

    def _collections(self) -> list[Iterator[str]]:
        """The machine's agents, states, tools and tests, a statement each (in groups, by collection); the
        MACHINE literal names the collections. No statement grows with the machine, so the module is
        compiled a statement at a time when loaded in memory (load.py). Each statement is made when the
        template asks for it."""
        m = self.machine
        collections = []
        if m.agents:
            collections.append(self._statements("agents", "AgentSpec", ((a.name, self._agent(a)) for a in m.agents)))
        if m.states:
            collections.append(self._statements("states", "StateSpec", ((s.name, self._state(s)) for s in m.states)))
        if m.tools:
            collections.append(self._statements("tools", "ToolSpec", ((t.name, self._tool(t)) for t in m.tools)))
        if m.tests:
            collections.append(self._statements("tests", "TestSpec",
                                                ((None, self._test(t, i)) for i, t in enumerate(m.tests))))
        return collections

    def _statements(self, key: str, spec: str, entries: Iterator[tuple[str | None, Call]]) -> Iterator[str]:
        """The statements that fill one of the machine's collections (a dict by name, or for tests a list),
        with the names they use."""
        name = self.collection_names[key]
        yield f"{name}: list[{spec}] = []" if key == "tests" else f"{name}: dict[str, {spec}] = {{}}"
        for entry, call in entries:
            self.entry_names |= literal_names(call) & self.importable
            yield (f"{name}.append({py_source(call)})" if entry is None
                   else f"{name}[{py_string(entry)}] = {py_source(call)}")

    def _collection(self, key: str, items: Sequence[object]) -> object:
        """What the MachineSpec literal passes for a collection: its name, or an empty literal (the default,
        left out) when it holds nothing."""
        if not items:
            return () if key == "tests" else {}
        name = self.collection_names[key]
        return Raw(f"tuple({name})" if key == "tests" else name)

    def _variable(self, v: ir.Variable) -> Call:
        return _spec_call(runtime_spec.VariableSpec, [
            ("name", v.name),
            ("annotation", Raw(annotation_source(v.type, self.plans.class_names))),
            ("initial", v.initial),
            ("origin", self._position(f"var {v.name}", v.origin)),
        ])

    def _tool(self, t: ir.Tool) -> Call:
        return _spec_call(runtime_spec.ToolSpec, [
            ("name", t.name), ("import_path", t.import_path), ("options", dict(t.options)),
            ("secrets", t.secrets), ("headers", t.headers), ("query", t.query),
            ("origin", self._position(f"tool {t.name}", t.origin)),
        ])

    def _input(self, i: ir.Input) -> Call:
        return _spec_call(runtime_spec.InputSpec, [
            ("name", i.name),
            ("annotation", Raw(annotation_source(i.type, self.plans.class_names, constraints=i.constraints))),
            ("required", not i.has_default),
            ("default", i.default),
        ])

    def _agent(self, a: ir.Agent) -> Call:
        return _spec_call(runtime_spec.AgentSpec, [
            ("name", a.name), ("prompt", a.prompt), ("model", a.model), ("temperature", a.temperature),
            ("tools", a.tools), ("memory", a.memory), ("memory_count", a.memory_count),
            ("fallbacks", a.fallbacks), ("origin", self._position(f"agent {a.name}", a.origin)),
        ])

    def _state(self, s: ir.State) -> Call:
        plan = self.plans.output_of(s.name)
        # the state's position first, then its parts', so the table follows the source
        position = self._position(s.name, s.origin)
        call = self._tool_call_spec(s)
        transitions = tuple(self._transition_spec(s, index, t) for index, t in enumerate(s.transitions))
        parallel = self._parallel_spec(s)
        run = self._run_spec(s)
        each = self._each_spec(s)
        updates = tuple(self._update_spec(s, index, u) for index, u in enumerate(s.updates))
        return _spec_call(runtime_spec.StateSpec, [
            ("name", s.name),
            ("kind", s.kind),
            ("final", s.final),
            ("agent", s.agent),
            ("model", s.model),
            ("instruction", s.instruction),
            ("output", Raw(plan.class_name) if plan is not None else None),
            ("output_wrapped", plan is not None and plan.wrapper),
            ("output_variant", plan is not None and plan.variant),
            ("tell", s.tell),
            ("visits", s.visits),
            ("retries", s.retries),
            ("call", call),
            ("result", s.result),
            ("fail", s.fail),
            ("transitions", transitions),
            ("origin", position),
            ("parallel", parallel),
            ("each", each),
            ("branch", s.branch),
            ("run", run),
            ("updates", updates),
            ("ask_before", s.ask_before),
            ("tool_rounds", s.tool_rounds),
        ])

    def _update_spec(self, s: ir.State, index: int, u: ir.Update) -> Call:
        return _spec_call(runtime_spec.UpdateSpec, [
            ("reducer", u.reducer), ("var", u.var), ("value", Raw(self.functions.update_names[(s.name, index)])),
            ("text", spec_source(u.value)), ("origin", self._position(f"{s.name} update {index}", u.origin)),
        ])

    def _tool_call_spec(self, s: ir.State) -> Call | None:
        if s.call is None:
            return None
        return _spec_call(runtime_spec.ToolCallSpec, [
            ("tool", s.call.tool),
            ("args", Raw(self.functions.args_names[s.name])),
            ("origin", self._position(f"{s.name} call", s.call.origin)),
        ])

    def _transition_spec(self, s: ir.State, index: int, t: ir.Transition) -> Call:
        guard = self.functions.guard_functions.get((s.name, index))
        return _spec_call(runtime_spec.TransitionSpec, [
            ("kind", t.kind),
            ("target", t.target),
            ("guard", Raw(guard) if guard else None),
            ("text", transition_condition_text(t)),
            ("max", t.max),
            ("per_visit", t.per_visit),
            ("seconds", t.seconds),
            ("origin", self._position(f"{s.name} transition {index}", t.origin)),
        ])

    def _parallel_spec(self, s: ir.State) -> Call | None:
        if s.parallel is None:
            return None
        join = s.parallel.join
        join_guard = self.functions.join_names.get(s.name)
        return _spec_call(runtime_spec.ParallelSpec, [
            ("branches", s.parallel.branches),
            ("join", _spec_call(runtime_spec.JoinSpec, [
                ("rule", join.rule), ("count", join.count),
                ("guard", Raw(join_guard) if join_guard else None),
                ("text", spec_source(join.guard) if join.guard is not None else ""),
                ("origin", self._position(f"{s.name} join", join.origin)),
            ])),
            ("origin", self._position(f"{s.name} parallel", s.parallel.origin)),
        ])

    def _run_spec(self, s: ir.State) -> Call | None:
        if s.run is None:
            return None
        return _spec_call(runtime_spec.CallSpec, [
            ("machine", s.run.machine),
            ("args", Raw(self.functions.run_args_names[s.name])),
            ("origin", self._position(f"{s.name} run", s.run.origin)),
        ])

    def _each_spec(self, s: ir.State) -> Call | None:
        if s.each is None:
            return None
        return _spec_call(runtime_spec.EachSpec, [
            ("item", s.each.item),
            ("items", Raw(self.functions.items_names[s.name])),
            ("max", s.each.max),
            ("index", s.each.index),
            ("concurrency", s.each.concurrency),
            ("text", spec_source(s.each.items)),
            ("origin", self._position(f"{s.name} for", s.each.origin)),
        ])

    def _test(self, t: ir.Test, index: int) -> Call:
        # steps and expectations are keyed by the test's index: a test's name is free text, and a key made
        # of it could equal another test's ("step" and "expect" start no other key: state names have no spaces)
        origin = self._position(f"test {t.name}", t.origin)
        steps = tuple(self._position(f"step {index}.{i}", step.origin) for i, step in enumerate(t.steps))
        expectations = tuple(_spec_call(runtime_spec.ExpectationSpec, [
            ("kind", e.kind), ("state", e.state), ("visit", e.visit), ("contains", e.contains), ("value", e.value),
            ("origin", self._position(f"expect {index}.{i}", e.origin)),
        ]) for i, e in enumerate(t.expectations))
        return _spec_call(runtime_spec.TestSpec, [
            ("name", t.name),
            ("inputs", dict(t.inputs)),
            ("steps", tuple(scripted_step(step) for step in t.steps)),
            ("expect_path", t.expect_path),
            ("expect_final", t.expect_final),
            ("expect_result", t.expect_result),
            ("has_expect_result", t.has_expect_result),
            ("expect_failure", t.expect_failure),
            ("origin", origin),
            ("expectations", expectations),
            ("allow_unused", t.allow_unused),
            ("step_origins", steps if any(isinstance(s, Position) for s in steps) else ()),
            ("expect_vars", tuple(_spec_call(runtime_spec.VarExpectationSpec, [
                ("name", e.name), ("value", e.value),
                ("origin", self._position(f"expect {index}.var{i}", e.origin)),
            ]) for i, e in enumerate(t.expect_vars))),
        ])


class _Later:
    """A value of the template made when the template prints it."""

    def __init__(self, make: Callable[[], str]) -> None:
        self.make = make

    def __str__(self) -> str:
        return self.make()


def _state_of(plans: ModelPlans, plan: ModelPlan) -> str:
    return next(state for state, p in plans.outputs.items() if p is plan)


def _class_names(plans: ModelPlans) -> list[str]:
    """Every class name a machine's part defines."""
    names = [*plans.class_names.values(), *(p.class_name for p in plans.outputs.values()),
             *(p.class_name for p in plans.branches.values())]
    return [*names, plans.result.class_name] if plans.result is not None else names


def machine_digest(machine: ir.Machine, source_text: str) -> str:
    """The sha256 of a machine's source, and, for a machine that runs others, of theirs too (so the hash
    a runner and a checkpoint carry changes whenever any file the machine is made of changes). Worked
    out callees first, each once, without recursion (a chain of files as long as a project holds)."""
    own = hashlib.sha256(source_text.encode("utf-8")).hexdigest()
    if not machine.machines:
        return own
    digests: dict[int, str] = {}
    for m in ir.iter_machines(machine):  # every machine after the machines it runs
        text = source_text if m is machine else (m.origin.source.text if m.origin is not None else "")
        mine = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if m.machines:
            mine = hashlib.sha256("\n".join([mine, *(f"{name}={digests[id(callee)]}" for name, callee in m.machines)])
                                  .encode("utf-8")).hexdigest()
        digests[id(m)] = mine
    return digests[id(machine)]


def _spec_call(cls: type, arguments: Sequence[tuple[str, object]]) -> Call:
    """A constructor call for a runtime spec dataclass, leaving out arguments equal to their defaults."""
    defaults = _defaults(cls)
    kept = []
    for key, value in arguments:
        if key in defaults and not isinstance(value, Raw) and _same(value, defaults[key]):
            continue
        kept.append((key, value))
    return Call(cls.__name__, kept)


@cache
def _defaults(cls: type) -> dict[str, object]:
    """The default of each field of a spec dataclass that has one (read once per class: dataclasses.fields
    is slow, and every state, transition and agent asks)."""
    defaults: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            defaults[f.name] = f.default_factory()
    return defaults


def _same(value: object, default: object) -> bool:
    return type(value) is type(default) and value == default


def _fits_docstring(text: str) -> bool:
    """Whether text can sit in a triple-quoted docstring as it is (no escapes to interpret, no quotes to end it)."""
    return (
        "\\" not in text
        and '"""' not in text
        and not text.endswith('"')
        and all(ch == "\n" or ch.isprintable() for ch in text)
    )
