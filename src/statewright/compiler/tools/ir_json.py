"""JSON views of the syntax tree and of the IR, and the JSON Schema the IR view follows.

Both views are deterministic: lists keep source order, objects are built in a fixed key order, and spans
appear as `{"file", "start": {line, column, offset}, "end": ...}`. Guard expressions are nested objects
tagged by `kind`. docs/ir.md documents the IR shape and carries a copy of IR_JSON_SCHEMA (a test keeps the
two equal).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...diagnostics import Span
from ...grammar import ast
from .. import ir

IR_JSON_VERSION = 3


def span_to_json(span: Span | None) -> dict[str, Any] | None:
    if span is None:
        return None
    return {"file": span.path, "start": span.start_pos.to_json(), "end": span.end_pos.to_json()}


# ---- the syntax tree -----------------------------------------------------------------------------


def ast_to_json(machine: ast.Machine) -> dict[str, Any]:
    """The syntax tree as nested objects: `{"node": CLASS, <fields>..., "span": SPAN}`."""
    result = _node_to_json(machine)
    assert isinstance(result, dict)
    return result


def _node_to_json(node: object) -> Any:
    if isinstance(node, tuple):
        return [_node_to_json(item) for item in node]
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return node
    out: dict[str, Any] = {"node": type(node).__name__}
    for f in dataclasses.fields(node):
        if f.name != "span":
            out[f.name] = _node_to_json(getattr(node, f.name))
    out["span"] = span_to_json(getattr(node, "span", None))
    return out


# ---- the IR --------------------------------------------------------------------------------------


def type_to_json(t: ir.Type) -> dict[str, Any]:
    if isinstance(t, ir.Prim):
        return {"kind": "prim", "name": t.name}
    if isinstance(t, ir.ListOf):
        return {"kind": "list", "item": type_to_json(t.item)}
    if isinstance(t, ir.Optional_):
        return {"kind": "optional", "inner": type_to_json(t.inner)}
    if isinstance(t, ir.Enum):
        return {"kind": "enum", "values": list(t.values)}
    if isinstance(t, ir.Variant):
        return {"kind": "variant", "options": list(t.options)}
    return {"kind": "named", "name": t.name}


def constraints_to_json(c: ir.Constraints) -> dict[str, Any]:
    return {"minimum": c.minimum, "maximum": c.maximum, "min_length": c.min_length, "max_length": c.max_length,
            "pattern": c.pattern}


def expr_to_json(e: ast.Expr) -> dict[str, Any]:
    span = span_to_json(e.span)
    if isinstance(e, ast.NameExpr):
        return {"kind": "name", "name": e.name, "span": span}
    if isinstance(e, ast.Literal):
        return {"kind": "literal", "value": e.value, "span": span}
    if isinstance(e, ast.ListExpr):
        return {"kind": "list", "items": [expr_to_json(i) for i in e.items], "span": span}
    if isinstance(e, ast.Attribute):
        return {"kind": "attribute", "value": expr_to_json(e.value), "attr": e.attr.value, "span": span}
    if isinstance(e, ast.Index):
        return {"kind": "index", "value": expr_to_json(e.value), "index": expr_to_json(e.index), "span": span}
    if isinstance(e, ast.Call):
        return {"kind": "call", "func": e.func.value, "args": [expr_to_json(a) for a in e.args], "span": span}
    if isinstance(e, ast.Quantifier):
        return {"kind": "quantifier", "func": e.func.value, "element": expr_to_json(e.element), "var": e.var.value,
                "items": expr_to_json(e.items), "span": span}
    if isinstance(e, ast.IsVariant):
        return {"kind": "is", "value": expr_to_json(e.value), "type": e.type.value, "negated": e.negated,
                "span": span}
    if isinstance(e, ast.Conditional):
        return {"kind": "conditional", "then": expr_to_json(e.then), "test": expr_to_json(e.test),
                "else": expr_to_json(e.orelse), "span": span}
    if isinstance(e, ast.UnaryOp):
        return {"kind": "unary", "op": e.op, "operand": expr_to_json(e.operand), "span": span}
    return {"kind": "binary", "op": e.op, "left": expr_to_json(e.left), "right": expr_to_json(e.right),
            "span": span}


def _transition(t: ir.Transition) -> dict[str, Any]:
    return {
        "kind": t.kind,
        "target": t.target,
        "guard": expr_to_json(t.guard) if t.guard is not None else None,
        "condition": t.condition,
        "max": t.max,
        "per_visit": t.per_visit,
        "seconds": t.seconds,
        "origin": span_to_json(t.origin),
    }


def _call(call: ir.ToolCall | None) -> dict[str, Any] | None:
    if call is None:
        return None
    return {
        "tool": call.tool,
        "args": [{"name": a.name, "value": expr_to_json(a.value), "origin": span_to_json(a.origin)}
                 for a in call.args],
        "origin": span_to_json(call.origin),
    }


def _run(run: ir.Run | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "machine": run.machine,
        "args": [{"name": a.name, "value": expr_to_json(a.value), "origin": span_to_json(a.origin)}
                 for a in run.args],
        "origin": span_to_json(run.origin),
    }


def _parallel(p: ir.Parallel | None) -> dict[str, Any] | None:
    if p is None:
        return None
    join = p.join
    return {
        "branches": list(p.branches),
        "join": {"rule": join.rule, "count": join.count,
                 "guard": expr_to_json(join.guard) if join.guard is not None else None,
                 "origin": span_to_json(join.origin)},
        "origin": span_to_json(p.origin),
    }


def _each(e: ir.Each | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {"index": e.index, "item": e.item, "items": expr_to_json(e.items), "max": e.max,
            "concurrency": e.concurrency, "origin": span_to_json(e.origin)}


def _state(s: ir.State) -> dict[str, Any]:
    return {
        "name": s.name,
        "kind": s.kind,
        "agent": s.agent,
        "instruction": s.instruction,
        "output": type_to_json(s.output) if s.output is not None else None,
        "tell": list(s.tell),
        "visits": s.visits,
        "retries": s.retries,
        "call": _call(s.call),
        "result": s.result,
        "transitions": [_transition(t) for t in s.transitions],
        "template_reads": [{"state": r.state, "template": r.template, "origin": span_to_json(r.origin)}
                           for r in s.template_reads],
        "origin": span_to_json(s.origin),
        "shares": s.shares,
        "final": s.final,
        "model": s.model,
        "fail": s.fail,
        "parallel": _parallel(s.parallel),
        "each": _each(s.each),
        "branch": s.branch,
        "run": _run(s.run),
        "updates": [{"reducer": u.reducer, "var": u.var, "value": expr_to_json(u.value),
                     "origin": span_to_json(u.origin)} for u in s.updates],
        "ask_before": list(s.ask_before),
        "tool_rounds": s.tool_rounds,
    }


def _test(t: ir.Test) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for step in t.steps:
        if isinstance(step, ir.Reply):
            steps.append({"kind": "reply", "state": step.state, "value": step.value, "variant": step.variant,
                          "origin": span_to_json(step.origin)})
        elif isinstance(step, ir.ToolCalls):
            steps.append({"kind": "calls", "state": step.state,
                          "calls": [{"tool": tool, "arguments": dict(args)} for tool, args in step.calls],
                          "origin": span_to_json(step.origin)})
        elif isinstance(step, ir.Timeout):
            steps.append({"kind": "timeout", "state": step.state, "origin": span_to_json(step.origin)})
        elif isinstance(step, ir.Approval):
            steps.append({"kind": "approval", "state": step.state, "decision": step.decision, "tool": step.tool,
                          "reason": step.reason,
                          "arguments": dict(step.arguments) if step.arguments is not None else None,
                          "origin": span_to_json(step.origin)})
        else:
            steps.append({"kind": "verdict", "state": step.state, "condition": step.condition,
                          "origin": span_to_json(step.origin)})
    return {
        "name": t.name,
        "inputs": dict(t.inputs),
        "steps": steps,
        "expect_path": list(t.expect_path) if t.expect_path is not None else None,
        "expect_final": t.expect_final,
        "expect_result": t.expect_result,
        "has_expect_result": t.has_expect_result,
        "expect_failure": t.expect_failure,
        "expectations": [{"kind": e.kind, "state": e.state, "visit": e.visit, "contains": e.contains,
                          "value": e.value, "origin": span_to_json(e.origin)} for e in t.expectations],
        "allow_unused": t.allow_unused,
        "origin": span_to_json(t.origin),
        "expect_vars": [{"name": e.name, "value": e.value, "origin": span_to_json(e.origin)} for e in t.expect_vars],
    }


def ir_to_json(machine: ir.Machine) -> dict[str, Any]:
    """The IR as plain JSON data, in the shape IR_JSON_SCHEMA describes.

    The machines it runs, directly or through others, are listed once each under `called` (every machine
    after the machines it runs), and a machine names the ones it runs by their place there: a machine two
    callers run is written once, and a chain of calls is no deeper in the JSON than one call."""
    order = ir.iter_machines(machine)[:-1]  # the entry last: it is the document itself
    index = {id(m): i for i, m in enumerate(order)}
    return {"ir_version": IR_JSON_VERSION, **_machine_json(machine, index),
            "called": [_machine_json(m, index) for m in order]}


def _machine_json(machine: ir.Machine, index: dict[int, int]) -> dict[str, Any]:
    return {
        "name": machine.name,
        "description": machine.description,
        "inputs": [
            {"name": i.name, "type": type_to_json(i.type), "default": i.default, "has_default": i.has_default,
             "constraints": constraints_to_json(i.constraints), "origin": span_to_json(i.origin)}
            for i in machine.inputs
        ],
        "model": machine.model,
        "verifier_model": machine.verifier_model,
        "temperature": machine.temperature,
        "limits": {"steps": machine.limits.steps, "cost_usd": machine.limits.cost_usd,
                   "tokens": machine.limits.tokens, "seconds": machine.limits.seconds},
        "types": [
            {"name": t.name,
             "fields": [{"name": f.name, "type": type_to_json(f.type), "doc": f.doc,
                         "constraints": constraints_to_json(f.constraints), "origin": span_to_json(f.origin)}
                        for f in t.fields],
             "origin": span_to_json(t.origin)}
            for t in machine.types
        ],
        "tools": [
            {"name": t.name, "import_path": t.import_path, "options": dict(t.options), "secrets": list(t.secrets),
             "headers": [{"name": n, "value": v} for n, v in t.headers],
             "query": [{"name": n, "value": v} for n, v in t.query], "origin": span_to_json(t.origin)}
            for t in machine.tools
        ],
        "agents": [
            {"name": a.name, "prompt": a.prompt, "model": a.model, "temperature": a.temperature,
             "tools": list(a.tools), "memory": a.memory, "memory_count": a.memory_count,
             "fallbacks": list(a.fallbacks), "origin": span_to_json(a.origin)}
            for a in machine.agents
        ],
        "states": [_state(s) for s in machine.states],
        "start": machine.start,
        "tests": [_test(t) for t in machine.tests],
        "origin": span_to_json(machine.origin),
        "variables": [{"name": v.name, "type": type_to_json(v.type), "initial": v.initial,
                       "origin": span_to_json(v.origin)} for v in machine.variables],
        "returns": type_to_json(machine.returns) if machine.returns is not None else None,
        # the machines its states run: the name it runs each by, and its place in `called`
        "machines": [{"name": name, "called": index[id(callee)]} for name, callee in machine.machines],
    }


# ---- the schema ----------------------------------------------------------------------------------


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_REF = {name: {"$ref": f"#/$defs/{name}"} for name in ("span", "type", "expr", "value")}
_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_STRS = {"type": "array", "items": _STR}
_ORIGIN = _nullable(_REF["span"])
_CONSTRAINTS = {"$ref": "#/$defs/constraints"}

# a bound: a number, or the name of the int input a run reads it from
_BOUND: dict[str, Any] = {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string"}]}


_MACHINE_PROPERTIES: dict[str, Any] = {
    "name": _STR,
    "description": _STR,
    "inputs": {"type": "array", "items": _obj({
        "name": _STR, "type": _REF["type"], "default": _REF["value"], "has_default": {"type": "boolean"},
        "constraints": _CONSTRAINTS, "origin": _ORIGIN,
    })},
    "model": _STR,
    "verifier_model": _STR,
    "temperature": _nullable(_NUM),
    "limits": _obj({"steps": {"type": "integer", "minimum": 1}, "cost_usd": _nullable(_NUM),
                    "tokens": _nullable(_INT), "seconds": _nullable(_NUM)}),
    "types": {"type": "array", "items": _obj({
        "name": _STR,
        "fields": {"type": "array", "items": _obj({"name": _STR, "type": _REF["type"], "doc": _STR,
                                                   "constraints": _CONSTRAINTS, "origin": _ORIGIN})},
        "origin": _ORIGIN,
    })},
    "tools": {"type": "array", "items": _obj({
        "name": _STR, "import_path": _nullable(_STR), "options": {"type": "object"}, "secrets": _STRS,
        "headers": {"type": "array", "items": _obj({"name": _STR, "value": _STR})},
        "query": {"type": "array", "items": _obj({"name": _STR, "value": _STR})}, "origin": _ORIGIN,
    })},
    "agents": {"type": "array", "items": _obj({
        "name": _STR, "prompt": _STR, "model": _STR, "temperature": _nullable(_NUM), "tools": _STRS,
        "memory": {"enum": ["all", "none", "last"]}, "memory_count": _nullable(_INT), "fallbacks": _STRS,
        "origin": _ORIGIN,
    })},
    "states": {"type": "array", "items": {"$ref": "#/$defs/state"}},
    "start": _STR,
    "tests": {"type": "array", "items": {"$ref": "#/$defs/test"}},
    "origin": _ORIGIN,
    "returns": _nullable(_REF["type"]),
    "machines": {"type": "array", "items": _obj({"name": _STR, "called": {"type": "integer", "minimum": 0}})},
    "variables": {"type": "array", "items": _obj({
        "name": _STR, "type": _REF["type"], "initial": _REF["value"], "origin": _ORIGIN})},
}

IR_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://statewright.dev/schemas/ir.json",
    "title": "statewright IR",
    "description": "A checked machine: references bound, defaults filled, source spans kept.",
    **_obj({
        "ir_version": {"const": IR_JSON_VERSION},
        **_MACHINE_PROPERTIES,
        # every machine the machine runs, directly or through others, once each
        "called": {"type": "array", "items": {"$ref": "#/$defs/machine"}},
    }),
    "$defs": {
        "machine": _obj(_MACHINE_PROPERTIES),
        "position": _obj({"line": {"type": "integer", "minimum": 1},
                          "column": {"type": "integer", "minimum": 1},
                          "offset": {"type": "integer", "minimum": 0}}),
        "span": _obj({"file": _STR, "start": {"$ref": "#/$defs/position"},
                      "end": {"$ref": "#/$defs/position"}}),
        "value": {"description": "A literal value: string, number, boolean, null, array or object of "
                                 "values."},
        "type": {"oneOf": [
            _obj({"kind": {"const": "prim"},
                  "name": {"enum": ["str", "int", "float", "bool", "none", "any"]}}),
            _obj({"kind": {"const": "list"}, "item": _REF["type"]}),
            _obj({"kind": {"const": "optional"}, "inner": _REF["type"]}),
            _obj({"kind": {"const": "enum"}, "values": _STRS}),
            _obj({"kind": {"const": "named"}, "name": _STR}),
            _obj({"kind": {"const": "variant"}, "options": {"type": "array", "items": _STR, "minItems": 2}}),
        ]},
        "constraints": _obj({
            "minimum": _nullable(_NUM), "maximum": _nullable(_NUM),
            "min_length": _nullable({"type": "integer", "minimum": 0}),
            "max_length": _nullable({"type": "integer", "minimum": 0}), "pattern": _nullable(_STR),
        }),
        "expr": {"oneOf": [
            _obj({"kind": {"const": "name"}, "name": _STR, "span": _ORIGIN}),
            _obj({"kind": {"const": "literal"}, "value": {"type": ["string", "number", "boolean", "null"]},
                  "span": _ORIGIN}),
            _obj({"kind": {"const": "list"}, "items": {"type": "array", "items": _REF["expr"]},
                  "span": _ORIGIN}),
            _obj({"kind": {"const": "attribute"}, "value": _REF["expr"], "attr": _STR, "span": _ORIGIN}),
            _obj({"kind": {"const": "index"}, "value": _REF["expr"], "index": _REF["expr"], "span": _ORIGIN}),
            _obj({"kind": {"const": "call"}, "func": _STR, "args": {"type": "array", "items": _REF["expr"]},
                  "span": _ORIGIN}),
            _obj({"kind": {"const": "quantifier"}, "func": {"enum": ["all", "any", "count", "sum", "min", "max"]},
                  "element": _REF["expr"], "var": _STR, "items": _REF["expr"], "span": _ORIGIN}),
            _obj({"kind": {"const": "is"}, "value": _REF["expr"], "type": _STR, "negated": {"type": "boolean"},
                  "span": _ORIGIN}),
            _obj({"kind": {"const": "conditional"}, "then": _REF["expr"], "test": _REF["expr"],
                  "else": _REF["expr"], "span": _ORIGIN}),
            _obj({"kind": {"const": "unary"}, "op": {"enum": ["not", "-"]}, "operand": _REF["expr"],
                  "span": _ORIGIN}),
            _obj({"kind": {"const": "binary"},
                  "op": {"enum": ["and", "or", "==", "!=", "<", "<=", ">", ">=", "in", "not in",
                                  "+", "-", "*", "/", "%"]},
                  "left": _REF["expr"], "right": _REF["expr"], "span": _ORIGIN}),
        ]},
        "transition": _obj({
            "kind": {"enum": ["guard", "condition", "always", "otherwise", "stay", "timeout"]},
            "target": _STR, "guard": _nullable(_REF["expr"]), "condition": _nullable(_STR),
            "max": _nullable(_BOUND), "origin": _ORIGIN,
            "per_visit": {"type": "boolean"}, "seconds": _nullable({"type": "number", "exclusiveMinimum": 0}),
        }),
        "call": _obj({
            "tool": _STR,
            "args": {"type": "array",
                     "items": _obj({"name": _STR, "value": _REF["expr"], "origin": _ORIGIN})},
            "origin": _ORIGIN,
        }),
        "parallel": _obj({
            "branches": {"type": "array", "items": _STR, "minItems": 2},
            "join": _obj({"rule": {"enum": ["all", "first"]}, "count": _nullable({"type": "integer", "minimum": 1}),
                          "guard": _nullable(_REF["expr"]), "origin": _ORIGIN}),
            "origin": _ORIGIN,
        }),
        "run": _obj({
            "machine": _STR,
            "args": {"type": "array",
                     "items": _obj({"name": _STR, "value": _REF["expr"], "origin": _ORIGIN})},
            "origin": _ORIGIN,
        }),
        "each": _obj({
            "index": _nullable(_STR), "item": _STR, "items": _REF["expr"], "max": _BOUND,
            "concurrency": {"type": "integer", "minimum": 1}, "origin": _ORIGIN,
        }),
        "state": _obj({
            "name": _STR, "kind": {"enum": ["agent", "action", "call", "human", "parallel", "final"]},
            "agent": _nullable(_STR),
            "instruction": _nullable(_STR), "output": _nullable(_REF["type"]), "tell": _STRS,
            "visits": _nullable(_BOUND),
            "retries": {"type": "integer", "minimum": 0},
            "call": _nullable({"$ref": "#/$defs/call"}), "result": _nullable(_STR),
            "transitions": {"type": "array", "items": {"$ref": "#/$defs/transition"}},
            "template_reads": {"type": "array", "items": _obj({
                "state": _STR, "template": {"enum": ["instruction", "result", "fail"]}, "origin": _ORIGIN})},
            "origin": _ORIGIN, "shares": _nullable(_STR), "final": {"type": "boolean"},
            "model": _nullable(_STR), "fail": _nullable(_STR),
            "parallel": _nullable({"$ref": "#/$defs/parallel"}), "each": _nullable({"$ref": "#/$defs/each"}),
            "branch": _nullable(_STR), "run": _nullable({"$ref": "#/$defs/run"}),
            "updates": {"type": "array", "items": _obj({
                "reducer": {"enum": ["set", "append", "extend", "merge"]}, "var": _STR, "value": _REF["expr"],
                "origin": _ORIGIN})},
            "ask_before": _STRS, "tool_rounds": _nullable({"type": "integer", "minimum": 1}),
        }),
        "test": _obj({
            "name": _STR,
            "inputs": {"type": "object"},
            "steps": {"type": "array", "items": {"oneOf": [
                _obj({"kind": {"const": "reply"}, "state": _STR, "value": _REF["value"],
                      "variant": _nullable(_STR), "origin": _ORIGIN}),
                _obj({"kind": {"const": "verdict"}, "state": _STR, "condition": _nullable(_STR),
                      "origin": _ORIGIN}),
                _obj({"kind": {"const": "calls"}, "state": _STR, "calls": {"type": "array", "items": _obj({
                    "tool": _STR, "arguments": {"type": "object"}})}, "origin": _ORIGIN}),
                _obj({"kind": {"const": "timeout"}, "state": _STR, "origin": _ORIGIN}),
                _obj({"kind": {"const": "approval"}, "state": _STR,
                      "decision": {"enum": ["approve", "reject", "edit"]}, "tool": _nullable(_STR),
                      "reason": _nullable(_STR), "arguments": _nullable({"type": "object"}), "origin": _ORIGIN}),
            ]}},
            "expect_path": _nullable(_STRS), "expect_final": _nullable(_STR), "expect_result": _REF["value"],
            "has_expect_result": {"type": "boolean"}, "expect_failure": _nullable(_STR),
            "expectations": {"type": "array", "items": _obj({
                "kind": {"enum": ["output", "instruction"]}, "state": _STR,
                "visit": {"type": "integer", "minimum": 1}, "contains": {"type": "boolean"}, "value": _REF["value"],
                "origin": _ORIGIN})},
            "allow_unused": {"type": "boolean"}, "origin": _ORIGIN,
            "expect_vars": {"type": "array", "items": _obj({"name": _STR, "value": _REF["value"], "origin": _ORIGIN})},
        }),
    },
}
