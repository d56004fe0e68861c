"""Template checks: every template parses and compiles as Jinja2 and reads only names in scope.

Every prompt, instruction and result parses and compiles as Jinja2, reads only names in scope, and
computes no constant over the runtime's size limits; what it reads from typed values — through every name
it binds — is checked by template_types.py.

Instructions and results see the machine's inputs and, for every state, `STATE.output` and `STATE.visits`;
an agent's prompt is rendered once with the inputs only. Each check points at the exact name, field or
operator it is about (template_source maps Jinja's tokens back to the `.fsm` text). The states each
template reads are recorded here, once, for the IR: the passes and source edits use that record and never
look at template text themselves.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.idtracking import VAR_LOAD_ALIAS, VAR_LOAD_RESOLVE

from ...diagnostics import Diagnostics, did_you_mean
from ...grammar import ast
from ...runtime.templates import (
    MAX_TEMPLATE_VALUE,
    TemplateTooLarge,
    bounded_binop,
    bounded_concat,
    value_weight,
)
from .. import ir
from .flow import Flow
from .resolve import JINJA_NAMES, InputRead, Symbols, closest
from .template_narrowing import jinja_path
from .template_source import (
    ParsedTemplate,
    TemplateSourceError,
    Token,
    TreeIndex,
    check_environment,
    parse_template,
    tree_index,
)
from .template_types import Reader, TemplateTypes
from .type_algebra import TypeLike, output_type

_BUILTIN_EXAMPLES = {"filter": "upper, join, length and default", "test": "defined, none and number"}
_INNERMOST_BLOCK = re.compile(r"The innermost block that needs to be closed is '(\w+)'")
# The largest str or list the check builds while it works out a constant; larger ones (within the
# runtime's limits) are left for the run to build.
_FOLDED_AT_CHECK = 100_000
_ARITHMETIC = frozenset({"+", "-", "*", "/", "//", "%", "**"})
_NOTHING = object()


def _unclosed_block(error: TemplateSourceError) -> Token | None:
    """For "Unexpected end of template": the tag of the block left open, where it opens.

    Jinja names the innermost open block but reports the end of the template as the place; the tag that
    opened the block is where the mistake is seen.
    """
    found = _INNERMOST_BLOCK.search(error.message)
    if found is None:
        return None
    tag = found.group(1)
    open_tags: list[Token] = []
    tokens = [t for t in error.tokens if t.kind != "whitespace"]
    for before, t in itertools.pairwise(tokens):
        if before.kind != "block_begin" or t.kind != "name":
            continue
        if t.value.startswith("end"):
            for i in range(len(open_tags) - 1, -1, -1):
                if open_tags[i].value == t.value[3:]:
                    del open_tags[i:]
                    break
        else:
            open_tags.append(t)
    return next((t for t in reversed(open_tags) if t.value == tag), None)


# Nodes that bind no name (no loop, `set`, `with`, macro, call block, block or import): in a template made
# of these alone, every name it loads that is no global reads the context — what Jinja's own scoping finds
# when the template is compiled, known without compiling it. Such a template cannot fail to compile either,
# once its filters and tests are known and it is not deep (`self`, which Jinja binds, is left to the
# compiler).
_BINDS_NOTHING = frozenset({
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.If, nodes.Name, nodes.Const, nodes.Getattr,
    nodes.Getitem, nodes.Slice, nodes.Filter, nodes.Test, nodes.Compare, nodes.Operand, nodes.And, nodes.Or,
    nodes.Not, nodes.Neg, nodes.Pos, nodes.Add, nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod,
    nodes.Pow, nodes.Concat, nodes.CondExpr, nodes.List, nodes.Tuple, nodes.Dict, nodes.Pair, nodes.Call,
    nodes.Keyword,
})
_SHALLOW = 30  # the depth below which such a template is known to compile


def reads_without_compiling(index: TreeIndex, environment: jinja2.Environment) -> set[int] | None:
    """The ids of the Name nodes that read the context of a template that binds no name (see
    _BINDS_NOTHING); None for any other template, which must be compiled to know."""
    if index.depth > _SHALLOW:
        return None
    reads: set[int] = set()
    for node in index.order:
        if type(node) not in _BINDS_NOTHING:
            return None
        if isinstance(node, nodes.Name):
            if node.ctx != "load" or node.name == "self":
                return None
            if node.name not in environment.globals:
                reads.add(id(node))
    return reads


class _ReadingCodeGenerator(CodeGenerator):  # type: ignore[misc]
    """Jinja's code generator, noting each variable it reads from the template's context (a name no loop,
    `set`, macro or block binds). The generated code is kept, so that it can be compiled too."""

    def __init__(self, environment: jinja2.Environment) -> None:
        super().__init__(environment, "<template>", "<template>")
        self.context_reads: set[int] = set()  # ids of the Name nodes that read the context

    def visit_Name(self, node: nodes.Name, frame: Frame) -> None:
        if node.ctx == "load" and node.name not in self.environment.globals:
            load = frame.symbols.find_load(frame.symbols.ref(node.name))
            seen: set[str] = set()
            # a name a loop body binds starts each pass as the name outside it (an alias), which may be
            # the context's
            while load is not None and load[0] == VAR_LOAD_ALIAS and load[1] not in seen:
                seen.add(load[1])
                load = frame.symbols.find_load(load[1])
            if load is not None and load[0] == VAR_LOAD_RESOLVE:
                self.context_reads.add(id(node))
        super().visit_Name(node, frame)


def _set_before(index: TreeIndex, reads: set[int]) -> set[int]:
    """The reads among `reads` that a `set` (or a macro) of the same name surely ran before: one earlier in
    the same list of statements that holds the read. Jinja reads such a name from the context when a
    branch may have left it unset (`{% if c %}{% set a = 1 %}{% endif %}{{ a }}`), and marks every read of
    it so, even one right after the `set` in that branch; only those are left as reads of the context."""
    stores: dict[str, list[nodes.Node]] = {}
    for node in index.order:
        if isinstance(node, (nodes.Assign, nodes.AssignBlock)):
            targets = node.target.items if isinstance(node.target, nodes.Tuple) else [node.target]
            for target in targets:
                if isinstance(target, nodes.Name):
                    stores.setdefault(target.name, []).append(node)
        elif isinstance(node, nodes.Macro):
            stores.setdefault(node.name, []).append(node)
    if not stores:
        return set()
    return {id(n) for n in index.order if isinstance(n, nodes.Name) and id(n) in reads and n.name in stores
            and any(_runs_before(store, n, index.parents) for store in stores[n.name])}


def _runs_before(statement: nodes.Node, node: nodes.Node, parents: dict[int, nodes.Node]) -> bool:
    """Whether `statement` comes before `node` in one list of statements that holds both (`node` inside)."""
    holder = parents.get(id(statement))
    child: nodes.Node | None = node
    while child is not None and parents.get(id(child)) is not holder:
        child = parents.get(id(child))
    if child is None or holder is None:
        return False
    for name in holder.fields:
        statements = getattr(holder, name)
        if isinstance(statements, list):
            where = {id(s): k for k, s in enumerate(statements)}
            if id(statement) in where and id(child) in where:
                return where[id(statement)] < where[id(child)]
    return False


def _sequence_size(value: object) -> int | None:
    return value_weight(value) if isinstance(value, (str, list, tuple)) else None


class _TemplateChecker:
    def __init__(self, symbols: Symbols, diags: Diagnostics, flow: Flow | None = None) -> None:
        self.symbols = symbols
        self.diags = diags
        self.flow = flow
        # the variant types templates may test with `is`, and each variant output's variants by path
        self.variant_names = frozenset(symbols.variant_types())
        self.variant_paths: dict[str, tuple[str, ...]] = {}
        for view in symbols.states.values():
            t = output_type(view, symbols)
            if isinstance(t, ir.Variant):
                self.variant_paths[f"{view.name}.output"] = t.options

    def check(self, string: ast.String, where: str, *, reader: str | None = None, template: str = "",
              local: dict[str, TypeLike] | None = None) -> None:
        """Check one template; `reader` is the state whose instruction or result it is (None: a prompt);
        `local`, the names a map gives its instruction (the element and its position), with their types."""
        text = string.value
        if "{" not in text:
            return
        try:
            parsed = parse_template(string)
        except TemplateSourceError as e:
            e.__traceback__ = None  # its frames hold it (parse_with_jinja's `problem`): no cycle is left behind
            # the names it reads are unknown, so count every input it mentions as read
            self.symbols.used_inputs.update(set(re.findall(r"[A-Za-z_]\w*", text)) & set(self.symbols.inputs))
            self._source_error(e, ParsedTemplate(string, None, e.tokens), where)
            return
        tree = parsed.tree
        assert tree is not None
        index = parsed.index or tree_index(tree)
        helpers_known = True
        if not parsed.simple:  # text and dotted names load nothing, call no helper and hold no constant
            self._loaders(parsed, index, where)
            helpers_known = self._helpers(parsed, index, where)
            self._constants(parsed, index, where)
        reads = self._context_reads(parsed, index, where, helpers_known)
        if reads is None:
            # it does not compile (reported); its inputs still count as read
            self.symbols.used_inputs.update(n.name for n in index.order if isinstance(n, nodes.Name)
                                            and n.ctx == "load" and n.name in self.symbols.inputs)
            return
        for node in index.order:
            if isinstance(node, nodes.Name) and id(node) in reads and node.name not in (local or {}):
                self._name(node, parsed, where, reader, template)
            elif isinstance(node, nodes.Test) and node.name in self.variant_names and reader is not None:
                self._variant_test(node, parsed)
        TemplateTypes(self.symbols, self.diags, self.flow, parsed, index, reads,
                      Reader(reader, template, local or {}), self.variant_names,
                      check_environment().globals).run()

    # -- the template as a whole

    def _source_error(self, e: TemplateSourceError, parsed: ParsedTemplate, where: str) -> None:
        if e.kind == "nesting":
            span = parsed.span(e.offset, e.offset + e.length) if e.length else parsed.line_span(e.offset)
            self.diags.report("SW5003", f"the template in {where} is nested too deeply", span,
                              label=e.message, help="split it into simpler parts, or build the text in a tool")
            return
        opener = _unclosed_block(e)
        if opener is not None:
            tag = opener.value
            self.diags.report("SW5001", f"template syntax error in {where}: '{{% {tag} %}}' is never closed",
                              parsed.token_span(opener, opener.offset),
                              label=f"this '{tag}' has no '{{% end{tag} %}}'",
                              help=f"close the block with {{% end{tag} %}} where it should end")
            return
        self.diags.report("SW5001", f"template syntax error in {where}: {e.message}", parsed.line_span(e.offset),
                          label="Jinja2 cannot parse this",
                          help="write variables as {{ name }} and blocks as {% if ... %}...{% endif %}")

    def _loaders(self, parsed: ParsedTemplate, index: TreeIndex, where: str) -> None:
        """`{% include %}`, `{% import %}` and `{% extends %}` need a template loader; templates have none."""
        loaders = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)
        for node in (n for n in index.order[1:] if isinstance(n, loaders)):
            tag = {"Include": "include", "Import": "import", "FromImport": "from", "Extends": "extends"}
            word = tag[type(node).__name__]
            self.diags.report("SW5001", f"'{{% {word} %}}' in {where} cannot load a template",
                              parsed.name_span(node), label="templates cannot load other templates",
                              help="write the text into this template, or pass it in as an input")

    def _helpers(self, parsed: ParsedTemplate, index: TreeIndex, where: str) -> bool:
        """Report unknown filters and tests; whether every one is known."""
        env = check_environment()
        known = True
        for node in index.order:
            if isinstance(node, nodes.Filter) and node.name not in env.filters:
                self._unknown_helper("filter", node, env.filters, parsed, where)
                known = False
            elif isinstance(node, nodes.Test) and node.name not in env.tests and node.name not in self.variant_names:
                self._unknown_helper("test", node, [*env.tests, *self.variant_names], parsed, where)
                known = False
        return known

    def _unknown_helper(self, kind: str, node: nodes.Filter | nodes.Test, known: Iterable[str],
                        parsed: ParsedTemplate, where: str) -> None:
        self.diags.report("SW5001", f"unknown Jinja2 {kind} '{node.name}' in {where}", parsed.name_span(node),
                          label=f"no {kind} with this name",
                          help=did_you_mean(node.name, known) or f"templates have Jinja2's built-in {kind}s only, "
                                                                 f"such as {_BUILTIN_EXAMPLES[kind]}")

    def _constants(self, parsed: ParsedTemplate, index: TreeIndex, where: str) -> None:
        """Work out constant arithmetic with the runtime's bounded operators: a value over the size limits
        is an error here rather than a failed run (or a check that never ends)."""
        values: dict[int, object] = {}
        for node in reversed(index.order):  # every node after the nodes inside it
            value = _NOTHING
            try:
                value = self._constant(node, values)
            except TemplateTooLarge as e:
                self.diags.report("SW5004", f"the template in {where} computes a value that is too large",
                                  parsed.node_span(node), label=str(e),
                                  help="templates build prompts; compute large values in a tool")
            except Exception:  # noqa: BLE001 - an operation that fails is left for the run to report
                value = _NOTHING
            if value is not _NOTHING:
                values[id(node)] = value

    @staticmethod
    def _constant(node: nodes.Node, values: dict[int, object]) -> object:
        def known(*children: nodes.Node) -> bool:
            return all(id(c) in values for c in children)

        if isinstance(node, nodes.Const):
            return node.value
        if isinstance(node, (nodes.List, nodes.Tuple)) and known(*node.items):
            items = [values[id(i)] for i in node.items]
            if value_weight(items, _FOLDED_AT_CHECK) > _FOLDED_AT_CHECK:
                return _NOTHING  # `[a, a, a]` of a large `a`: more than the check builds
            return items if isinstance(node, nodes.List) else tuple(items)
        if isinstance(node, (nodes.Neg, nodes.Pos)) and known(node.node):
            operand = values[id(node.node)]
            return -operand if isinstance(node, nodes.Neg) else +operand  # type: ignore[operator]
        if isinstance(node, nodes.BinExpr) and node.operator in _ARITHMETIC and known(node.left, node.right):
            left, right = values[id(node.left)], values[id(node.right)]
            sizes = (_sequence_size(left), _sequence_size(right))
            if node.operator in ("*", "+") and sizes != (None, None):
                counts = [v for v in (left, right) if isinstance(v, int) and not isinstance(v, bool)]
                size = ((sizes[0] or sizes[1] or 0) * counts[0] if node.operator == "*" and counts
                        else (sizes[0] or 0) + (sizes[1] or 0))
                if _FOLDED_AT_CHECK < size <= MAX_TEMPLATE_VALUE:
                    return _NOTHING  # within the limits, and more than the check builds
            return bounded_binop(node.operator, left, right)
        if isinstance(node, nodes.Concat) and known(*node.nodes):
            parts = [values[id(n)] for n in node.nodes]
            if sum(value_weight(p) for p in parts) > MAX_TEMPLATE_VALUE:
                return bounded_concat(parts)  # raises
            return _NOTHING
        return _NOTHING

    def _context_reads(self, parsed: ParsedTemplate, index: TreeIndex, where: str,
                       helpers_known: bool) -> set[int] | None:
        """The ids of the Name nodes that read the template's context (an input or a state, or a mistake);
        None when the template does not compile (reported)."""
        tree = parsed.tree
        assert tree is not None
        env = check_environment()
        if not helpers_known:
            # Jinja cannot compile a template with an unknown filter or test (reported already): treat every
            # name the template assigns anywhere as local
            local = {n.name for n in tree.find_all(nodes.Name) if n.ctx in ("store", "param")} | {"loop"}
            return {id(n) for n in tree.find_all(nodes.Name)
                    if n.ctx == "load" and n.name not in local and n.name not in env.globals}
        simple = reads_without_compiling(index, env)
        if simple is not None:
            return simple
        if self.variant_names:  # the variant tests the runtime defines (TemplateSet), known to Jinja's compiler
            env = env.overlay()
            env.tests = {**env.tests, **{name: _never_called for name in self.variant_names}}
        codegen = _ReadingCodeGenerator(env)
        try:
            codegen.visit(tree)
            compile(codegen.stream.getvalue(), "<template>", "exec")  # type: ignore[attr-defined]
        except jinja2.TemplateAssertionError as e:
            self.diags.report("SW5001", f"template error in {where}: {e.message}",
                              parsed.line_span(max((e.lineno or 1) - 1, 0)), label="Jinja2 cannot compile this",
                              help="see the Jinja2 template documentation for this construct")
            return None
        except RecursionError:
            self.diags.report("SW5003", f"the template in {where} is nested too deeply", parsed.string.span,
                              label="too deep to compile", help="split it into simpler parts")
            return None
        except (SyntaxError, MemoryError, ValueError, OverflowError) as e:
            reason = getattr(e, "msg", None) or str(e)
            self.diags.report("SW5001", f"the template in {where} does not compile", parsed.string.span,
                              label=f"Python cannot compile the code it becomes: {reason}",
                              help="nest fewer blocks (at most 20 loops inside one another), or split it")
            return None
        return codegen.context_reads - _set_before(index, codegen.context_reads)

    # -- the names it reads

    def _name(self, node: nodes.Name, parsed: ParsedTemplate, where: str, reader: str | None,
              template: str) -> None:
        """A name read from the template's context (but a map's element or position): an input, a state (its
        reads recorded), or a mistake. What the template reads from it is checked with every other read
        (template_types.py)."""
        s = self.symbols
        name = node.name
        if name in s.inputs:
            s.used_inputs.add(name)
            s.input_reads.append(InputRead(name, parsed.name_span(node)))
            return
        if name in s.states and reader is not None:
            s.state_reads.setdefault(reader, []).append(ir.StateRead(name, template, parsed.name_span(node)))
            return
        if name in s.variables and reader is not None:
            s.used_variables.add(name)
            s.variable_reads.append(InputRead(name, parsed.name_span(node)))
            return
        span = parsed.name_span(node)
        if name in s.variables:
            self.diags.report("SW2008", f"an agent's prompt cannot read run variable '{name}'", span,
                              label="not in scope in a prompt",
                              help="a prompt is rendered once with the machine's inputs; read the variable in "
                                   "the 'do' instruction of the state that needs it")
            return
        if name in s.states:
            self.diags.report("SW2008", f"an agent's prompt cannot read state '{name}'", span,
                              label="not in scope in a prompt",
                              help="a prompt is rendered once with the machine's inputs; put "
                                   f"'{name}.output' in the 'do' instruction of the state that needs it")
            return
        s.used_inputs.add(closest(name, s.inputs) or "")
        candidates = [n for n in [*s.inputs, *((*s.variables, *s.states) if reader is not None else ())]
                      if n not in JINJA_NAMES]
        scope = ("the machine's inputs, STATE.output and STATE.visits" if reader is not None
                 else "the machine's inputs")
        if s.variables and reader is not None:
            scope = "the machine's inputs, its run variables, STATE.output and STATE.visits"
        self.diags.report("SW2008", f"unknown template variable '{name}' in {where}", span,
                          label="not in scope",
                          help=did_you_mean(name, candidates) or f"templates here can use {scope}")

    def _variant_test(self, node: nodes.Test, parsed: ParsedTemplate) -> None:
        """SW4032 for `{% if STATE.output is T %}` where STATE's output is not a variant output with T."""
        path = jinja_path(node.node)
        if path is None or not path.endswith(".output") or path[: -len(".output")] not in self.symbols.states:
            return  # a value the check cannot type: the runtime's test decides
        options = self.variant_paths.get(path)
        if options is None:
            self.diags.report("SW4032", f"'{path}' is not a variant output", parsed.node_span(node.node),
                              label=f"'{node.name}' is a variant of another state's output",
                              help="'is TYPE' tells which type arrived from a state whose output is one of "
                                   "several types (`output A | B`)")
        elif node.name not in options:
            self.diags.report("SW4032", f"'{node.name}' is not a variant of '{path}'", parsed.name_span(node),
                              label=f"'{path}' is {' | '.join(options)}",
                              help=did_you_mean(node.name, options) or f"its variants are {', '.join(options)}")

def _never_called(value: object) -> bool:
    return False  # stands in for a variant test while templates are compiled to be checked


def check_templates(machine: ast.Machine, symbols: Symbols, diagnostics: Diagnostics,
                    flow: Flow | None = None) -> None:
    """Parse every template, check the names and fields it reads, and record the states it reads.

    With `flow`, a field of a state's output read where that state may not have run is reported (SW4014)."""
    checker = _TemplateChecker(symbols, diagnostics, flow)
    for view in symbols.agents.values():
        if view.prompt is not None:
            checker.check(view.prompt.text, f"the prompt of agent '{view.decl.name.value}'")
    for state in symbols.states.values():
        if state.instruction is not None:
            checker.check(state.instruction.text, f"the instruction of state '{state.name}'",
                          reader=state.name, template="instruction", local=symbols.each_names.get(state.name))
        if state.ask is not None:
            checker.check(state.ask.text, f"the question of state '{state.name}'", reader=state.name,
                          template="instruction")
        if state.result is not None:
            checker.check(state.result.text, f"the result of state '{state.name}'", reader=state.name,
                          template="result")
        if state.fail is not None:
            checker.check(state.fail.text, f"the failure reason of state '{state.name}'", reader=state.name,
                          template="fail")
