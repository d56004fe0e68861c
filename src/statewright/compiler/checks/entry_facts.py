"""What the transitions into each state show, their guards being true: outputs surely there, variants known.

A state entered only by `when output is Approve -> s` from `review` reads `review.output` as an Approve; one
entered only by `when draft.output != none and ... -> s` reads `draft.output` as there. Every transition
that can fire into the state must show it (a state's edges to itself change no other state's output); any
other kind of transition shows nothing. The type and template checks start from these facts (EntryFacts),
recorded on the symbol tables before them.
"""

from __future__ import annotations

from ...diagnostics import Diagnostics
from ...grammar import ast
from .expressions import ExprChecker
from .flow import EntryFacts, Flow
from .guard_facts import none_tests
from .resolve import GUARD_OUTPUT, Symbols


def entry_facts(symbols: Symbols, flow: Flow) -> dict[str, EntryFacts]:
    """For each state but the start, what every transition that can fire into it shows (EntryFacts); a
    state's own `otherwise stay` and edges to itself change no other state's output and are left out."""
    incoming: dict[int, list[tuple[int, ast.Transition | None]]] = {}
    for edges in flow.edges:
        for e in edges:
            if e.fires and e.source != e.target:
                incoming.setdefault(e.target, []).append((e.source, None if e.fork else e.transition))
    memo: dict[int, EntryFacts] = {}
    out: dict[str, EntryFacts] = {}
    for i, transitions in incoming.items():
        name = flow.states[i].name.value
        if i == flow.start or name not in symbols.states:
            continue
        facts = [_edge_facts(flow.states[source].name.value, t, symbols, flow, memo) for source, t in transitions]
        present = frozenset.intersection(*(f.present for f in facts))
        variants = [dict(f.variants) for f in facts]
        common = {p: frozenset.union(*(v[p] for v in variants)) for p in variants[0] if all(p in v for v in variants)}
        if present or common:
            out[name] = EntryFacts(present, tuple(common.items()))
    return out


def _edge_facts(source: str, t: ast.Transition | None, symbols: Symbols, flow: Flow,
                memo: dict[int, EntryFacts]) -> EntryFacts:
    """What transition `t` of state `source` firing shows: its guard true, `output` being source's output."""
    view = symbols.states.get(source)
    if t is None or t.kind != "guard" or t.guard is None or view is None:
        return EntryFacts()
    found = memo.get(id(t))
    if found is not None:
        return found

    def absolute(path: str) -> str:
        return f"{source}.{path}" if path == GUARD_OUTPUT or path.startswith(GUARD_OUTPUT + ".") else path

    checker = ExprChecker(symbols, Diagnostics(), view, flow=flow)
    facts = EntryFacts(frozenset(absolute(p) for p in none_tests(t.guard, True, symbols)),
                       tuple((absolute(p), o) for p, o in checker.variant_tests(t.guard, True).items()))
    memo[id(t)] = facts
    return facts
