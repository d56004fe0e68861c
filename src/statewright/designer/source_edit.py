"""Source-level rewrites: removing states and merging one state into another, as reviewable text edits.

The IR passes change what a runner executes; these change what a person reads. They edit the original
text by span (so everything else, comments included, stays as written) and leave layout to the formatter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..compiler import ir
from ..diagnostics import SourceFile
from ..grammar import ast


class SourceEditError(ValueError):
    """The requested rewrite is not possible or not allowed (the message says why)."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


def _apply(text: str, edits: Iterable[_Edit]) -> str:
    # stable sort: insertions at one offset keep the order they were made in
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
    from ..compiler.pipeline import compile_source

    parsed = compile_source(SourceFile(path, text), stop_after="parse")
    if parsed.ast is None or any(d.severity.value == "error" for d in parsed.diagnostics):
        raise SourceEditError("the source has syntax errors")
    return parsed.ast


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


def _delete(text: str, span: object) -> _Edit:
    return _Edit(*_line_extent(text, span.start, span.end), "")  # type: ignore[attr-defined]


def _indent_of(text: str, offset: int, default: str = "        ") -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    before = text[line_start:offset]
    return before if before.strip() == "" else default


def _checked_ir(text: str, path: str) -> ir.Machine | None:
    """The IR of source text through the compiler's front door (None when it has errors)."""
    from ..compiler.pipeline import compile_source

    return compile_source(SourceFile(path, text)).ir


# ---- references ----------------------------------------------------------------------------------


def _template_reads(text: str, path: str) -> list[ir.StateRead]:
    """Where the templates of `text` read states by name: the template check's record, from the IR."""
    machine = _checked_ir(text, path)
    if machine is None:
        raise SourceEditError("the source does not check; fix its errors before rewriting it")
    return [read for state in machine.states for read in state.template_reads if read.origin is not None]


def _redirect_references(text: str, machine: ast.Machine, renames: Mapping[str, str], path: str,
                         skip: Iterable[ast.StateDecl] = (),
                         skip_items: Iterable[object] = ()) -> list[_Edit]:
    """Edits that make every reference to a renamed state name the new one: transition targets, guards,
    tool-call arguments, templates and test blocks. Declarations in `skip` and the items in `skip_items`
    are left alone. (Agents' prompts read no states.)"""
    reads = _template_reads(text, path) if renames else []
    skipped = [(d.span.start, d.span.end) for d in skip]
    skipped_items = {id(i) for i in skip_items}

    def outside(offset: int) -> bool:
        return not any(a <= offset < b for a, b in skipped)

    edits: list[_Edit] = []
    for s in machine.of(ast.StateDecl):
        if not outside(s.span.start):
            continue
        for item in s.items:
            if id(item) in skipped_items:
                continue
            if isinstance(item, ast.Transition):
                if item.target is not None and item.target.value in renames:
                    target = item.target
                    edits.append(_Edit(target.span.start, target.span.end, renames[target.value]))
                if item.guard is not None:
                    edits.extend(_rename_in_expr(item.guard, renames))
            elif isinstance(item, ast.ToolCall):
                for arg in item.args:
                    edits.extend(_rename_in_expr(arg.value, renames))
            elif isinstance(item, (ast.Instruction, ast.Result)):
                edits.extend(_rename_in_template(item.text, reads, renames))
    for test in machine.of(ast.TestDecl):
        for item in test.items:
            if id(item) in skipped_items:
                continue
            if isinstance(item, (ast.Reply, ast.ReplyCalls, ast.Verdict, ast.ExpectFinal)):
                if item.state.value in renames:
                    edits.append(_Edit(item.state.span.start, item.state.span.end, renames[item.state.value]))
            elif isinstance(item, ast.ExpectPath):
                edits.extend(_Edit(n.span.start, n.span.end, renames[n.value]) for n in item.states
                             if n.value in renames)
    return edits


def _rename_in_expr(expr: ast.Expr, renames: Mapping[str, str], base: int = 0) -> list[_Edit]:
    """Edits renaming state names in a guard (`STATE.output`, `visits(STATE)`); offsets minus `base`."""
    return [
        _Edit(node.span.start - base, node.span.end - base, renames[node.name])
        for node in ast.iter_expr(expr)
        if isinstance(node, ast.NameExpr) and node.name in renames
    ]


def _rename_in_template(string: ast.String, reads: Iterable[ir.StateRead],
                        renames: Mapping[str, str]) -> list[_Edit]:
    """Rename the states a template literal reads, at the exact places the template check recorded."""
    span = string.span
    return [_Edit(r.origin.start, r.origin.end, renames[r.state]) for r in reads
            if r.state in renames and r.origin is not None and span.start <= r.origin.start < span.end]


# ---- removing states -----------------------------------------------------------------------------


def remove_states(text: str, names: Iterable[str], path: str = "<source>") -> str:
    """Delete the declarations of `names` and the test lines that script them."""
    machine = _parse(text, path)
    doomed = set(names)
    edits = []
    for s in machine.of(ast.StateDecl):
        if s.name.value in doomed:
            edits.append(_delete(text, s.span))
    for test in machine.of(ast.TestDecl):
        for item in test.items:
            if isinstance(item, (ast.Reply, ast.ReplyCalls, ast.Verdict)) and item.state.value in doomed:
                edits.append(_delete(text, item.span))
    return _apply(text, edits)


def _keep_declared(machine: ir.Machine) -> list[bool]:
    """The states a source rewrite must not delete in favour of an equivalent one.

    The IR pass merges any equivalent states, since every merged state keeps its name there. Deleting a
    declaration is another matter: the run would report the other state's name, so a state stays when
    - it is final (its name is the run's outcome);
    - it has `visits N` or an edge with `max N` (merged, the counters would be pooled);
    - its name is read anywhere (`STATE.output`, `visits(STATE)`, a template reading it);
    - it has listeners (`tell [...]`): they receive its output tagged with its name;
    - it is a parallel state, a branch state or a map (a fan-out's shape is named by its states);
    - it lies on a cycle. On the acyclic part no run can enter two states of one class, so a merged state
      is never "visited again" where the original was visited for the first time — and a re-entered
      state's agent is told which state sent the run back.
    """
    from ..compiler.checks.flow import strongly_connected_components
    from ..compiler.passes.merge_equivalent import referenced_state_names

    states = machine.states
    index = {s.name: i for i, s in enumerate(states)}
    referenced = referenced_state_names(machine)
    keep = [s.final or s.visits is not None or any(t.max is not None for t in s.transitions)
            or s.name in referenced or bool(s.tell) or s.parallel is not None or s.each is not None
            or s.branch is not None for s in states]
    successors = [[index[t.target] for t in s.transitions if t.target in index and t.kind != "stay"]
                  for s in states]
    for component in strongly_connected_components(len(states), successors):
        if len(component) > 1 or component[0] in successors[component[0]]:
            for i in component:
                keep[i] = True
    return keep


def what_a_run_sees(state: ir.State) -> object:
    """What tells two states apart to a run or a reader beyond the merge pass's signature, which leaves out
    what a merged state keeps of its own in the IR: the model it calls, whether it ends the run and the
    reason a failing final state gives, each edge's `per visit` and deadline (`after`), and the states its
    templates read. A source rewrite deletes a state in favour of another, so it keeps these apart."""
    return (state.model, state.final, state.fail, tuple((t.per_visit, t.seconds) for t in state.transitions),
            tuple((r.state, r.template) for r in state.template_reads))


def replace_equivalent_states(text: str, replacements: Mapping[str, str], path: str = "<source>") -> str:
    """Replace each state `old` in `replacements` by its equivalent `new`: every reference is redirected and
    the declaration of `old` is deleted. For equivalent states that may lose their declaration
    (`_keep_declared`), this is the source form of the merge-equivalent pass."""
    machine = _parse(text, path)
    states = _states(machine)
    for old, new in replacements.items():
        if old not in states or new not in states:
            raise SourceEditError(f"no state named {old if old not in states else new!r}")
        if new in replacements:
            raise SourceEditError(f"{new!r} is replaced itself; replace by the representative")
    doomed = [states[old] for old in replacements]
    edits = _redirect_references(text, machine, replacements, path, skip=doomed)
    edits.extend(_delete(text, d.span) for d in doomed)
    return _apply(text, edits)


# ---- merging one state into another --------------------------------------------------------------


def merge_state_into(text: str, keep: str, drop: str, path: str = "<source>") -> str:
    """Merge state `drop` into state `keep`.

    Every reference to `drop` (transition targets, guards, templates, test blocks) is redirected to
    `keep`; `drop`'s transitions that `keep` lacks are added to `keep` before its catch-all transitions, so
    no distinct condition is lost; a `visits` bound of `drop` is kept when `keep` has none, and `drop`'s
    listeners join `keep`'s. When `keep` moves on to `drop` by its catch-all (`-> drop` or
    `otherwise -> drop`), `drop`'s transitions take that edge's place; when that edge was all `keep` did
    after its step, the merged step is `drop`'s in the test blocks (its replies, its output type) and the
    expected paths name it once. Test replies for `drop` that no longer fit the merged state's output type
    are removed. A start state is never merged with a final one, and a merge that would turn an edge
    between the two states into a loop is refused.
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

    def targets(t: ast.Transition, name: str) -> bool:
        return t.kind != "stay" and t.target is not None and t.target.value == name

    if any(targets(t, keep) for t in d.transitions):
        raise SourceEditError(f"{drop!r} leads back to {keep!r}: merged, that edge would loop on one state")
    k_transitions = list(k.transitions)
    first_catch_all = next((t for t in k_transitions if t.kind in ("always", "otherwise", "stay")), None)
    into_drop = [t for t in k_transitions if targets(t, drop)]
    inline_at: ast.Transition | None = None
    if into_drop:
        edge = into_drop[0]
        if len(into_drop) > 1 or edge is not first_catch_all or edge.max is not None:
            raise SourceEditError(f"{keep!r} moves on to {drop!r} only under a condition or a bound; merged, "
                                  "that edge would loop on one state")
        inline_at = edge  # `drop`'s transitions take the place of keep's catch-all edge into it
    only_step = inline_at is not None and len(k_transitions) == 1

    k_output = next((i for i in k.items if isinstance(i, ast.OutputDecl)), None)
    d_output = next((i for i in d.items if isinstance(i, ast.OutputDecl)), None)
    same_output = (k_output.type if k_output else None) == (d_output.type if d_output else None)
    # test replies scripted for `drop` only fit the merged state when its output has drop's type
    drop_replies = [] if same_output or only_step else [
        item for test in machine.of(ast.TestDecl) for item in test.items
        if isinstance(item, (ast.Reply, ast.ReplyCalls)) and item.state.value == drop]

    renames = {drop: keep}
    skip_items: list[object] = [inline_at] if inline_at is not None else []
    edits = _redirect_references(text, machine, renames, path, skip=[d], skip_items=skip_items + drop_replies)
    edits.extend(_delete(text, item.span) for item in drop_replies)
    if only_step and not same_output:
        # the merged step's output is what `drop` produced: later states and drop's guards read it
        drop_type = text[d_output.span.start : d_output.span.end] if d_output else ""
        if k_output is not None:
            edits.append(_Edit(k_output.span.start, k_output.span.end, drop_type) if drop_type
                         else _delete(text, k_output.span))
        else:
            edits.append(_insert_before(text, k_transitions[0], [drop_type]))

    # settings that bound or feed the merged work
    settings = []
    k_visits = next((i for i in k.items if isinstance(i, ast.Visits)), None)
    d_visits = next((i for i in d.items if isinstance(i, ast.Visits)), None)
    if d_visits is not None and k_visits is None:
        settings.append(f"visits {d_visits.count.value}")
    k_tell = next((i for i in k.items if isinstance(i, ast.Tell)), None)
    d_tell = next((i for i in d.items if isinstance(i, ast.Tell)), None)
    if d_tell is not None:
        heard = [a.value for a in k_tell.agents] if k_tell is not None else []
        extra = [a.value for a in d_tell.agents if a.value not in heard]
        if extra and k_tell is not None:
            edits.append(_Edit(k_tell.span.start, k_tell.span.end, f"tell [{', '.join(heard + extra)}]"))
        elif extra:
            settings.append(f"tell [{', '.join(extra)}]")
    if settings:
        if k_transitions:
            edits.append(_insert_before(text, k_transitions[0], settings))
        else:
            edits.append(_append_to_state(text, k, settings))

    # `drop`'s transitions that `keep` lacks, with `drop` renamed inside them
    def key(t: ast.Transition, owner: str) -> tuple[object, ...]:
        target = owner if t.kind == "stay" else (t.target.value if t.target else None)
        target = keep if target == drop else target
        return (t.kind, t.guard, t.condition, t.max.value if t.max else None, target)

    keep_keys = {key(t, keep) for t in k_transitions if t is not inline_at}
    conditional, catch_alls = [], []
    for t in d.transitions:
        if key(t, drop) in keep_keys:
            continue
        t_text = _transition_text(text, t, renames)
        if t.kind in ("always", "otherwise", "stay") and t.max is None:
            catch_alls.append(t_text)
        else:
            conditional.append(t_text)

    indent = _indent_of(text, (k_transitions[0] if k_transitions else k).span.start)
    if inline_at is not None:
        moved = conditional + catch_alls
        if moved:
            edits.append(_Edit(inline_at.span.start, inline_at.span.end, f"\n{indent}".join(moved)))
        else:
            edits.append(_delete(text, inline_at.span))
    else:
        if conditional:
            if first_catch_all is not None:
                edits.append(_insert_before(text, first_catch_all, conditional))
            else:
                edits.append(_append_to_state(text, k, conditional))
        has_unbounded_catch_all = any(t.kind in ("always", "otherwise", "stay") and t.max is None
                                      for t in k_transitions)
        if catch_alls and not has_unbounded_catch_all:
            edits.append(_append_to_state(text, k, catch_alls[:1]))  # a second catch-all could never fire

    # test blocks: when `keep` did nothing but hand over to `drop`, one step of the merged state does what
    # the two did: its reply is `drop`'s, and the path no longer names the hand-over twice
    if only_step:
        for test in machine.of(ast.TestDecl):
            for item in test.items:
                if isinstance(item, (ast.Reply, ast.ReplyCalls)) and item.state.value == keep:
                    edits.append(_delete(text, item.span))
                elif isinstance(item, ast.ExpectPath):
                    names = item.states
                    for i, n in enumerate(names):
                        if n.value == drop and i > 0 and names[i - 1].value == keep:
                            edits = [e for e in edits if (e.start, e.end) != (n.span.start, n.span.end)]
                            start = names[i - 1].span.end  # remove ", drop"
                            edits.append(_Edit(start, n.span.end, ""))

    edits.append(_delete(text, d.span))
    return _apply(text, edits)


def _transition_text(text: str, t: ast.Transition, renames: Mapping[str, str]) -> str:
    base = t.span.start
    local: list[_Edit] = []
    if t.target is not None and t.target.value in renames:
        local.append(_Edit(t.target.span.start - base, t.target.span.end - base, renames[t.target.value]))
    if t.guard is not None:
        local.extend(_rename_in_expr(t.guard, renames, base))
    return _apply(text[t.span.start : t.span.end], local)


def _insert_before(text: str, item: ast.Transition, lines: list[str]) -> _Edit:
    indent = _indent_of(text, item.span.start)
    return _Edit(item.span.start, item.span.start, "".join(f"{line}\n{indent}" for line in lines))


def _append_to_state(text: str, state: ast.StateDecl, lines: list[str]) -> _Edit:
    if state.items:
        last = max(state.items, key=lambda i: i.span.end)
        indent = _indent_of(text, state.items[0].span.start)
        return _Edit(last.span.end, last.span.end, "".join(f"\n{indent}{line}" for line in lines))
    if state.has_body:
        at = text.rfind("}", state.span.start, state.span.end)
        return _Edit(at, at, "\n" + "".join(f"        {line}\n" for line in lines) + "    ")
    return _Edit(state.name.span.end, state.name.span.end,
                 " {\n" + "".join(f"        {line}\n" for line in lines) + "    }")


# ---- the exact passes, applied to source ---------------------------------------------------------


def apply_exact_passes_to_source(text: str, path: str = "<source>") -> tuple[str, list[str]]:
    """Remove unreachable states and merge equivalent ones in the source text itself.

    Returns the new text and notes on what changed. When the rewritten source would not check cleanly the
    original is returned unchanged (with a note): a rewrite must never make a machine worse.
    """
    from ..compiler.passes.dead_states import live_states
    from ..compiler.passes.merge_equivalent import equivalence_classes

    machine = _checked_ir(text, path)
    if machine is None:
        return text, []
    notes = []
    live = live_states(machine)
    dead = [s.name for s in machine.states if s.name not in live]
    new = text
    if dead:
        new = remove_states(new, dead, path)
        notes.append("removed unreachable state(s): " + ", ".join(dead))
        machine = _checked_ir(new, path)
        if machine is None:
            return text, ["left the source unchanged: removing unreachable states broke it"]
    classes = equivalence_classes(machine, keep_apart=_keep_declared(machine), apart_by=what_a_run_sees)
    replacements = {member: rep for rep, members in classes.items() for member in members if member != rep}
    if replacements:
        new = replace_equivalent_states(new, replacements, path)
        for rep, members in classes.items():
            others = ", ".join(repr(m) for m in members if m != rep)
            notes.append(f"merged state(s) {others} into the equivalent state {rep!r}")
    if new != text and _checked_ir(new, path) is None:
        return text, ["left the source unchanged: the rewritten machine did not check"]
    return new, notes
