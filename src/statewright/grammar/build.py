"""The syntax tree builder: one method per grammar rule, called by the parse loop as the rule reduces.

Rule names match the AST classes of grammar/ast.py. A problem found while building (a bad escape, a number
too long) is a BuildFailure: reported, after which the loop reads on for syntax errors without building.
`token_failure` finds the same problems in a token alone, for the tokens the loop reads after that.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from lark import Token

from ..diagnostics import SourceFile, Span
from . import ast
from .lalr import BuildFailure, Meta
from .strings import BadEscape, decode_long_string, decode_string

MAX_NUMBER_DIGITS = 100
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}  # `after 24h`: the units, in seconds



_Bound = tuple[ast.Number | ast.Name, Span | None]  # `max N` (or `max INPUT`) and where `per visit` follows

class TreeBuilder:
    """Builds the syntax tree of one source file; one builder per parse, so parses never share one.

    The parse loop calls the method named for each rule it reduces, with the rule's place (a Meta) and its
    children as Lark's tree builder would shape them."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source

    def _span(self, meta: Meta) -> Span:
        if meta.empty:
            return self.source.span(0, 0)
        return self.source.span(meta.start_pos, meta.end_pos)

    def _tok_span(self, tok: Token) -> Span:
        return self.source.span(tok.start_pos or 0, tok.end_pos or 0)

    def _name(self, tok: Token) -> ast.Name:
        # A name is interned: every mention of a state, agent or type is then the same string, so the
        # compiler's lookups by name compare pointers and touch one string, not two (a large machine's
        # passes read far more names than fit in the processor's cache)
        return ast.Name(sys.intern(str(tok)), self._tok_span(tok))

    # tokens and literals
    def token_failure(self, kind: str, raw: str, start: int) -> BuildFailure | None:
        """What is wrong with a token on its own (the method that builds it would raise it): a bad escape
        in a string, a number or a duration too long to be one."""
        if kind == "STRING":
            try:
                decode_string(raw)
            except BadEscape as e:
                return _bad_escape(e, start)
        elif kind in ("INT", "FLOAT", "DURATION") and len(raw) > MAX_NUMBER_DIGITS:
            what = "a duration" if kind == "DURATION" else "a number"
            unit = "characters" if kind == "DURATION" else "digits"
            return BuildFailure("SW3015", f"{what} with {len(raw):,} {unit} is out of range", start,
                                start + len(raw), help=f"numbers have at most {MAX_NUMBER_DIGITS} digits")
        return None

    # tokens and literals
    def string(self, meta: Meta, tok: Token) -> ast.String:
        raw = str(tok)
        if tok.type == "LONG_STRING":
            return ast.String(decode_long_string(raw), True, self._tok_span(tok))
        try:
            return ast.String(decode_string(raw), False, self._tok_span(tok))
        except BadEscape as e:
            raise _bad_escape(e, tok.start_pos or 0) from None

    def number(self, meta: Meta | None, tok: Token) -> ast.Number:
        text = str(tok)
        if len(text) > MAX_NUMBER_DIGITS:
            raise self.token_failure(tok.type, text, tok.start_pos or 0)  # type: ignore[misc]
        value: int | float = int(text) if tok.type == "INT" else float(text)
        return ast.Number(value, self._tok_span(tok))

    # machine
    def start(self, meta: Meta, *parts: Any) -> ast.Machine:
        *uses, machine = parts
        return dataclasses.replace(machine, uses=tuple(uses)) if uses else machine  # type: ignore[no-any-return]

    # files that use files
    def use_decl(self, meta: Meta, path: ast.String, *rest: Any) -> ast.UseDecl:
        alias = next((self._name(r) for r in rest if isinstance(r, Token)), None)
        names = next((r for r in rest if isinstance(r, tuple)), None)
        return ast.UseDecl(path, alias, names, self._span(meta))

    def use_names(self, meta: Meta, *names: ast.ToolName | None) -> tuple[ast.ToolName, ...]:
        return tuple(n for n in names if n is not None)

    def returns_setting(self, meta: Meta, type_: ast.TypeRef) -> ast.ReturnsSetting:
        return ast.ReturnsSetting(type_, self._span(meta))

    def run_call(self, meta: Meta, machine: Token, *args: ast.CallArg | None) -> ast.RunCall:
        return ast.RunCall(self._name(machine), tuple(a for a in args if a is not None), self._span(meta))

    def machine(self, meta: Meta, name: Token, *items: object) -> ast.Machine:
        return ast.Machine(self._name(name), tuple(items), self._span(meta))  # type: ignore[arg-type]

    def description(self, meta: Meta, text: ast.String) -> ast.Description:
        return ast.Description(text, self._span(meta))

    def input_decl(self, meta: Meta, name: Token, type_: ast.TypeRef, *rest: object) -> ast.InputDecl:
        constraints = tuple(r for r in rest if isinstance(r, ast.Constraint))
        default = next((r for r in rest if isinstance(r, ast.Value)), None)
        return ast.InputDecl(self._name(name), type_, default, constraints, span=self._span(meta))

    def model_setting(self, meta: Meta, model: ast.String) -> ast.ModelSetting:
        return ast.ModelSetting(model, self._span(meta))

    def verifier_model_setting(self, meta: Meta, model: ast.String) -> ast.VerifierModelSetting:
        return ast.VerifierModelSetting(model, self._span(meta))

    def temperature_setting(self, meta: Meta, value: ast.Number) -> ast.TemperatureSetting:
        return ast.TemperatureSetting(value, self._span(meta))

    def limits(self, meta: Meta, *items: ast.Limit) -> ast.Limits:
        return ast.Limits(tuple(items), self._span(meta))

    def limit(self, meta: Meta, name: Token, value: ast.Number) -> ast.Limit:
        return ast.Limit(self._name(name), value, self._span(meta))

    def var_decl(self, meta: Meta, name: Token, type_: ast.TypeRef, value: ast.Value) -> ast.VarDecl:
        return ast.VarDecl(self._name(name), type_, value, self._span(meta))

    # types
    def type_decl(self, meta: Meta, name: Token, *fields: ast.FieldDecl) -> ast.TypeDecl:
        return ast.TypeDecl(self._name(name), tuple(fields), self._span(meta))

    def field_decl(self, meta: Meta, name: Token, type_: ast.TypeRef, *rest: object) -> ast.FieldDecl:
        constraints = tuple(r for r in rest if isinstance(r, ast.Constraint))
        doc = next((r for r in rest if isinstance(r, ast.String)), None)
        return ast.FieldDecl(self._name(name), type_, doc, constraints, span=self._span(meta))

    def range_constraint(self, meta: Meta, range_: ast.Range) -> ast.Constraint:
        return ast.Constraint("in", range_, None, self._span(meta))

    def length_constraint(self, meta: Meta, range_: ast.Range) -> ast.Constraint:
        return ast.Constraint("len", range_, None, self._span(meta))

    def pattern_constraint(self, meta: Meta, pattern: ast.String) -> ast.Constraint:
        return ast.Constraint("matches", None, pattern, self._span(meta))

    def range(self, meta: Meta, *parts: object) -> ast.Range:
        # `parts` holds the ends that are written, and the '..' token between them
        dots = next(i for i, p in enumerate(parts) if isinstance(p, Token))
        low = parts[0] if dots == 1 else None
        high = parts[dots + 1] if dots + 1 < len(parts) else None
        return ast.Range(low, high, self._span(meta))  # type: ignore[arg-type]

    def range_end(self, meta: Meta, number: ast.Number) -> ast.RangeEnd:
        return ast.RangeEnd(number.value, self._span(meta))

    def negative_range_end(self, meta: Meta, number: ast.Number) -> ast.RangeEnd:
        return ast.RangeEnd(-number.value, self._span(meta))

    def named_type(self, meta: Meta, name: Token) -> ast.NamedType:
        return ast.NamedType(self._name(name), self._span(meta))

    def list_type(self, meta: Meta, item: ast.TypeRef) -> ast.ListType:
        return ast.ListType(item, self._span(meta))

    def optional_type(self, meta: Meta, inner: ast.TypeRef) -> ast.OptionalType:
        return ast.OptionalType(inner, self._span(meta))

    def enum_type(self, meta: Meta, *values: ast.String) -> ast.EnumType:
        return ast.EnumType(tuple(values), self._span(meta))

    # tools and agents
    def tool_decl(self, meta: Meta, name: ast.ToolName, *rest: object) -> ast.ToolDecl:
        path = next((r for r in rest if isinstance(r, ast.String)), None)
        items: tuple[object, ...] = next((r for r in rest if isinstance(r, tuple)), ())
        return ast.ToolDecl(
            name, path,
            options=tuple(i for i in items if isinstance(i, ast.ToolOption)),
            secrets=tuple(i for i in items if isinstance(i, ast.ToolSecrets)),
            headers=tuple(i for i in items if isinstance(i, ast.ToolHeaders)),
            query=tuple(i for i in items if isinstance(i, ast.ToolQuery)),
            span=self._span(meta),
        )

    def tool_name(self, meta: Meta, *parts: Token) -> ast.ToolName:
        return ast.ToolName(tuple(str(p) for p in parts), self._span(meta))

    def tool_options(self, meta: Meta, *options: ast.ToolOption) -> tuple[ast.ToolOption, ...]:
        return tuple(options)

    def tool_option(self, meta: Meta, name: Token, value: ast.Value) -> ast.ToolOption:
        return ast.ToolOption(self._name(name), value, self._span(meta))

    def tool_secrets(self, meta: Meta, *names: Token) -> ast.ToolSecrets:
        return ast.ToolSecrets(tuple(self._name(n) for n in names if n is not None), self._span(meta))

    def tool_headers(self, meta: Meta, *entries: ast.TextEntry) -> ast.ToolHeaders:
        return ast.ToolHeaders(tuple(entries), self._span(meta))

    def tool_query(self, meta: Meta, *entries: ast.TextEntry) -> ast.ToolQuery:
        return ast.ToolQuery(tuple(entries), self._span(meta))

    def text_entry(self, meta: Meta, name: Token | ast.String, value: ast.String) -> ast.TextEntry:
        key = name if isinstance(name, ast.String) else ast.String(str(name), False, self._tok_span(name))
        return ast.TextEntry(key, value, self._span(meta))

    def agent_decl(self, meta: Meta, name: Token, *items: ast.AgentItem) -> ast.AgentDecl:
        return ast.AgentDecl(self._name(name), tuple(items), self._span(meta))

    def prompt_setting(self, meta: Meta, text: ast.String) -> ast.PromptSetting:
        return ast.PromptSetting(text, self._span(meta))

    def tools_setting(self, meta: Meta, *tools: ast.ToolName) -> ast.ToolsSetting:
        return ast.ToolsSetting(tuple(t for t in tools if t is not None), self._span(meta))

    def memory_setting(self, meta: Meta, policy: Token, count: Token | None = None) -> ast.MemorySetting:
        number = self.number(None, count) if count is not None else None
        return ast.MemorySetting(self._name(policy), number, self._span(meta))

    def fallbacks_setting(self, meta: Meta, *models: ast.String) -> ast.FallbacksSetting:
        return ast.FallbacksSetting(tuple(m for m in models if m is not None), self._span(meta))

    # states
    def state_decl(self, meta: Meta, *parts: object) -> ast.StateDecl:
        modifiers = [p for p in parts if isinstance(p, Token) and p.type in ("START", "FINAL", "BRANCH")]
        name = next(p for p in parts if isinstance(p, Token) and p.type == "NAME")
        items = tuple(p for p in parts if not isinstance(p, Token))
        has_body = self.source.text[name.end_pos : meta.end_pos].strip() != ""  # type: ignore[attr-defined]
        return ast.StateDecl(
            self._name(name),
            start=any(m.type == "START" for m in modifiers),
            final=any(m.type == "FINAL" for m in modifiers),
            items=items,  # type: ignore[arg-type]
            has_body=has_body,
            span=self._span(meta),
            branch=any(m.type == "BRANCH" for m in modifiers),
        )

    def state_modifier(self, meta: Meta, tok: Token) -> Token:
        return tok

    def agent_ref(self, meta: Meta, name: Token) -> ast.AgentRef:
        return ast.AgentRef(self._name(name), self._span(meta))

    def instruction(self, meta: Meta, text: ast.String) -> ast.Instruction:
        return ast.Instruction(text, self._span(meta))

    def output_decl(self, meta: Meta, type_: ast.TypeRef | ast.VariantType) -> ast.OutputDecl:
        return ast.OutputDecl(type_, self._span(meta))

    def variant_type(self, meta: Meta, *names: Token) -> ast.VariantType:
        return ast.VariantType(tuple(self._name(n) for n in names), self._span(meta))

    def tell(self, meta: Meta, *names: Token) -> ast.Tell:
        return ast.Tell(tuple(self._name(n) for n in names if n is not None), self._span(meta))

    def visits(self, meta: Meta, count: Token) -> ast.Visits:
        return ast.Visits(self._bound_count(count), self._span(meta))

    def retries(self, meta: Meta, count: Token) -> ast.Retries:
        return ast.Retries(self.number(None, count), self._span(meta))

    def call(self, meta: Meta, tool: ast.ToolName, *args: ast.CallArg) -> ast.ToolCall:
        return ast.ToolCall(tool, tuple(a for a in args if a is not None), self._span(meta))

    def call_arg(self, meta: Meta, name: Token, value: ast.Expr) -> ast.CallArg:
        return ast.CallArg(self._name(name), value, self._span(meta))

    def result(self, meta: Meta, text: ast.String) -> ast.Result:
        return ast.Result(text, self._span(meta))

    def ask(self, meta: Meta, text: ast.String) -> ast.Ask:
        return ast.Ask(text, self._span(meta))

    def fail(self, meta: Meta, text: ast.String) -> ast.Fail:
        return ast.Fail(text, self._span(meta))

    def parallel(self, meta: Meta, *names: Token) -> ast.Parallel:
        return ast.Parallel(tuple(self._name(n) for n in names if n is not None), self._span(meta))

    def join(self, meta: Meta, rule: Token, *rest: object) -> ast.Join:
        count = next((self.number(None, p) for p in rest if isinstance(p, Token)), None)
        guard = next((p for p in rest if p is not None and not isinstance(p, Token)), None)
        return ast.Join(self._name(rule), count, guard, self._span(meta))  # type: ignore[arg-type]

    def for_each(self, meta: Meta, *parts: object) -> ast.ForEach:
        names = [p for p in parts if isinstance(p, Token)]
        items = next(p for p in parts if p is not None and not isinstance(p, (Token, tuple)))
        options: dict[str, Any] = dict(p for p in parts if isinstance(p, tuple))
        index, item = (names[0], names[1]) if len(names) == 2 else (None, names[0])
        return ast.ForEach(self._name(index) if index is not None else None, self._name(item), items,  # type: ignore[arg-type]
                           options.get("max"), options.get("concurrency"), self._span(meta))

    def each_max(self, meta: Meta, count: Token) -> tuple[str, ast.Number | ast.Name]:
        return "max", self._bound_count(count)

    def each_concurrency(self, meta: Meta, count: Token) -> tuple[str, ast.Number]:
        return "concurrency", self.number(None, count)

    def _update(self, meta: Meta, reducer: str, var: Token, value: ast.Expr) -> ast.Update:
        return ast.Update(reducer, self._name(var), value, self._span(meta))

    def set_update(self, meta: Meta, var: Token, value: ast.Expr) -> ast.Update:
        return self._update(meta, "set", var, value)

    def append_update(self, meta: Meta, var: Token, value: ast.Expr) -> ast.Update:
        return self._update(meta, "append", var, value)

    def extend_update(self, meta: Meta, var: Token, value: ast.Expr) -> ast.Update:
        return self._update(meta, "extend", var, value)

    def merge_update(self, meta: Meta, var: Token, value: ast.Expr) -> ast.Update:
        return self._update(meta, "merge", var, value)

    def ask_before(self, meta: Meta, *tools: ast.ToolName | None) -> ast.AskBefore:
        return ast.AskBefore(tuple(t for t in tools if t is not None), self._span(meta))

    def tool_rounds(self, meta: Meta, count: Token) -> ast.ToolRounds:
        return ast.ToolRounds(self.number(None, count), self._span(meta))

    def bound(self, meta: Meta, count: Token, per_visit: Span | None = None) -> _Bound:
        return self._bound_count(count), per_visit

    def _bound_count(self, count: Token) -> ast.Number | ast.Name:
        """A bound's count: a number, or the name of the input that gives it (`max rounds`)."""
        return self._name(count) if count.type == "NAME" else self.number(None, count)

    def per_visit(self, meta: Meta) -> Span:
        return self._span(meta)

    def _edge(self, meta: Meta, kind: str, target: Token | None, guard: ast.Expr | None,
              condition: ast.String | None, bound: _Bound | None) -> ast.Transition:
        limit, per_visit = bound if bound is not None else (None, None)
        return ast.Transition(kind, self._name(target) if target is not None else None, guard, condition, limit,
                              self._span(meta), per_visit=per_visit)

    def when_transition(self, meta: Meta, cond: ast.Expr, target: Token,
                        bound: _Bound | None = None) -> ast.Transition:
        if isinstance(cond, ast.Literal) and isinstance(cond.value, str):
            return self._edge(meta, "condition", target, None, ast.String(cond.value, False, cond.span), bound)
        return self._edge(meta, "guard", target, cond, None, bound)

    def always_transition(self, meta: Meta, target: Token,
                          bound: _Bound | None = None) -> ast.Transition:
        return self._edge(meta, "always", target, None, None, bound)

    def otherwise_transition(self, meta: Meta, target: Token,
                             bound: _Bound | None = None) -> ast.Transition:
        return self._edge(meta, "otherwise", target, None, None, bound)

    def stay_transition(self, meta: Meta, bound: _Bound | None = None) -> ast.Transition:
        return self._edge(meta, "stay", None, None, None, bound)

    def timeout_transition(self, meta: Meta, duration: Token, target: Token,
                           bound: _Bound | None = None) -> ast.Transition:
        text = str(duration)
        if len(text) > MAX_NUMBER_DIGITS:
            raise self.token_failure("DURATION", text, duration.start_pos or 0)  # type: ignore[misc]
        seconds = float(text[:-1]) * _DURATION_UNITS[text[-1]]
        edge = self._edge(meta, "timeout", target, None, None, bound)
        return dataclasses.replace(edge, after=ast.Duration(text, seconds, self._tok_span(duration)))

    # expressions
    def _binary(self, meta: Meta, op: str, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return ast.BinaryOp(op, left, right, self._span(meta))

    def or_op(self, meta: Meta, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, "or", left, right)

    def and_op(self, meta: Meta, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, "and", left, right)

    def not_op(self, meta: Meta, operand: ast.Expr) -> ast.UnaryOp:
        return ast.UnaryOp("not", operand, self._span(meta))

    def compare(self, meta: Meta, left: ast.Expr, op: Token, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, str(op), left, right)

    def in_op(self, meta: Meta, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, "in", left, right)

    def not_in_op(self, meta: Meta, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, "not in", left, right)

    def arith(self, meta: Meta, left: ast.Expr, op: Token, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, str(op), left, right)

    def neg(self, meta: Meta, operand: ast.Expr) -> ast.UnaryOp:
        return ast.UnaryOp("-", operand, self._span(meta))

    def attribute(self, meta: Meta, value: ast.Expr, name: Token) -> ast.Attribute:
        return ast.Attribute(value, self._name(name), self._span(meta))

    def index(self, meta: Meta, value: ast.Expr, idx: ast.Expr) -> ast.Index:
        return ast.Index(value, idx, self._span(meta))

    def quantifier(self, meta: Meta, func: Token, element: ast.Expr, var: Token, items: ast.Expr) -> ast.Quantifier:
        return ast.Quantifier(self._name(func), element, self._name(var), items, self._span(meta))

    def conditional(self, meta: Meta, then: ast.Expr, test: ast.Expr, orelse: ast.Expr) -> ast.Conditional:
        return ast.Conditional(then, test, orelse, self._span(meta))

    def is_op(self, meta: Meta, value: ast.Expr, type_: Token) -> ast.IsVariant:
        return ast.IsVariant(value, self._name(type_), False, self._span(meta))

    def is_not_op(self, meta: Meta, value: ast.Expr, type_: Token) -> ast.IsVariant:
        return ast.IsVariant(value, self._name(type_), True, self._span(meta))

    def call_expr(self, meta: Meta, func: Token, *args: ast.Expr) -> ast.Call:
        return ast.Call(self._name(func), tuple(a for a in args if a is not None), self._span(meta))

    def name(self, meta: Meta, tok: Token) -> ast.NameExpr:
        return ast.NameExpr(sys.intern(str(tok)), self._tok_span(tok))

    def literal(self, meta: Meta, lit: ast.String | ast.Number) -> ast.Literal:
        return ast.Literal(lit.value, lit.span)

    def true_lit(self, meta: Meta) -> ast.Literal:
        return ast.Literal(True, self._span(meta))

    def false_lit(self, meta: Meta) -> ast.Literal:
        return ast.Literal(False, self._span(meta))

    def none_lit(self, meta: Meta) -> ast.Literal:
        return ast.Literal(None, self._span(meta))

    def list_expr(self, meta: Meta, *items: ast.Expr) -> ast.ListExpr:
        return ast.ListExpr(tuple(i for i in items if i is not None), self._span(meta))

    # values
    def value_literal(self, meta: Meta, lit: ast.String | ast.Number) -> ast.Value:
        kind = "str" if isinstance(lit, ast.String) else ("int" if isinstance(lit.value, int) else "float")
        return ast.Value(kind, lit.value, self._span(meta))

    def value_negative(self, meta: Meta, lit: ast.Number) -> ast.Value:
        kind = "int" if isinstance(lit.value, int) else "float"
        return ast.Value(kind, -lit.value, self._span(meta))

    def value_true(self, meta: Meta) -> ast.Value:
        return ast.Value("bool", True, self._span(meta))

    def value_false(self, meta: Meta) -> ast.Value:
        return ast.Value("bool", False, self._span(meta))

    def value_none(self, meta: Meta) -> ast.Value:
        return ast.Value("none", None, self._span(meta))

    def value_list(self, meta: Meta, *items: ast.Value) -> ast.Value:
        return ast.Value("list", tuple(i for i in items if i is not None), self._span(meta))

    def object(self, meta: Meta, *entries: ast.ObjectEntry) -> ast.Value:
        return ast.Value("object", tuple(entries), self._span(meta))

    def object_entry(self, meta: Meta, key: Token, value: ast.Value) -> ast.ObjectEntry:
        return ast.ObjectEntry(self._name(key), value, self._span(meta))

    # tests
    def test_decl(self, meta: Meta, name: ast.String, *items: ast.TestItem) -> ast.TestDecl:
        return ast.TestDecl(name, tuple(items), self._span(meta))

    def test_input(self, meta: Meta, values: ast.Value) -> ast.TestInput:
        return ast.TestInput(values, self._span(meta))

    def reply(self, meta: Meta, state: Token, *rest: Token | ast.Value) -> ast.Reply:
        value = rest[-1]
        assert isinstance(value, ast.Value)
        variant = self._name(rest[0]) if len(rest) == 2 and isinstance(rest[0], Token) else None
        return ast.Reply(self._name(state), value, variant, self._span(meta))

    def reply_calls(self, meta: Meta, state: Token, *calls: ast.ScriptedCall) -> ast.ReplyCalls:
        return ast.ReplyCalls(self._name(state), tuple(calls), self._span(meta))

    def scripted_call(self, meta: Meta, tool: ast.ToolName, *args: ast.ScriptedArg | None) -> ast.ScriptedCall:
        return ast.ScriptedCall(tool, tuple(a for a in args if a is not None), self._span(meta))

    def scripted_arg(self, meta: Meta, name: Token, value: ast.Value) -> ast.ScriptedArg:
        return ast.ScriptedArg(self._name(name), value, self._span(meta))

    def verdict(self, meta: Meta, state: Token, cond: ast.String | Token) -> ast.Verdict:
        text = cond if isinstance(cond, ast.String) else None
        return ast.Verdict(self._name(state), text, self._span(meta))

    def test_timeout(self, meta: Meta, state: Token) -> ast.TestTimeout:
        return ast.TestTimeout(self._name(state), self._span(meta))

    def expect_path(self, meta: Meta, *states: Token) -> ast.ExpectPath:
        return ast.ExpectPath(tuple(self._name(s) for s in states if s is not None), self._span(meta))

    def expect_final(self, meta: Meta, state: Token) -> ast.ExpectFinal:
        return ast.ExpectFinal(self._name(state), self._span(meta))

    def expect_result(self, meta: Meta, value: ast.Value) -> ast.ExpectResult:
        return ast.ExpectResult(value, self._span(meta))

    def expect_failure(self, meta: Meta, kind: Token) -> ast.ExpectFailure:
        return ast.ExpectFailure(self._name(kind), self._span(meta))

    def visit(self, meta: Meta, count: Token) -> ast.Number:
        return self.number(None, count)

    def expect_output(self, meta: Meta, state: Token, *rest: Any) -> ast.ExpectOutput:
        visit = next((r for r in rest if isinstance(r, ast.Number)), None)
        contains = any(isinstance(r, Token) and r.type == "CONTAINS" for r in rest)
        last = rest[-1]
        if isinstance(last, ast.String):  # `contains "text"`
            value = ast.Value("str", last.value, last.span)
        else:
            assert isinstance(last, ast.Value)
            value = last
        return ast.ExpectOutput(self._name(state), visit, contains, value, self._span(meta))

    def expect_instruction(self, meta: Meta, state: Token, *rest: Any) -> ast.ExpectInstruction:
        visit = next((r for r in rest if isinstance(r, ast.Number)), None)
        contains = any(isinstance(r, Token) and r.type == "CONTAINS" for r in rest)
        text = rest[-1]
        assert isinstance(text, ast.String)
        return ast.ExpectInstruction(self._name(state), visit, contains, text, self._span(meta))

    def expect_var(self, meta: Meta, name: Token, value: ast.Value) -> ast.ExpectVar:
        return ast.ExpectVar(self._name(name), value, self._span(meta))

    def _approval(self, meta: Meta, decision: str, state: Token, rest: tuple[Any, ...]) -> ast.Approval:
        tool = next((r for r in rest if isinstance(r, ast.ToolName)), None)
        reason = next((r for r in rest if isinstance(r, ast.String)), None)
        arguments = next((r for r in rest if isinstance(r, ast.Value)), None)
        return ast.Approval(decision, self._name(state), tool, reason, arguments, self._span(meta))

    def approve_step(self, meta: Meta, state: Token, *rest: Any) -> ast.Approval:
        return self._approval(meta, "approve", state, rest)

    def reject_step(self, meta: Meta, state: Token, *rest: Any) -> ast.Approval:
        return self._approval(meta, "reject", state, rest)

    def edit_step(self, meta: Meta, state: Token, *rest: Any) -> ast.Approval:
        return self._approval(meta, "edit", state, rest)

    def allow_unused(self, meta: Meta) -> ast.AllowUnused:
        return ast.AllowUnused(self._span(meta))


def _bad_escape(e: BadEscape, token_start: int) -> BuildFailure:
    start = token_start + e.offset
    return BuildFailure("SW1006", f"invalid escape sequence '{e.text}'", start, start + len(e.text),
                        help='use \\\\ for a backslash, or a """triple-quoted""" string, which takes backslashes '
                        "literally")
