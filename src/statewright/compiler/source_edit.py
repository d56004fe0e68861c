"""Source-level rewrites: removing states and merging one state into another, as reviewable text edits.

The IR passes change what a runner executes; these change what a person reads. They edit the original
text by span (so everything else, comments included, stays as written) and leave layout to the formatter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..grammar import ast, parse_text


class SourceEditError(ValueError):
    """The requested rewrite is not possible or not allowed (the message says why)."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


def _apply(text: str, edits: Iterable[_Edit]) -> str:
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    out, pos = [], 0
    for e in ordered:
        if e.start < pos:
            raise SourceEditError("overlapping edits")  # a bug in the caller, not in the input
        out.append(text[pos : e.start])
        out.append(e.text)
        pos = e.end
    out.append(text[pos:])
    return "".join(out)


def _parse(text: str, path: str) -> ast.Machine:
    result = parse_text(text, path)
    if result.machine is None:
        raise SourceEditError("the source has syntax errors")
    return result.machine


def _states(machine: ast.Machine) -> dict[str, ast.StateDecl]:
    out: dict[str, ast.StateDecl] = {}
    for s in machine.of(ast.StateDecl):
        out.setdefault(s.name.value, s)
    return out


def _line_extent(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen [start, end) to whole lines when nothing else shares them."""
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip() == "":
        start = line_start
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if text[end:line_end].strip() == "":
        end = min(len(text), line_end + 1)
    return start, end


# ---- removing states -----------------------------------------------------------------------------


def remove_states(text: str, names: Iterable[str], path: str = "<source>") -> str:
    """Delete the declarations of `names` and the test lines that script them."""
    machine = _parse(text, path)
    doomed = set(names)
    edits = []
    for s in machine.of(ast.StateDecl):
        if s.name.value in doomed:
            edits.append(_Edit(*_line_extent(text, s.span.start, s.span.end), ""))
    for test in machine.of(ast.TestDecl):
        for item in test.items:
            if isinstance(item, (ast.Reply, ast.Verdict)) and item.state.value in doomed:
                edits.append(_Edit(*_line_extent(text, item.span.start, item.span.end), ""))
    return _apply(text, edits)


# ---- merging one state into another --------------------------------------------------------------


def merge_state_into(text: str, keep: str, drop: str, path: str = "<source>") -> str:
    """Merge state `drop` into state `keep`.

    Every reference to `drop` (transition targets, guards, templates, test blocks) is redirected to
    `keep`; `drop`'s transitions that `keep` lacks are added to `keep` before its catch-all transitions, so
    no distinct condition is lost; a `visits` bound of `drop` is kept when `keep` has none. A start state is
    never merged with a final one.
    """
    machine = _parse(text, path)
    states = _states(machine)
    if keep not in states or drop not in states:
        missing = keep if keep not in states else drop
        raise SourceEditError(f"no state named {missing!r}")
    if keep == drop:
        raise SourceEditError("a state cannot be merged with itself")
    k, d = states[keep], states[drop]
    if (k.start and d.final) or (d.start and k.final):
        raise SourceEditError("a start state is never merged with a final state")
    if k.final != d.final:
        raise SourceEditError("a final state can only be merged with another final state")
    if d.start:
        raise SourceEditError(f"{drop!r} is the start state: merge the other state into it instead")

    edits: list[_Edit] = []
    inside_drop = (d.span.start, d.span.end)

    def outside(span_start: int) -> bool:
        return not inside_drop[0] <= span_start < inside_drop[1]

    # 1. references to `drop` everywhere else
    for s in machine.of(ast.StateDecl):
        for item in s.items:
            if isinstance(item, ast.Transition):
                if item.target is not None and item.target.value == drop and outside(item.target.span.start):
                    edits.append(_Edit(item.target.span.start, item.target.span.end, keep))
                if item.guard is not None and outside(item.span.start):
                    edits.extend(_rename_in_expr(item.guard, drop, keep))
            elif isinstance(item, ast.ToolCall) and outside(item.span.start):
                for arg in item.args:
                    edits.extend(_rename_in_expr(arg.value, drop, keep))
            elif isinstance(item, (ast.Instruction, ast.Result)) and outside(item.span.start):
                edits.extend(_rename_in_template(text, item.text, drop, keep))
    for agent in machine.of(ast.AgentDecl):
        for item in agent.items:
            if isinstance(item, ast.PromptSetting):
                edits.extend(_rename_in_template(text, item.text, drop, keep))
    for test in machine.of(ast.TestDecl):
        for item in test.items:
            if isinstance(item, (ast.Reply, ast.Verdict, ast.ExpectFinal)):
                name = item.state
                if name.value == drop:
                    edits.append(_Edit(name.span.start, name.span.end, keep))
            elif isinstance(item, ast.ExpectPath):
                edits.extend(_Edit(n.span.start, n.span.end, keep) for n in item.states if n.value == drop)

    # 2. `drop`'s distinct transitions move into `keep`, before keep's catch-alls
    def key(t: ast.Transition, owner: str) -> tuple[object, ...]:
        target = owner if t.kind == "stay" else (t.target.value if t.target else None)
        target = keep if target == drop else target
        return (t.kind, t.guard, t.condition, t.max.value if t.max else None, target)

    keep_keys = {key(t, keep) for t in k.transitions}
    moved = []
    for t in d.transitions:
        if key(t, drop) in keep_keys:
            continue
        t_text = text[t.span.start : t.span.end]
        if t.target is not None:
            rel_s, rel_e = t.target.span.start - t.span.start, t.target.span.end - t.span.start
            target = keep if t.target.value == drop else t.target.value
            t_text = t_text[:rel_s] + target + t_text[rel_e:]
        moved.append(t_text)
    additions = list(moved)
    has_visits = any(isinstance(i, ast.Visits) for i in k.items)
    drop_visits = next((i for i in d.items if isinstance(i, ast.Visits)), None)
    if drop_visits is not None and not has_visits:
        additions.insert(0, f"visits {drop_visits.count.value}")
    if additions:
        catch_all = next((t for t in k.transitions if t.kind in ("always", "otherwise", "stay") and t.max is None),
                         None)
        if catch_all is not None:
            at = text.rfind("\n", 0, catch_all.span.start) + 1
            indent = text[at : catch_all.span.start]
            indent = indent if indent.strip() == "" else "        "
            insertion = "".join(f"{indent}{a}\n" for a in additions)
        elif k.has_body:
            at = text.rfind("}", k.span.start, k.span.end)
            insertion = "\n" + "".join(f"    {a}\n" for a in additions)
        else:
            at = k.name.span.end
            insertion = " {\n" + "".join(f"    {a}\n" for a in additions) + "}"
        edits.append(_Edit(at, at, insertion))

    # 3. `drop` goes away
    edits.append(_Edit(*_line_extent(text, d.span.start, d.span.end), ""))
    return _apply(text, edits)


def _rename_in_expr(expr: ast.Expr, old: str, new: str) -> list[_Edit]:
    edits = []
    stack: list[object] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.NameExpr) and node.name == old:
            edits.append(_Edit(node.span.start, node.span.end, new))
        elif isinstance(node, ast.Attribute):
            stack.append(node.value)
        elif isinstance(node, ast.Index):
            stack.extend((node.value, node.index))
        elif isinstance(node, ast.Call):
            stack.extend(node.args)
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)
        elif isinstance(node, ast.BinaryOp):
            stack.extend((node.left, node.right))
        elif isinstance(node, ast.ListExpr):
            stack.extend(node.items)
    return edits


def _rename_in_template(text: str, string: ast.String, old: str, new: str) -> list[_Edit]:
    """Rename `old.output` / `old.visits` inside a template string literal, in its source text."""
    raw = text[string.span.start : string.span.end]
    pattern = re.compile(r"(?<![A-Za-z0-9_.])" + re.escape(old) + r"(?=\s*\.\s*(output|visits)\b)")
    return [_Edit(string.span.start + m.start(), string.span.start + m.end(), new) for m in pattern.finditer(raw)]


# ---- the exact passes, applied to source ---------------------------------------------------------


def apply_exact_passes_to_source(text: str, path: str = "<source>") -> tuple[str, list[str]]:
    """Remove unreachable states and merge equivalent ones in the source text itself.

    Returns the new text and notes on what changed. When the rewritten source would not check cleanly the
    original is returned unchanged (with a note): a rewrite must never make a machine worse.
    """
    from .. import api
    from .passes.dead_states import reachable_states
    from .passes.merge_equivalent import equivalence_classes

    comp = api.check_text(text, path)
    if not comp.ok:
        return text, []
    notes = []
    machine = comp.ir
    dead = [s.name for s in machine.states if s.name not in reachable_states(machine)]  # type: ignore[union-attr]
    new = text
    if dead:
        new = remove_states(new, dead, path)
        notes.append("removed unreachable state(s): " + ", ".join(dead))
        comp = api.check_text(new, path)
        if not comp.ok:
            return text, ["left the source unchanged: removing unreachable states broke it"]
    for rep, members in equivalence_classes(comp.ir).items():  # type: ignore[arg-type]
        for member in members:
            if member != rep:
                new = merge_state_into(new, rep, member, path)
                notes.append(f"merged state {member!r} into the equivalent state {rep!r}")
    if new != text and not api.check_text(new, path).ok:
        return text, ["left the source unchanged: the rewritten machine did not check"]
    return new, notes
