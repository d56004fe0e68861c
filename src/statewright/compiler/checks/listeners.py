"""Listener and verifier checks: what a state tells is read, and the conditions one verifier judges differ.

What a state tells reaches an agent that will read it, and the conditions one verifier call judges are
distinct to a reader.

Warnings only: a machine that breaks them still runs, but something in it does not do what it says.
"""

from __future__ import annotations

import re

from ...diagnostics import Diagnostics
from ...grammar import ast
from .flow import Flow
from .resolve import StateView, Symbols

_NOT_WORDS = re.compile(r"[\W_]+")


def check_listeners(symbols: Symbols, flow: Flow, diagnostics: Diagnostics) -> None:
    """SW7009 for a `tell` to an agent that never runs after the state; SW7010 for a `tell` to the state's
    own agent. States no run reaches are left to SW7004."""
    bit = {name: 1 << k for k, name in enumerate(symbols.agents)}
    runs: set[str] = set()  # agents some state runs
    marks = [0] * len(flow.states)
    for view in symbols.states.values():
        if view.agent is not None and view.agent.name.value in bit:
            runs.add(view.agent.name.value)
            marks[flow.index[view.name]] |= bit[view.agent.name.value]
    later: list[int] | None = None
    for view in symbols.states.values():
        if view.tell is None or view.decl.final or not flow.reachable[flow.index[view.name]]:
            continue
        own = view.agent.name.value if view.agent is not None else None
        for name in view.tell.agents:
            agent = name.value
            if agent not in bit:
                continue  # SW2003
            if agent == own:
                diagnostics.report(
                    "SW7010", f"state '{view.name}' tells its own agent '{agent}'", name.span,
                    label=f"'{agent}' already keeps this step's exchange in its memory",
                    help=f"remove '{agent}' from the list: the agent that does a step always remembers it, "
                         "and telling it adds the output a second time")
                continue
            if flow.goes_astray:
                continue  # what runs after a mistyped target (SW2002) is unknown: not said to be nothing
            if later is None:
                later = flow.later(marks)
            if not later[flow.index[view.name]] & bit[agent]:
                where = "no state runs it" if agent not in runs else "no state it runs can come after this one"
                diagnostics.report(
                    "SW7009", f"agent '{agent}' never runs after state '{view.name}'", name.span,
                    label=f"what '{view.name}' tells it is never read: {where}",
                    help=f"remove '{agent}' from the list, or tell the agent of a state that runs later")


def condition_key(text: str) -> str:
    """A condition as a reader takes it: case, spacing and punctuation ignored."""
    return _NOT_WORDS.sub(" ", text.casefold()).strip()


def verifier_groups(view: StateView) -> list[list[ast.Transition]]:
    """The runs of consecutive natural-language conditions: each is judged by one verifier call."""
    groups: list[list[ast.Transition]] = []
    current: list[ast.Transition] = []
    for t in view.transitions:
        if t.kind == "condition" and t.condition is not None:
            current.append(t)
            continue
        if current:
            groups.append(current)
        current = []
    if current:
        groups.append(current)
    return groups


def check_conditions(symbols: Symbols, diagnostics: Diagnostics) -> None:
    """SW7008 for conditions a reader could take for another one of the same verifier call, or for the
    verifier's own answer "none"."""
    for view in symbols.states.values():
        if view.decl.final:
            continue
        for group in verifier_groups(view):
            seen: dict[str, ast.Transition] = {}
            for t in group:
                assert t.condition is not None
                key = condition_key(t.condition.value)
                if key == "none":
                    diagnostics.report(
                        "SW7008", f"condition \"{t.condition.value}\" reads like the verifier's \"none\"",
                        t.condition.span, label="the verifier answers \"none\" when no condition holds",
                        help="say what must hold, e.g. \"nothing is missing\"")
                elif not key:
                    diagnostics.report(
                        "SW7008", "a condition without words", t.condition.span,
                        label="the verifier has nothing to judge",
                        help="say in words what must hold for this transition")
                elif key in seen:
                    first = seen[key]
                    assert first.condition is not None
                    same = first.condition.value == t.condition.value
                    target = first.target.value if first.target else "?"
                    diagnostics.report(
                        "SW7008", f"condition \"{t.condition.value}\" repeats \"{first.condition.value}\""
                        + ("" if same else " but for case, spacing or punctuation"),
                        t.condition.span, label="the verifier judges both in the same call",
                        notes=[f"line {first.condition.span.start_pos.line}: the first one leads to '{target}'"],
                        help="make the conditions say different things, or keep one of them")
                else:
                    seen[key] = t
