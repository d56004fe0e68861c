"""The canonical formatter: one layout for every `.fsm` file, comments kept, nothing ever reordered.

The layout is printed from the syntax tree, so it never depends on how the input was laid out; comments
(which the grammar ignores) are attached to the printed lines by their source positions. Before a result
is handed back it is parsed again and compared with the input, so a formatter bug can never silently
change a machine or drop a comment: it becomes an SW9001 diagnostic and the file is left alone.

`expr_to_source` is the one writer of guard expressions as source text; graph labels and the compiler's
messages quote guards through it too.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from ...diagnostics import Diagnostic, Diagnostics, SourceFile, Span
from ...diagnostics.source import END_SHIFT, START_MASK
from ...grammar import ast, parse_source
from ...grammar.node import digest
from ...grammar.parser import next_code
from .source_text import (
    INDENT,
    display_width,
    double_quoted,
    expr_to_source,
    range_source,
    signed_number,
    triple_quoted,
    written_duration,
    written_number,
)

# An object or list value that fits in this many columns (indentation included) is printed on one line.
LINE_WIDTH = 100

# Machine items in one of these groups sit on consecutive lines; every other pair of neighbours (and any
# two items of different groups) is separated by one blank line.
_CONSECUTIVE_GROUPS = frozenset({"description", "inputs", "defaults", "vars", "tools"})

_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WHITESPACE = " \t\f\r\n"


@dataclass
class FormatResult:
    """The canonical text of a file, or None with the diagnostics that explain why it has none."""

    text: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)


def format_text(text: str, path: str = "<stdin>") -> FormatResult:
    return format_source(SourceFile(path, text))


def format_source(source: SourceFile) -> FormatResult:
    """Format one file. A file with syntax errors is refused: text None, the parser's diagnostics."""
    parsed = parse_source(source)
    if parsed.machine is None or parsed.diagnostics.has_errors:
        return FormatResult(None, parsed.diagnostics.sorted())
    layout = _Layout(source, parsed.machine, parsed.comments)
    span = parsed.machine.span
    before = digest(parsed.machine), comment_texts(parsed.comments)
    del parsed  # the tree goes once printing has its shape, before the text is read again (two trees of a
    text = layout.render()  # large file are never held at once, nor a tree beside the printed text)
    del layout
    problem = _round_trip_problem(before, text, source.path)
    if problem:
        diagnostics = Diagnostics()
        diagnostics.report(
            "SW9001", f"the formatter would {problem}; the file was left unchanged", span,
            help="please report this with the input file",
        )
        return FormatResult(None, diagnostics.sorted())
    return FormatResult(text, [])


def unified_diff(old: str, new: str, path: str) -> str:
    """The change from `old` to `new` as a unified diff (`--- PATH.orig` / `+++ PATH`), '' when equal."""
    lines = difflib.unified_diff(_diff_lines(old), _diff_lines(new), f"{path}.orig", path)
    return "".join(lines)


def _bound(count: ast.Number | ast.Name) -> str:
    """A bound's count: the number, or the name of the input it is read from (`max rounds`)."""
    return count.value if isinstance(count, ast.Name) else written_number(count.value)


def comment_texts(comments: list[ast.Comment]) -> Counter[str]:
    """The comments of a file as the formatter keeps them: trailing whitespace is not part of a comment."""
    return Counter(c.text.rstrip(_WHITESPACE) for c in comments)


def _diff_lines(text: str) -> list[str]:
    # split on "\n" only: str.splitlines would also break at U+2028 and friends inside strings
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    if lines[-1] == "":
        lines.pop()
    elif lines:
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def _round_trip_problem(before: tuple[bytes, Counter[str]], text: str, path: str) -> str:
    """What reading the formatted text back shows the formatter would break: the input's tree is compared by
    its digest (grammar.node.digest), and its comments as comment_texts keeps them."""
    reparsed = parse_source(SourceFile(path, text))
    if reparsed.machine is None or reparsed.diagnostics.has_errors:
        return "produce text that does not parse"
    if digest(reparsed.machine) != before[0]:
        return "change the meaning of the machine"
    if comment_texts(reparsed.comments) != before[1]:
        return "lose or alter a comment"
    return ""


# ---- the printed shape: lines and blocks, each remembering where it came from ----------------------


@dataclass(slots=True)
class _Comment:
    text: str
    blank_before: bool = False


class _Element:
    """One printed statement, a line (a `_Block` is a declaration), with the comments attached to it.

    `offsets` is the statement's source range, used to place comments, packed as a span packs it: the very
    int its syntax-tree node holds, so the elements of a large file make no numbers of their own. The comment
    lists are an empty tuple until one is attached (_add): most elements of a large file have none. A line
    has slots only for what a line holds; what only a block has is read from the class."""

    __slots__ = ("group", "inner", "leading", "offsets", "text", "trailing")

    block = False
    open_pos = -1  # source offset of a block's opening bracket
    opener = "{"
    closer = "}"
    children: Sequence[_Element] = ()  # a block's: a list (a line has none)
    end_comments: Sequence[_Comment] = ()  # own-line comments before a block's closer
    close_trailing: Sequence[str] = ()

    def __init__(self, offsets: int, text: str, group: str = "") -> None:
        self.offsets = offsets
        self.text = text  # a line's full text (may span lines: triple-quoted strings); a block's header
        self.group = group
        self.leading: Sequence[_Comment] = ()  # own-line comments before the element
        self.inner: Sequence[_Comment] = ()  # comments that were inside a single statement
        self.trailing: Sequence[str] = ()  # after the line, or after a block's opening bracket

    @property
    def start(self) -> int:
        return self.offsets & START_MASK

    @property
    def end(self) -> int:
        return self.offsets >> END_SHIFT


class _Block(_Element):
    """A `header {` ... `}` declaration (or a value written over lines, between other brackets)."""

    __slots__ = ("children", "close_trailing", "closer", "end_comments", "open_pos", "opener")

    block = True

    def __init__(self, offsets: int, header: str, open_pos: int, children: Sequence[_Element], group: str = "",
                 opener: str = "{", closer: str = "}") -> None:
        super().__init__(offsets, header, group)
        self.open_pos = open_pos
        self.children = children
        self.opener, self.closer = opener, closer
        self.end_comments = ()
        self.close_trailing = ()


def _add(element: _Element, where: str, comment: object) -> None:
    """Attach a comment to one of an element's lists of comments (made on the first one)."""
    attached = getattr(element, where)
    if not attached:
        attached = []
        setattr(element, where, attached)
    attached.append(comment)


def _line(node_span: Span, text: str, group: str = "") -> _Element:
    return _Element(node_span.packed_offsets, text, group)


class _Layout:
    def __init__(self, source: SourceFile, machine: ast.Machine, comments: list[ast.Comment]) -> None:
        self.source = source
        self.text = source.text
        self.machine = machine
        self.comments = comments
        self.comment_starts = sorted(c.span.start for c in comments)
        self.file_end: list[_Comment] = []

    # ---- rendering -------------------------------------------------------------------------------

    def render(self) -> str:
        """The canonical text. The syntax tree is let go as soon as the printed shape is made from it: the
        shape and the text are all that printing needs (the caller keeps the tree's digest instead)."""
        machine, self.machine = self.machine, None  # type: ignore[assignment]
        # the machine's items are printed one at a time, each let go once its shape is made (the caller
        # keeps no other reference): the tree and its printed shape are never both held whole
        span, header, after_header = machine.span, f"machine {machine.name.value}", machine.name.span.end
        items: list[ast.MachineItem | None] = list(machine.items)
        use_decls = machine.uses
        del machine
        children = []
        for i, item in enumerate(items):
            assert item is not None
            items[i] = None
            children.append(self._machine_item(item))
            del item
        root = self._block(span, header, after_header, children)
        uses = [self._use(u) for u in use_decls]  # the `use` lines before the machine
        del use_decls
        for comment in self.comments:
            if uses and comment.span.start < root.start:
                self._attach_before_machine(uses, root, comment)
            else:
                self._attach(root, comment)
        out: list[str] = []
        for i, use in enumerate(uses):
            self._emit_leading(out, use, "", first=i == 0, separated=False)
            self._emit(out, use, 0)
        self._emit_leading(out, root, "", first=not uses, separated=bool(uses))
        self._emit(out, root, 0)
        for last in self.file_end:
            if last.blank_before:
                out.append("")
            out.append(last.text)
        return "\n".join(out) + "\n"

    def _emit_leading(self, out: list[str], e: _Element, indent: str, *, first: bool, separated: bool
                      ) -> None:
        comments = list(e.leading)
        blank_after = bool(comments) and self._blank_before(e.start)
        if e.inner:
            # comments that sat inside the statement follow the ones written before it
            first_inner = _Comment(e.inner[0].text, blank_after and bool(comments))
            comments += [first_inner, *(_Comment(c.text) for c in e.inner[1:])]
            blank_after = False
        for i, comment in enumerate(comments):
            blank = separated or comment.blank_before if i == 0 else comment.blank_before
            if blank and not (i == 0 and first):
                out.append("")
            out.append(indent + comment.text)
        if (blank_after or (separated and not comments)) and not (first and not comments):
            out.append("")

    def _emit(self, out: list[str], e: _Element, depth: int) -> None:
        indent = INDENT * depth
        if not e.block:
            out.append(indent + e.text + _trailing(e.trailing[:1]))
            out.extend(indent + extra for extra in e.trailing[1:])
            return
        head = indent + (f"{e.text} {e.opener}" if e.text else e.opener)
        if not e.children and not e.end_comments and not e.trailing:
            out.append(head + e.closer + _trailing(e.close_trailing[:1]))
            out.extend(indent + extra for extra in e.close_trailing[1:])
            return
        out.append(head + _trailing(e.trailing[:1]))
        inner = INDENT * (depth + 1)
        out.extend(inner + extra for extra in e.trailing[1:])
        previous: _Element | None = None
        for child in e.children:
            separated = previous is not None and depth == 0 and _separated(previous, child)
            self._emit_leading(out, child, inner, first=previous is None, separated=separated)
            self._emit(out, child, depth + 1)
            previous = child
        for i, comment in enumerate(e.end_comments):
            if comment.blank_before and (i > 0 or previous is not None):
                out.append("")
            out.append(inner + comment.text)
        out.append(indent + e.closer + _trailing(e.close_trailing[:1]))
        out.extend(indent + extra for extra in e.close_trailing[1:])

    # ---- comments --------------------------------------------------------------------------------

    def _attach(self, root: _Element, comment: ast.Comment) -> None:
        pos = comment.span.start
        text = comment.text.rstrip(_WHITESPACE)
        after_code = self._code_before_on_line(pos)
        if pos < root.start:
            _add(root, "leading", _Comment(text, self._blank_before(pos) and bool(root.leading)))
        elif pos >= root.end:
            if after_code and not self.file_end:
                _add(root, "close_trailing", text)
            else:
                self.file_end.append(_Comment(text, self._blank_before(pos)))
        else:
            self._attach_in_block(root, pos, text, after_code)

    def _attach_before_machine(self, uses: list[_Element], root: _Element, comment: ast.Comment) -> None:
        """A comment before the machine, among its `use` lines: before, inside or after one of them."""
        pos = comment.span.start
        text = comment.text.rstrip(_WHITESPACE)
        following = [*uses, root]
        i = bisect.bisect_right(uses, pos, key=_start_of)  # the uses that start before the comment
        if i > 0 and pos < uses[i - 1].end:
            _add(uses[i - 1], "inner", _Comment(text))
        elif i > 0 and self._code_before_on_line(pos):
            _add(uses[i - 1], "trailing", text)
        else:
            _add(following[i], "leading", _Comment(text, self._blank_before(pos)))

    def _attach_in_block(self, block: _Element, pos: int, text: str, after_code: bool) -> None:
        while True:
            if pos < block.open_pos:  # between the statement's first word and its bracket
                _add(block, "inner", _Comment(text))
                return
            i = bisect.bisect_left(block.children, pos, key=_start_of)
            if i > 0 and pos < block.children[i - 1].end:
                child = block.children[i - 1]
                if child.block:
                    block = child
                    continue
                _add(child, "inner", _Comment(text))
                return
            break
        previous = block.children[i - 1] if i > 0 else None
        if after_code:
            if previous is None:
                _add(block, "trailing", text)
            elif previous.block:
                _add(previous, "close_trailing", text)
            else:
                _add(previous, "trailing", text)
        elif i < len(block.children):
            _add(block.children[i], "leading", _Comment(text, self._blank_before(pos)))
        else:
            _add(block, "end_comments", _Comment(text, self._blank_before(pos)))

    def _code_before_on_line(self, pos: int) -> bool:
        i = pos - 1
        while i >= 0 and self.text[i] in " \t\f\r":
            i -= 1
        return i >= 0 and self.text[i] != "\n"

    def _blank_before(self, pos: int) -> bool:
        """Whether a blank line separates `pos` from the code or comment before it."""
        newlines = 0
        i = pos - 1
        while i >= 0 and self.text[i] in _WHITESPACE:
            newlines += self.text[i] == "\n"
            i -= 1
        return newlines >= 2 and i >= 0

    def _next_code(self, pos: int) -> int:
        """The offset of the first character of code at or after `pos`, skipping whitespace and comments."""
        return next_code(self.text, pos)

    # ---- the machine and its declarations ------------------------------------------------------

    def _block(self, span: Span, header: str, after_header: int, children: list[_Element], group: str = ""
               ) -> _Element:
        """A `header { ... }` declaration; its `{` is the first code after `after_header`."""
        open_pos = self._next_code(after_header)
        return _Block(span.packed_offsets, header, open_pos, children, group)

    def _use(self, use: ast.UseDecl) -> _Element:
        text = f"use {self._string(use.path, 0)}"
        if use.alias is not None:
            text += f" as {use.alias.value}"
        if use.names is not None:
            text += " { " + ", ".join(n.dotted for n in use.names) + " }" if use.names else " {}"
        return _line(use.span, text, "uses")

    def _machine_item(self, item: ast.MachineItem) -> _Element:
        depth = 1
        if isinstance(item, ast.Description):
            return _line(item.span, f"description {self._string(item.text, depth)}", "description")
        if isinstance(item, ast.InputDecl):
            text = f"input {item.name.value}: {self._type(item.type, depth)}"
            text += self._constraints(item.constraints, depth)
            if item.default is None:
                return _line(item.span, text, "inputs")
            return self._valued(item.span, text + " =", item.default, depth, group="inputs")
        if isinstance(item, ast.ModelSetting):
            return _line(item.span, f"model {self._string(item.model, depth)}", "defaults")
        if isinstance(item, ast.VerifierModelSetting):
            return _line(item.span, f"verifier model {self._string(item.model, depth)}", "defaults")
        if isinstance(item, ast.TemperatureSetting):
            return _line(item.span, f"temperature {written_number(item.value.value)}", "defaults")
        if isinstance(item, ast.Limits):
            limits = [_line(lim.span, f"{lim.name.value} {written_number(lim.value.value)}") for lim in item.items]
            return self._block(item.span, "limits", item.span.start + len("limits"), limits, "defaults")
        if isinstance(item, ast.VarDecl):
            text = f"var {item.name.value}: {self._type(item.type, depth)} ="
            return self._valued(item.span, text, item.value, depth, group="vars")
        if isinstance(item, ast.ReturnsSetting):
            return _line(item.span, f"returns {self._type(item.type, depth)}", "inputs")
        if isinstance(item, ast.TypeDecl):
            fields = [self._field(f) for f in item.fields]
            return self._block(item.span, f"type {item.name.value}", item.name.span.end, fields, "type")
        if isinstance(item, ast.ToolDecl):
            return self._tool(item)
        if isinstance(item, ast.AgentDecl):
            items = [self._agent_item(i) for i in item.items]
            return self._block(item.span, f"agent {item.name.value}", item.name.span.end, items, "agent")
        if isinstance(item, ast.StateDecl):
            return self._state(item)
        if isinstance(item, ast.TestDecl):
            items = [self._test_item(i) for i in item.items]
            header = f"test {self._string(item.name, depth)}"
            return self._block(item.span, header, item.name.span.end, items, "test")
        raise TypeError(f"unknown machine item {type(item).__name__}")

    def _field(self, f: ast.FieldDecl) -> _Element:
        text = f"{f.name.value}: {self._type(f.type, 2)}" + self._constraints(f.constraints, 2)
        if f.doc is not None:
            text += " " + self._string(f.doc, 2)
        return _line(f.span, text)

    def _tool(self, tool: ast.ToolDecl) -> _Element:
        text = f"tool {tool.name.dotted}"
        after = tool.name.span.end
        if tool.import_path is not None:
            text += f" = {self._string(tool.import_path, 1)}"
            after = tool.import_path.span.end
        if not (tool.options or tool.secrets or tool.headers or tool.query):
            return _line(tool.span, text, "tools")
        items: list[_Element] = [self._valued(o.span, o.name.value, o.value, 2) for o in tool.options]
        items += [_line(s.span, "secrets [" + ", ".join(n.value for n in s.names) + "]") for s in tool.secrets]
        items += [self._text_entries(h.span, "headers", h.entries) for h in tool.headers]
        items += [self._text_entries(q.span, "query", q.entries) for q in tool.query]
        items.sort(key=_start_of)  # the AST keeps each kind apart; the source order is the spans'
        return self._block(tool.span, text, after, items, "tools")

    def _text_entries(self, span: Span, keyword: str, entries: tuple[ast.TextEntry, ...]) -> _Element:
        """`headers { ... }` or `query { ... }`: one `name "value"` per line, a name bare when it can be."""
        lines = []
        for entry in entries:
            name = entry.name.value
            key = name if _BARE_NAME.fullmatch(name) else self._string(entry.name, 3)
            lines.append(_line(entry.span, f"{key} {self._string(entry.value, 3)}"))
        return self._block(span, keyword, span.start + len(keyword), lines)

    def _agent_item(self, item: ast.AgentItem) -> _Element:
        depth = 2
        if isinstance(item, ast.PromptSetting):
            return _line(item.span, f"prompt {self._string(item.text, depth)}")
        if isinstance(item, ast.ModelSetting):
            return _line(item.span, f"model {self._string(item.model, depth)}")
        if isinstance(item, ast.TemperatureSetting):
            return _line(item.span, f"temperature {written_number(item.value.value)}")
        if isinstance(item, ast.ToolsSetting):
            return _line(item.span, "tools [" + ", ".join(t.dotted for t in item.tools) + "]")
        if isinstance(item, ast.MemorySetting):
            count = f" {written_number(item.count.value)}" if item.count is not None else ""
            return _line(item.span, f"memory {item.policy.value}{count}")
        if isinstance(item, ast.FallbacksSetting):
            models = ", ".join(self._string(m, depth) for m in item.models)
            return _line(item.span, f"fallbacks [{models}]")
        raise TypeError(f"unknown agent item {type(item).__name__}")

    def _state(self, state: ast.StateDecl) -> _Element:
        header = "start " * state.start + "final " * state.final + "branch " * state.branch + f"state {state.name.value}"
        if not state.items and not state.has_body:
            return _line(state.span, header, "state")
        items = [self._state_item(i) for i in state.items]
        return self._block(state.span, header, state.name.span.end, items, "state")

    def _state_item(self, item: ast.StateItem) -> _Element:
        depth = 2
        if isinstance(item, ast.AgentRef):
            return _line(item.span, f"agent {item.name.value}")
        if isinstance(item, ast.Instruction):
            return _line(item.span, f"do {self._string(item.text, depth)}")
        if isinstance(item, ast.Ask):
            return _line(item.span, f"ask {self._string(item.text, depth)}")
        if isinstance(item, ast.OutputDecl):
            if isinstance(item.type, ast.VariantType):
                return _line(item.span, "output " + " | ".join(n.value for n in item.type.options))
            return _line(item.span, f"output {self._type(item.type, depth)}")
        if isinstance(item, ast.Tell):
            return _line(item.span, "tell [" + ", ".join(n.value for n in item.agents) + "]")
        if isinstance(item, ast.Visits):
            return _line(item.span, f"visits {_bound(item.count)}")
        if isinstance(item, ast.Retries):
            return _line(item.span, f"retries {written_number(item.count.value)}")
        if isinstance(item, ast.ToolCall):
            args = ", ".join(f"{a.name.value} = {self._expr(a.value, depth)}" for a in item.args)
            return _line(item.span, f"call {item.tool.dotted}({args})")
        if isinstance(item, ast.RunCall):
            args = ", ".join(f"{a.name.value} = {self._expr(a.value, depth)}" for a in item.args)
            return _line(item.span, f"run {item.machine.value}({args})")
        if isinstance(item, ast.Result):
            return _line(item.span, f"result {self._string(item.text, depth)}")
        if isinstance(item, ast.Fail):
            return _line(item.span, f"fail {self._string(item.text, depth)}")
        if isinstance(item, ast.ModelSetting):
            return _line(item.span, f"model {self._string(item.model, depth)}")
        if isinstance(item, ast.Parallel):
            return _line(item.span, "parallel [" + ", ".join(n.value for n in item.branches) + "]")
        if isinstance(item, ast.Join):
            text = f"join {item.rule.value}"
            if item.count is not None:
                text += f" {written_number(item.count.value)}"
            if item.guard is not None:
                text += f" where {self._expr(item.guard, depth)}"
            return _line(item.span, text)
        if isinstance(item, ast.ForEach):
            names = f"{item.index.value}, {item.item.value}" if item.index is not None else item.item.value
            text = f"for {names} in {self._expr(item.items, depth)}"
            if item.max is not None:
                text += f" max {_bound(item.max)}"
            if item.concurrency is not None:
                text += f" concurrency {written_number(item.concurrency.value)}"
            return _line(item.span, text)
        if isinstance(item, ast.Update):
            return _line(item.span, f"{item.reducer} {item.var.value} <- {self._expr(item.value, depth)}")
        if isinstance(item, ast.AskBefore):
            return _line(item.span, "ask before [" + ", ".join(t.dotted for t in item.tools) + "]")
        if isinstance(item, ast.ToolRounds):
            return _line(item.span, f"tool_rounds {written_number(item.count.value)}")
        if isinstance(item, ast.Transition):
            return _line(item.span, self._transition(item, depth))
        raise TypeError(f"unknown state item {type(item).__name__}")

    def _transition(self, t: ast.Transition, depth: int) -> str:
        target = t.target.value if t.target is not None else ""
        if t.kind == "guard":
            assert t.guard is not None
            text = f"when {self._expr(t.guard, depth)} -> {target}"
        elif t.kind == "condition":
            assert t.condition is not None
            text = f"when {self._string(t.condition, depth)} -> {target}"
        elif t.kind == "always":
            text = f"-> {target}"
        elif t.kind == "otherwise":
            text = f"otherwise -> {target}"
        elif t.kind == "timeout":
            assert t.after is not None
            text = f"after {written_duration(t.after)} -> {target}"
        else:
            text = "otherwise stay"
        if t.max is not None:
            text += f" max {_bound(t.max)}"
            if t.per_visit is not None:
                text += " per visit"
        return text

    def _test_item(self, item: ast.TestItem) -> _Element:
        depth = 2
        if isinstance(item, ast.TestInput):
            return self._valued(item.span, "input", item.values, depth)
        if isinstance(item, ast.Reply):
            variant = f" {item.variant.value}" if item.variant is not None else ""
            return self._valued(item.span, f"reply {item.state.value}{variant}", item.value, depth)
        if isinstance(item, ast.ReplyCalls):
            calls = ", ".join(
                f"{c.tool.dotted}(" + ", ".join(f"{a.name.value} = {self._inline_value(a.value, depth)}"
                                               for a in c.args) + ")" for c in item.calls)
            return _line(item.span, f"reply {item.state.value} call {calls}")
        if isinstance(item, ast.Verdict):
            answer = self._string(item.condition, depth) if item.condition is not None else "none"
            return _line(item.span, f"verdict {item.state.value} {answer}")
        if isinstance(item, ast.TestTimeout):
            return _line(item.span, f"timeout {item.state.value}")
        if isinstance(item, ast.ExpectPath):
            return _line(item.span, "expect path [" + ", ".join(s.value for s in item.states) + "]")
        if isinstance(item, ast.ExpectFinal):
            return _line(item.span, f"expect final {item.state.value}")
        if isinstance(item, ast.ExpectResult):
            return self._valued(item.span, "expect result", item.value, depth)
        if isinstance(item, ast.ExpectFailure):
            return _line(item.span, f"expect failure {item.kind.value}")
        if isinstance(item, (ast.ExpectOutput, ast.ExpectInstruction)):
            what = "output" if isinstance(item, ast.ExpectOutput) else "instruction"
            head = f"expect {what} {item.state.value}"
            if item.visit is not None:
                head += f" visit {written_number(item.visit.value)}"
            if isinstance(item, ast.ExpectInstruction):
                return _line(item.span, head + (" contains " if item.contains else " ") + self._string(item.text, depth))
            if item.contains:
                return _line(item.span, f"{head} contains {self._value(item.value, depth)}")
            return self._valued(item.span, head, item.value, depth)
        if isinstance(item, ast.ExpectVar):
            return self._valued(item.span, f"expect var {item.name.value}", item.value, depth)
        if isinstance(item, ast.Approval):
            head = f"{item.decision} {item.state.value}"
            if item.tool is not None:
                head += f" {item.tool.dotted}"
            if item.arguments is not None:
                return self._valued(item.span, head, item.arguments, depth)
            if item.reason is not None:
                head += f" {self._string(item.reason, depth)}"
            return _line(item.span, head)
        if isinstance(item, ast.AllowUnused):
            return _line(item.span, "allow unused replies")
        raise TypeError(f"unknown test item {type(item).__name__}")

    # ---- values: on one line when they fit, else objects and lists of objects are blocks ----------

    def _valued(self, span: Span, owner: str, value: ast.Value, depth: int, *, suffix: str = "",
                group: str = "") -> _Element:
        """`owner value` as one element: one line when it fits, else a block when the value is an object
        or holds objects."""
        if not _spans_lines(value):
            text = f"{owner} {self._value(value, depth)}" if owner else self._value(value, depth)
            return _line(span, text + suffix, group)
        one_line = self._one_line(owner, value, depth, suffix)
        if one_line is not None:
            return _line(span, one_line, group)
        children: list[_Element]
        if value.kind == "object":
            children = [self._valued(e.span, e.key.value, e.value, depth + 1)
                        for e in ast.object_entries(value)]
            opener, closer = "{", "}"
        else:
            children = [self._valued(v.span, "", v, depth + 1, suffix=",") for v in ast.list_items(value)]
            opener, closer = "[", "]"
        return _Block(span.packed_offsets, owner, value.span.start, children, group, opener, closer + suffix)

    def _one_line(self, owner: str, value: ast.Value, depth: int, suffix: str) -> str | None:
        """`owner { key value, ... }` when it fits in LINE_WIDTH and nothing in the value needs a line of
        its own: a comment inside it keeps the block (where the comment has its place), and so does a
        string written over several lines. Both are read from the text being printed, so the choice is
        the same when the result is formatted again."""
        i = bisect.bisect_left(self.comment_starts, value.span.start)
        if i < len(self.comment_starts) and self.comment_starts[i] < value.span.end:
            return None
        text = self._inline_value(value, depth)
        if "\n" in text:
            return None
        line = (f"{owner} {text}" if owner else text) + suffix
        if display_width(INDENT * depth + line) > LINE_WIDTH:
            return None
        return line

    def _value(self, value: ast.Value, depth: int) -> str:
        kind = value.kind
        if kind == "str":
            return self._string_value(str(value.value), value.span, depth)
        if kind in ("int", "float"):
            return signed_number(cast(float, value.value))
        if kind == "bool":
            return "true" if value.value else "false"
        if kind == "none":
            return "none"
        if kind == "list":
            return "[" + ", ".join(self._value(v, depth) for v in ast.list_items(value)) + "]"
        if kind == "object" and not value.value:
            return "{}"
        raise TypeError(f"value of kind {kind} cannot be printed on one line")

    def _inline_value(self, value: ast.Value, depth: int) -> str:
        """A value on one line, objects included (`{ path "a", size 3 }`): a scripted call's argument."""
        if value.kind == "object" and value.value:
            return "{ " + ", ".join(f"{e.key.value} {self._inline_value(e.value, depth)}"
                                    for e in ast.object_entries(value)) + " }"
        if value.kind == "list":
            return "[" + ", ".join(self._inline_value(v, depth) for v in ast.list_items(value)) + "]"
        return self._value(value, depth)

    # ---- types and expressions -----------------------------------------------------------------

    def _type(self, t: ast.TypeRef, depth: int) -> str:
        if isinstance(t, ast.NamedType):
            return t.name.value
        if isinstance(t, ast.ListType):
            return f"list[{self._type(t.item, depth)}]"
        if isinstance(t, ast.OptionalType):
            return f"{self._type(t.inner, depth)}?"
        if isinstance(t, ast.EnumType):
            return " | ".join(self._string(v, depth) for v in t.values)
        raise TypeError(f"unknown type {type(t).__name__}")

    def _constraints(self, constraints: tuple[ast.Constraint, ...], depth: int) -> str:
        """` in 1..5`, ` len ..80`, ` matches "..."`: each constraint as written, in the order written (a
        check reports an order other than the canonical one; the formatter never reorders)."""
        text = ""
        for c in constraints:
            if c.kind == "matches" and c.pattern is not None:
                text += f" matches {self._string(c.pattern, depth)}"
            elif c.range is not None:
                text += f" {c.kind} {range_source(c.range)}"
        return text

    def _expr(self, e: ast.Expr, depth: int) -> str:
        return expr_to_source(e, lambda literal: self._string_value(str(literal.value), literal.span, depth))

    # ---- strings -------------------------------------------------------------------------------

    def _string(self, s: ast.String, depth: int) -> str:
        return self._string_value(s.value, s.span, depth, triple=s.triple)

    def _string_value(self, value: str, span: Span | None, depth: int, *, triple: bool = False) -> str:
        """A string in the kind its author chose: triple-quoted stays triple-quoted when the value reads
        back unchanged that way; everything else is printed double-quoted with escapes."""
        written = span.text if span is not None and span.source is self.source else ""
        if triple or written.startswith('"""'):
            as_block = "\n" in written or "\n" in value
            text = triple_quoted(value, depth, as_block) or triple_quoted(value, depth, True)
            if text is not None:
                return text
        return double_quoted(value)


def _start_of(element: _Element) -> int:
    return element.start


def _separated(previous: _Element, current: _Element) -> bool:
    return previous.group != current.group or current.group not in _CONSECUTIVE_GROUPS


def _trailing(comments: Sequence[str]) -> str:
    return "  " + comments[0] if comments else ""


def _spans_lines(value: ast.Value) -> bool:
    """Objects with entries, and lists holding such objects: one entry per line unless they fit on one."""
    if value.kind == "object":
        return bool(value.value)
    if value.kind == "list":
        return any(_spans_lines(v) for v in ast.list_items(value))
    return False


