"""Template checks: every prompt, instruction and result parses as Jinja2 and reads only names in scope.

Instructions and results see the machine's inputs and `STATE.output`; an agent's prompt is rendered once
with the inputs only. Jinja reports positions as lines within the template; they are mapped back to the
`.fsm` file so a diagnostic points at the offending name, not at the whole string.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

import jinja2
from jinja2 import meta, nodes

from ..diagnostics import Diagnostics, Span, did_you_mean
from ..grammar import ast
from . import ir
from .resolve import StateView, Symbols, closest
from .typecheck import Record, TextOutput, TypeLike, fields_of, output_type, type_text, unknown_field_help

_ENV = jinja2.Environment()


class _TemplateText:
    """Maps a line of a template back to a range of the `.fsm` source holding it."""

    def __init__(self, string: ast.String) -> None:
        self.string = string
        span = string.span
        self.source = span.source
        text = self.source.text
        if string.triple:
            body = span.start + 3
            if text.startswith("\r\n", body):
                body += 2
            elif text.startswith("\n", body):
                body += 1
            end = span.end - 3
            self.lines: list[tuple[int, int]] = []
            pos = body
            while True:
                nl = text.find("\n", pos, end)
                if nl < 0:
                    self.lines.append((pos, end))
                    break
                self.lines.append((pos, nl))
                pos = nl + 1
        else:
            # a one-line string: every template line (escaped "\n") lives between its quotes
            self.lines = [(span.start + 1, max(span.start + 1, span.end - 1))]

    def line(self, lineno: int) -> tuple[int, int]:
        index = min(max(lineno, 1), len(self.lines)) - 1
        if not self.string.triple:
            index = 0
        return self.lines[index]

    def line_span(self, lineno: int) -> Span:
        start, end = self.line(lineno)
        chunk = self.source.text[start:end]
        lead = len(chunk) - len(chunk.lstrip())
        trail = len(chunk.rstrip())
        if trail <= lead:
            return self.string.span
        return self.source.span(start + lead, start + trail)

    def find(self, lineno: int, word: str, *, after_dot: bool = False) -> Span:
        """The first occurrence of `word` as a whole name on template line `lineno`."""
        start, end = self.line(lineno)
        prefix = r"\.\s*" if after_dot else r"(?<![\w.])"
        m = re.compile(prefix + r"(" + re.escape(word) + r")(?!\w)").search(self.source.text, start, end)
        if m is None:
            return self.line_span(lineno)
        return self.source.span(m.start(1), m.end(1))


def _parents(root: nodes.Node) -> dict[int, nodes.Node]:
    out: dict[int, nodes.Node] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.iter_child_nodes():
            out[id(child)] = node
            stack.append(child)
    return out


def _walk(root: nodes.Node) -> Iterator[nodes.Node]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(node.iter_child_nodes())))


def _undeclared(tree: nodes.Template) -> set[str]:
    """Names the template reads without setting them itself (loop targets, `set`, macro parameters)."""
    try:
        return set(meta.find_undeclared_variables(tree))
    except jinja2.TemplateError:
        # Jinja's own analysis stops at an unknown filter or test (reported separately); fall back to
        # treating every name the template assigns anywhere as local.
        local = {n.name for n in tree.find_all(nodes.Name) if n.ctx in ("store", "param")} | {"loop"}
        return {n.name for n in tree.find_all(nodes.Name) if n.ctx == "load"} - local


_BUILTIN_EXAMPLES = {"filter": "upper, join, length and default", "test": "defined, none and number"}
_INNERMOST_BLOCK = re.compile(r"The innermost block that needs to be closed is '(\w+)'")


def _unclosed_block(error: jinja2.TemplateSyntaxError, text: str) -> tuple[str, int] | None:
    """For "Unexpected end of template": the block tag left open and the template line it opens on.

    Jinja names the innermost open block but reports the end of the template as the place; the tag that
    opened the block is where the mistake is seen.
    """
    found = _INNERMOST_BLOCK.search(error.message or "")
    if found is None:
        return None
    tag = found.group(1)
    open_tags: list[tuple[str, int]] = []
    try:
        tokens = [token for token in _ENV.lex(text) if token[1] != "whitespace"]
    except jinja2.TemplateSyntaxError:
        return None
    for (lineno, kind, _), (_, next_kind, value) in itertools.pairwise(tokens):
        if kind != "block_begin" or next_kind != "name":
            continue
        if value.startswith("end"):
            for i in range(len(open_tags) - 1, -1, -1):
                if open_tags[i][0] == value[3:]:
                    del open_tags[i:]
                    break
        else:
            open_tags.append((value, lineno))
    return next(((t, line) for t, line in reversed(open_tags) if t == tag), None)


def _step(parent: nodes.Node | None, child: nodes.Node) -> str | int | None:
    """The field or index `parent` reads from `child` (`x.f`, `x["f"]`, `x[0]`), or None."""
    if isinstance(parent, nodes.Getattr) and parent.node is child:
        return str(parent.attr)
    if (isinstance(parent, nodes.Getitem) and parent.node is child and isinstance(parent.arg, nodes.Const)
            and isinstance(parent.arg.value, (str, int)) and not isinstance(parent.arg.value, bool)):
        return parent.arg.value  # type: ignore[no-any-return]
    return None


class _TemplateChecker:
    def __init__(self, symbols: Symbols, diags: Diagnostics) -> None:
        self.symbols = symbols
        self.diags = diags

    def check(self, string: ast.String, where: str, *, states_in_scope: bool) -> None:
        text = string.value
        if "{" not in text:
            return
        mapping = _TemplateText(string)
        try:
            tree = _ENV.parse(text)
        except jinja2.TemplateSyntaxError as e:
            # the names it reads are unknown, so count every input it mentions as read
            self.symbols.used_inputs.update(set(re.findall(r"[A-Za-z_]\w*", text)) & set(self.symbols.inputs))
            self._syntax_error(e, text, mapping, where)
            return
        undeclared = _undeclared(tree) - set(_ENV.globals)
        parents = _parents(tree)
        for node in _walk(tree):
            if isinstance(node, nodes.Filter) and node.name not in _ENV.filters:
                self._unknown_helper("filter", node.name, _ENV.filters, mapping, node.lineno, where)
            elif isinstance(node, nodes.Test) and node.name not in _ENV.tests:
                self._unknown_helper("test", node.name, _ENV.tests, mapping, node.lineno, where)
            elif isinstance(node, nodes.Name) and node.ctx == "load" and node.name in undeclared:
                self._name(node, parents, mapping, where, states_in_scope)

    def _syntax_error(self, e: jinja2.TemplateSyntaxError, text: str, mapping: _TemplateText, where: str
                      ) -> None:
        opener = _unclosed_block(e, text)
        if opener is not None:
            tag, lineno = opener
            self.diags.report("SW5001", f"template syntax error in {where}: '{{% {tag} %}}' is never closed",
                              mapping.find(lineno, tag), label=f"this '{tag}' has no '{{% end{tag} %}}'",
                              help=f"close the block with {{% end{tag} %}} where it should end")
            return
        self.diags.report("SW5001", f"template syntax error in {where}: {e.message}",
                          mapping.line_span(e.lineno or 1), label="Jinja2 cannot parse this",
                          help="write variables as {{ name }} and blocks as {% if ... %}...{% endif %}")

    def _unknown_helper(self, kind: str, name: str, known: Iterable[str], mapping: _TemplateText, lineno: int,
                        where: str) -> None:
        self.diags.report("SW5001", f"unknown Jinja2 {kind} '{name}' in {where}", mapping.find(lineno, name),
                          label=f"no {kind} with this name",
                          help=did_you_mean(name, known) or f"templates have Jinja2's built-in {kind}s only, "
                                                            f"such as {_BUILTIN_EXAMPLES[kind]}")

    def _name(self, node: nodes.Name, parents: dict[int, nodes.Node], mapping: _TemplateText, where: str,
              states_in_scope: bool) -> None:
        s = self.symbols
        name = node.name
        if name in s.inputs:
            s.used_inputs.add(name)
            self._fields(node, s.resolve_type(s.inputs[name].type), parents, mapping, name)
            return
        if name in s.states and states_in_scope:
            self._state(node, s.states[name], parents, mapping)
            return
        span = mapping.find(node.lineno, name)
        if name in s.states:
            self.diags.report("SW2008", f"an agent's prompt cannot read state '{name}'", span,
                              label="not in scope in a prompt",
                              help="a prompt is rendered once with the machine's inputs; put "
                                   f"'{name}.output' in "
                                   "the 'do' instruction of the state that needs it")
            return
        s.used_inputs.add(closest(name, s.inputs) or "")
        candidates = list(s.inputs) + (list(s.states) if states_in_scope else [])
        scope = "the machine's inputs and STATE.output" if states_in_scope else "the machine's inputs"
        self.diags.report("SW2008", f"unknown template variable '{name}' in {where}", span,
                          label="not in scope",
                          help=did_you_mean(name, candidates) or f"templates here can use {scope}")

    def _state(self, node: nodes.Name, view: StateView, parents: dict[int, nodes.Node],
               mapping: _TemplateText) -> None:
        parent = parents.get(id(node))
        step = _step(parent, node)
        if step is None:
            return  # the state on its own (e.g. `{{ draft }}`): left to the runtime's rendering
        if step != "output":
            self.diags.report("SW2006", f"state '{view.name}' has no field '{step}'",
                              mapping.find(node.lineno, str(step), after_dot=True), label="unknown field",
                              help=f"a template reads a state's result as '{view.name}.output'")
            return
        assert parent is not None
        self._fields(parent, output_type(view, self.symbols), parents, mapping, f"{view.name}.output")

    def _fields(self, node: nodes.Node, t: TypeLike, parents: dict[int, nodes.Node], mapping: _TemplateText,
                shown: str) -> None:
        """Follow `.field` / `["field"]` / `[0]` reads from `node` while the type is known."""
        while True:
            parent = parents.get(id(node))
            step = _step(parent, node)
            if step is None or parent is None:
                return
            if isinstance(t, ir.Optional_):
                t = t.inner
            if isinstance(t, TextOutput) and isinstance(step, str):
                self.diags.report("SW5002", f"state '{t.state}' has no typed output",
                                  mapping.find(parent.lineno, step, after_dot=True),
                                  label=f"'{shown}' is plain text, so it has no field '{step}'",
                                  help=f"declare 'output TYPE' in state '{t.state}', "
                                       f"or use '{shown}' as a whole")
                return
            if isinstance(t, (ir.Named, Record)) and isinstance(step, str):
                fields = fields_of(t, self.symbols)
                if step not in fields:
                    self.diags.report("SW2006", f"{type_text(t)} has no field '{step}'",
                                      mapping.find(parent.lineno, step, after_dot=True),
                                      label="unknown field", help=unknown_field_help(step, fields))
                    return
                t, shown, node = fields[step], f"{shown}.{step}", parent
                continue
            if isinstance(t, ir.ListOf) and isinstance(step, int):
                t, shown, node = t.item, f"{shown}[{step}]", parent
                continue
            return  # str methods, `any`, and the like: the template engine decides at run time


def check_templates(machine: ast.Machine, symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Parse every template and check the names and fields it reads."""
    checker = _TemplateChecker(symbols, diagnostics)
    for view in symbols.agents.values():
        if view.prompt is not None:
            checker.check(view.prompt.text, f"the prompt of agent '{view.decl.name.value}'",
                          states_in_scope=False)
    for state in symbols.states.values():
        if state.instruction is not None:
            checker.check(state.instruction.text, f"the instruction of state '{state.name}'",
                          states_in_scope=True)
        if state.result is not None:
            checker.check(state.result.text, f"the result of state '{state.name}'", states_in_scope=True)
