"""Template checks: every template parses and compiles as Jinja2 and reads only names in scope.

Every prompt, instruction and result parses and compiles as Jinja2, reads only names in scope, and
computes no constant over the runtime's size limits.

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
from jinja2.idtracking import VAR_LOAD_RESOLVE

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
from .callees import UntypedResult
from .flow import Flow
from .resolve import JINJA_NAMES, FieldRead, InputRead, StateView, Symbols, closest
from .template_source import (
    ParsedTemplate,
    TemplateSourceError,
    Token,
    TreeIndex,
    check_environment,
    parse_template,
    tree_index,
)
from .typecheck import (
    Record,
    TextOutput,
    TypeLike,
    absent_output_notes,
    fields_of,
    merge_variant_tests,
    output_type,
    type_text,
    unknown_field_help,
)

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


def _step(parent: nodes.Node | None, child: nodes.Node) -> str | int | None:
    """The field or index `parent` reads from `child` (`x.f`, `x["f"]`, `x[0]`), or None."""
    if isinstance(parent, nodes.Getattr) and parent.node is child:
        return str(parent.attr)
    if (isinstance(parent, nodes.Getitem) and parent.node is child and isinstance(parent.arg, nodes.Const)
            and isinstance(parent.arg.value, (str, int)) and not isinstance(parent.arg.value, bool)):
        return parent.arg.value  # type: ignore[no-any-return]
    return None


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
            if load is not None and load[0] == VAR_LOAD_RESOLVE:
                self.context_reads.add(id(node))
        super().visit_Name(node, frame)


def _sequence_size(value: object) -> int | None:
    return value_weight(value) if isinstance(value, (str, list, tuple)) else None


def _output_of(node: nodes.Node, states: Iterable[str]) -> str | None:
    """The state whose output `node` is, for a node written `STATE.output`; else None."""
    if (isinstance(node, nodes.Getattr) and node.attr == "output" and isinstance(node.node, nodes.Name)
            and node.node.ctx == "load" and node.node.name in states):
        return node.node.name
    return None


def jinja_path(node: nodes.Node) -> str | None:
    """A template expression as a path of names and fields (`tags`, `review.output.note`), or None;
    `x["f"]` is the path `x.f`, as in guards."""
    fields: list[str] = []
    while True:
        if isinstance(node, nodes.Getattr):
            fields.append(str(node.attr))
            node = node.node
        elif (isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const)
              and isinstance(node.arg.value, str)):
            fields.append(node.arg.value)
            node = node.node
        else:
            break
    if not (isinstance(node, nodes.Name) and node.ctx == "load"):
        return None
    return ".".join([node.name, *reversed(fields)])


def none_tests(node: nodes.Node, value: bool, memo: dict[tuple[int, bool], set[str]] | None = None) -> set[str]:
    """The paths (`jinja_path`) surely not none when template expression `node` has the truth value
    `value`: the rule for guards (typecheck.none_tests) — `P != none` true or `P == none` false, through
    `and`, `or` and `not` — plus what only templates can write: `P` itself true, and `P is none` false
    (`P is not none` true)."""
    if memo is not None:
        key = (id(node), value)
        if key not in memo:
            memo[key] = none_tests(node, value)
        return memo[key]
    if isinstance(node, nodes.Not):
        return none_tests(node.node, not value)
    if isinstance(node, (nodes.And, nodes.Or)):
        left, right = none_tests(node.left, value), none_tests(node.right, value)
        both = isinstance(node, nodes.And) == value
        return left | right if both else left & right
    path = jinja_path(node)
    if path is not None:
        return {path} if value else set()
    if isinstance(node, nodes.Test) and node.name == "none" and not node.args:
        path = jinja_path(node.node)
        return {path} if path is not None and not value else set()
    if isinstance(node, nodes.Compare) and len(node.ops) == 1 and node.ops[0].op in ("eq", "ne"):
        op = node.ops[0]
        for side, other in ((node.expr, op.expr), (op.expr, node.expr)):
            path = jinja_path(side)
            if path is not None and isinstance(other, nodes.Const) and other.value is None:
                return {path} if (op.op == "ne") == value else set()
    return set()


class IfBranches:
    """One `{% if %}` block's branches: which one each node directly inside it is in, and what the tests
    before a branch show once they are all false (worked out once per block, so that a read in the last
    of n `elif`s costs no walk over the n before it)."""

    def __init__(self, node: nodes.If) -> None:
        self.node = node
        self.tests = [node.test, *(e.test for e in node.elif_)]
        self.branch = {id(c): -1 for c in node.body}  # -1: the `if` body; k: `elif` k; else past them
        self.branch.update((id(e), k) for k, e in enumerate(node.elif_))
        self._none_false: list[set[str]] = []  # [k]: none_tests false of tests 0..k
        self._variants_false: list[dict[str, frozenset[str]]] = []

    def of(self, child: nodes.Node) -> int:
        """-1 for the `if` body, k for `elif` k, the number of `elif`s for the `else` body."""
        return self.branch.get(id(child), len(self.node.elif_))

    def none_false(self, upto: int, memo: dict[tuple[int, bool], set[str]] | None) -> set[str]:
        """The paths shown there once tests 0..upto are all false."""
        while len(self._none_false) <= upto:
            before = self._none_false[-1] if self._none_false else set()
            self._none_false.append(before | none_tests(self.tests[len(self._none_false)], False, memo))
        return self._none_false[upto]

    def variants_false(self, upto: int, paths: dict[str, tuple[str, ...]]) -> dict[str, frozenset[str]]:
        """What tests 0..upto all false show about which variants paths are."""
        while len(self._variants_false) <= upto:
            before = self._variants_false[-1] if self._variants_false else {}
            test = self.tests[len(self._variants_false)]
            self._variants_false.append(merge_variant_tests(before, variant_tests(test, False, paths)))
        return self._variants_false[upto]


def if_branches(node: nodes.If, cache: dict[int, IfBranches] | None) -> IfBranches:
    if cache is None:
        return IfBranches(node)
    found = cache.get(id(node))
    if found is None:
        found = cache[id(node)] = IfBranches(node)
    return found


def _narrowed(node: nodes.Node, parents: dict[int, nodes.Node],
              memo: dict[tuple[int, bool], set[str]] | None = None,
              blocks: dict[int, IfBranches] | None = None) -> set[str]:
    """The paths the tests around `node` show to be there: the conditions of the `if`
    blocks and inline `if`s it sits in (negated in `elif` and `else`), and the left side of an `and` or
    `or` it is the right side of. A macro's body is not narrowed by where the macro is written."""
    shown: set[str] = set()
    child = node
    parent = parents.get(id(child))
    while parent is not None and not isinstance(parent, (nodes.Macro, nodes.CallBlock)):
        if isinstance(parent, nodes.If) and child is not parent.test:
            block = if_branches(parent, blocks)
            branch = block.of(child)
            if branch < 0:
                shown |= none_tests(parent.test, True, memo)
            else:
                shown |= block.none_false(branch, memo)
        elif isinstance(parent, nodes.CondExpr) and child is not parent.test:
            shown |= none_tests(parent.test, child is parent.expr1, memo)
        elif isinstance(parent, nodes.And) and child is parent.right:
            shown |= none_tests(parent.left, True, memo)
        elif isinstance(parent, nodes.Or) and child is parent.right:
            shown |= none_tests(parent.left, False, memo)
        child, parent = parent, parents.get(id(parent))
    return shown


def variant_tests(node: nodes.Node, value: bool, options_of: dict[str, tuple[str, ...]]
                  ) -> dict[str, frozenset[str]]:
    """The paths whose variants are known when template expression `node` has the truth value `value`:
    `P is T` (and `P is not T`, `not`, `and`, `or`) for a path P of a variant output, whose variants are
    `options_of[P]` — the guards' rule (ExprChecker.variant_tests)."""
    if isinstance(node, nodes.Not):
        return variant_tests(node.node, not value, options_of)
    if isinstance(node, (nodes.And, nodes.Or)):
        left, right = variant_tests(node.left, value, options_of), variant_tests(node.right, value, options_of)
        if isinstance(node, nodes.And) == value:
            return merge_variant_tests(left, right)
        return {p: left[p] | right[p] for p in left.keys() & right.keys()}
    if isinstance(node, nodes.Test) and not node.args:
        path = jinja_path(node.node)
        options = options_of.get(path or "")
        if path is not None and options is not None and node.name in options:
            return {path: frozenset({node.name} if value else set(options) - {node.name})}
    return {}


class _TemplateChecker:
    def __init__(self, symbols: Symbols, diags: Diagnostics, flow: Flow | None = None) -> None:
        self.symbols = symbols
        self.diags = diags
        self.flow = flow
        self.memo: dict[tuple[int, bool], set[str]] = {}  # the none tests of one template's conditions
        self.blocks: dict[int, IfBranches] = {}  # and its `if` blocks' branches
        self.local: dict[str, TypeLike] = {}
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
        self.local = local or {}
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
        self.memo = {}
        self.blocks = {}
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
        parents = index.parents
        for node in index.order:
            if isinstance(node, nodes.Name) and id(node) in reads:
                self._name(node, parents, parsed, where, reader, template)
            elif isinstance(node, nodes.Test) and node.name in self.variant_names and reader is not None:
                self._variant_test(node, parsed)

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
        return codegen.context_reads

    # -- the names it reads

    def _name(self, node: nodes.Name, parents: dict[int, nodes.Node], parsed: ParsedTemplate, where: str,
              reader: str | None, template: str) -> None:
        s = self.symbols
        name = node.name
        if name in self.local:
            self._fields(node, self.local[name], parents, parsed, name)
            return
        if name in s.inputs:
            s.used_inputs.add(name)
            s.input_reads.append(InputRead(name, parsed.name_span(node)))
            self._fields(node, s.resolve_type(s.inputs[name].type), parents, parsed, name)
            return
        if name in s.states and reader is not None:
            self._state(node, s.states[name], parents, parsed, reader, template)
            return
        span = parsed.name_span(node)
        if name in s.states:
            self.diags.report("SW2008", f"an agent's prompt cannot read state '{name}'", span,
                              label="not in scope in a prompt",
                              help="a prompt is rendered once with the machine's inputs; put "
                                   f"'{name}.output' in the 'do' instruction of the state that needs it")
            return
        s.used_inputs.add(closest(name, s.inputs) or "")
        candidates = [n for n in [*s.inputs, *(s.states if reader is not None else ())] if n not in JINJA_NAMES]
        scope = ("the machine's inputs, STATE.output and STATE.visits" if reader is not None
                 else "the machine's inputs")
        self.diags.report("SW2008", f"unknown template variable '{name}' in {where}", span,
                          label="not in scope",
                          help=did_you_mean(name, candidates) or f"templates here can use {scope}")

    def _state(self, node: nodes.Name, view: StateView, parents: dict[int, nodes.Node], parsed: ParsedTemplate,
               reader: str, template: str) -> None:
        self.symbols.state_reads.setdefault(reader, []).append(
            ir.StateRead(view.name, template, parsed.name_span(node)))
        parent = parents.get(id(node))
        step = _step(parent, node)
        if step is None:
            return  # the state on its own (e.g. `{{ draft }}`): left to the runtime's rendering
        assert parent is not None
        if step == "visits":
            self._fields(parent, ir.INT, parents, parsed, f"{view.name}.visits")
            return
        if step != "output":
            self.diags.report("SW2006", f"state '{view.name}' has no field '{step}'", parsed.name_span(parent),
                              label="unknown field",
                              help=f"a template reads a state's result as '{view.name}.output' and how many "
                                   f"times it ran as '{view.name}.visits'")
            return
        self._absent(parent, view.name, parents, parsed, reader, template)
        self._fields(parent, output_type(view, self.symbols), parents, parsed, f"{view.name}.output")

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

    def _variants_at(self, node: nodes.Node, parents: dict[int, nodes.Node]) -> dict[str, frozenset[str]]:
        """What the `is` tests around `node` show about which variants paths are (as `_narrowed` does for
        none tests)."""
        shown: dict[str, frozenset[str]] = {}
        if not self.variant_paths:
            return shown
        child = node
        parent = parents.get(id(child))
        paths = self.variant_paths
        while parent is not None and not isinstance(parent, (nodes.Macro, nodes.CallBlock)):
            if isinstance(parent, nodes.If) and child is not parent.test:
                block = if_branches(parent, self.blocks)
                branch = block.of(child)
                if branch < 0:
                    shown = merge_variant_tests(shown, variant_tests(parent.test, True, paths))
                else:
                    shown = merge_variant_tests(shown, block.variants_false(branch, paths))
            elif isinstance(parent, nodes.CondExpr) and child is not parent.test:
                shown = merge_variant_tests(shown, variant_tests(parent.test, child is parent.expr1, paths))
            elif isinstance(parent, nodes.And) and child is parent.right:
                shown = merge_variant_tests(shown, variant_tests(parent.left, True, paths))
            elif isinstance(parent, nodes.Or) and child is parent.right:
                shown = merge_variant_tests(shown, variant_tests(parent.left, False, paths))
            child, parent = parent, parents.get(id(parent))
        return shown

    def _variant_field(self, node: nodes.Node, t: ir.Variant, step: str, parents: dict[int, nodes.Node],
                       parsed: ParsedTemplate, shown: str) -> TypeLike | None:
        """The type of field `step` of a variant value at `node`, narrowed by the tests around it; None when
        it is reported (SW2006, SW4031)."""
        allowed = self._variants_at(node, parents).get(jinja_path(node) or "")
        options = tuple(o for o in t.options if allowed is None or o in allowed) or t.options
        fields = {o: self.symbols.fields_of(o) for o in options}
        having = [o for o in options if step in fields[o]]
        parent = parents[id(node)]
        if not having:
            every = [f for o in options for f in fields[o]]
            self.diags.report("SW2006", f"no variant of {' | '.join(options)} has a field '{step}'",
                              parsed.name_span(parent), label="unknown field",
                              help=did_you_mean(step, every) or f"the variants' fields are {', '.join(every)}")
            return None
        types = {type_text(fields[o][step]) for o in having}
        if len(having) == len(options) and len(types) == 1:
            return fields[having[0]][step]
        label = (f"only {' and '.join(having)} {'has' if len(having) == 1 else 'have'} it"
                 if len(having) < len(options) else "its type differs between the variants")
        self.diags.report("SW4031", f"'{step}' is not a field of every variant '{shown}' may be",
                          parsed.name_span(parent), label=label,
                          help=f"test the variant first: '{{% if {shown} is {having[0]} %}}...{{% endif %}}'",
                          notes=[f"'{shown}' is {' | '.join(options)} here"])
        return None

    def _maybe_none(self, node: nodes.Node, read: nodes.Node, t: ir.Optional_, parents: dict[int, nodes.Node],
                    parsed: ParsedTemplate, shown: str) -> None:
        """SW4014 for a field or item read from an optional value that no test around it shows is there."""
        path = jinja_path(node)
        if path is not None and path in _narrowed(node, parents, self.memo, self.blocks):
            return
        call = parents.get(id(read))
        whole = call if isinstance(call, nodes.Call) and call.node is read else read  # `x.f()`, not `x.f`
        span = parsed.node_span(read)
        written = parsed.node_span(whole).text
        self.diags.report("SW4014", f"'{shown}' may be none here", span,
                          label=f"'{shown}' is {type_text(t)}: it may be none",
                          help=f"test it first: '{{% if {shown} %}}...{{% endif %}}'"
                               + (f", or '{{{{ {written} if {shown} }}}}'" if "\n" not in written else ""))

    def _does_work(self, state: str) -> bool:
        view = self.symbols.states.get(state)
        return view is not None and view.kind in ("agent", "action")

    def _absent(self, output: nodes.Node, state: str, parents: dict[int, nodes.Node], parsed: ParsedTemplate,
                reader: str, template: str) -> None:
        """SW4014 for a field or item of `STATE.output`, or a loop over it, where STATE may not have run.

        A template is rendered when its state is entered, before that state's step: STATE must have run
        before `reader` (or be shown to have run by a test around the read)."""
        use = parents.get(id(output))
        reads = (isinstance(use, (nodes.Getattr, nodes.Getitem)) and use.node is output) or (
            isinstance(use, nodes.For) and use.iter is output)
        if not reads or self.flow is None or self.flow.runs_before(state, reader):
            return
        if state == reader and template in ("result", "fail") and self._does_work(reader):
            return  # a final state's result and reason are rendered after its own step
        if f"{state}.output" in _narrowed(output, parents, self.memo, self.blocks):
            return
        assert use is not None
        shown = parsed.node_span(use.iter if isinstance(use, nodes.For) else use)
        text = shown.text if shown is not None and "\n" not in shown.text else f"{state}.output..."
        when = "is rendered before its state runs" if state == reader else f"is rendered when '{reader}' starts"
        self.diags.report(
            "SW4014", f"'{state}.output' may be none here: '{state}' may not have run before state '{reader}'",
            shown, label=f"the {template} {when}; '{state}' may not have run yet",
            notes=absent_output_notes(state, reader, self.flow),
            help=f"test that it ran first: '{{% if {state}.output %}}...{{% endif %}}'"
                 + (f", or '{{{{ {text} if {state}.output }}}}'" if not isinstance(use, nodes.For) else ""))

    def _fields(self, node: nodes.Node, t: TypeLike, parents: dict[int, nodes.Node], parsed: ParsedTemplate,
                shown: str) -> None:
        """Follow `.field` / `["field"]` / `[0]` reads from `node` while the type is known."""
        while True:
            parent = parents.get(id(node))
            step = _step(parent, node)
            if step is None or parent is None:
                return
            if isinstance(t, ir.Optional_):
                self._maybe_none(node, parent, t, parents, parsed, shown)
                t = t.inner
            if isinstance(t, UntypedResult) and isinstance(step, str):
                self.diags.report("SW4105", f"the result of machine '{t.machine}' has no declared type",
                                  parsed.name_span(parent), label=f"'{shown}' has no field '{step}' to read",
                                  help=f"declare 'returns TYPE' in the machine that '{t.machine}' runs, or use "
                                       f"'{shown}' as a whole")
                return
            if isinstance(t, TextOutput) and isinstance(step, str):
                self.diags.report("SW5002", f"state '{t.state}' has no typed output", parsed.name_span(parent),
                                  label=f"'{shown}' is plain text, so it has no field '{step}'",
                                  help=f"declare 'output TYPE' in state '{t.state}', "
                                       f"or use '{shown}' as a whole")
                return
            if isinstance(t, ir.Variant) and isinstance(step, str):
                field = self._variant_field(node, t, step, parents, parsed, shown)
                if field is None:
                    return
                t, shown, node = field, f"{shown}.{step}", parent
                continue
            if isinstance(t, (ir.Named, Record)) and isinstance(step, str):
                fields = fields_of(t, self.symbols)
                if step not in fields:
                    self.diags.report("SW2006", f"{type_text(t)} has no field '{step}'", parsed.name_span(parent),
                                      label="unknown field", help=unknown_field_help(step, fields))
                    return
                if isinstance(t, ir.Named):
                    self.symbols.field_reads.append(FieldRead(t.name, step, parsed.name_span(parent)))
                t, shown, node = fields[step], f"{shown}.{step}", parent
                continue
            if isinstance(t, ir.ListOf) and isinstance(step, int):
                t, shown, node = t.item, f"{shown}[{step}]", parent
                continue
            return  # str methods, `any`, and the like: the template engine decides at run time


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
