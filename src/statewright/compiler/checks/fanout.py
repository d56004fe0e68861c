"""Fan-out checks: parallel states and their branches, joins, and states that map over a list.

A parallel state's branches are found in the machine's flow (flow.py): each runs from its entry, a
`branch state`, along transitions between branch states, and ends in a state without transitions. Here the
branches are recorded for the type checks (a parallel state's output is the list of its branches'
outputs), and every shape that could not run as a branch, a join or a map is reported (SW2060, SW3060-SW3072,
SW7060).
"""

from __future__ import annotations

from ...diagnostics import Diagnostics
from ...grammar import ast
from .flow import Flow
from .resolve import GUARD_OUTPUT, JINJA_NAMES, StateView, Symbols

JOIN_RULES = ("all", "first")


def record_branches(flow: Flow, symbols: Symbols) -> None:
    """Note each parallel state's branches in `symbols.branches`: (entry, the states that can end it)."""
    for i, entries in flow.branch_entries.items():
        name = flow.states[i].name.value
        branches = []
        for entry in entries:
            if flow.parallel_of[entry] != i or flow.entry_of[entry] != entry:
                continue  # not a branch state, or the entry of another parallel state's branch
            ends = tuple(flow.states[e].name.value for e in flow.branch_ends(entry))
            branches.append((flow.states[entry].name.value, ends))
        symbols.branches[name] = tuple(branches)
    for state, owner in enumerate(flow.entry_of):
        if owner is not None and flow.parallel_of[owner] is not None:
            symbols.branch_of[flow.states[state].name.value] = flow.states[owner].name.value


def check_fanouts(symbols: Symbols, flow: Flow, diagnostics: Diagnostics) -> None:
    """Report parallel states, joins, branch states and maps that cannot run as written."""
    for view in symbols.states.values():
        if view.parallel is not None:
            _check_parallel(view, view.parallel, symbols, diagnostics)
        elif view.join is not None:
            diagnostics.report("SW3066", f"state '{view.name}' has 'join' but no 'parallel'", view.join.span,
                               label="nothing here to join",
                               help="give the state 'parallel [a, b]' to run branches, or remove 'join'")
        if view.decl.branch:
            _check_branch_state(view, flow, diagnostics)
        if view.each is not None:
            _check_each(view, view.each, symbols, diagnostics)
    _check_entries_shared(symbols, diagnostics)
    _check_edges(flow, diagnostics)


# ---- parallel states ---------------------------------------------------------------------------


def _check_parallel(view: StateView, parallel: ast.Parallel, symbols: Symbols, diags: Diagnostics) -> None:
    name = view.name
    seen: set[str] = set()
    for entry in parallel.branches:
        if entry.value in seen:
            diags.report("SW3063", f"branch '{entry.value}' is listed twice", entry.span, label="listed again",
                         help="list each branch once; to run the same work twice, declare a second branch")
            continue
        seen.add(entry.value)
        target = symbols.states.get(entry.value)
        if target is not None and not target.decl.branch:
            diags.report("SW3061", f"'{entry.value}' is not a branch state", entry.span,
                         label="a branch starts at a branch state",
                         help=f"declare it 'branch state {entry.value}': it then runs only inside this branch")
    if len(seen) < 2:
        diags.report("SW3060", f"parallel state '{name}' has {'one branch' if seen else 'no branches'}",
                     parallel.span, label="nothing to run side by side",
                     help="name two or more branch entry states, 'parallel [a, b]', or make the branch's "
                          "states ordinary states in the path")
    for item, word in ((view.agent, "agent"), (view.instruction, "do"), (view.call, "call"), (view.ask, "ask"),
                       (view.output, "output"), (view.model, "model"), (view.retries, "retries"),
                       (view.each, "for"), (view.result, "result"), (view.fail, "fail")):
        if item is not None:
            diags.report("SW3068", f"parallel state '{name}' cannot have '{word}'", item.span,
                         label="its branches do its work",
                         help=f"move '{word}' into a branch state; the parallel state's output is the list of "
                              "its joined branches' outputs")
    if view.decl.final:
        diags.report("SW3068", f"final state '{name}' cannot run branches", parallel.span,
                     label="a run ends on entering a final state",
                     help=f"make '{name}' a state that leads to a final state after its join")
    if view.join is not None:
        _check_join(view.join, len(seen), diags)


def _check_join(join: ast.Join, branches: int, diags: Diagnostics) -> None:
    rule = join.rule.value
    if rule not in JOIN_RULES:
        diags.report("SW3066", f"unknown join rule '{rule}'", join.rule.span, label="not a join rule",
                     help="write 'join all', 'join first N', 'join first where GUARD' or 'join first N where "
                          "GUARD'")
        return
    if rule == "all" and (join.count is not None or join.guard is not None):
        extra = join.count if join.count is not None else join.guard
        diags.report("SW3066", "'join all' takes no count and no guard", extra.span if extra else join.span,
                     label="'all' waits for every branch",
                     help="write 'join first N' or 'join first where GUARD' to wait for some of them")
        return
    if rule == "first" and join.count is None and join.guard is None:
        diags.report("SW3066", "'join first' needs a count or a guard", join.span, label="the first what?",
                     help="write 'join first 1', 'join first 2', or 'join first where output.ok'")
        return
    if join.count is not None:
        count = int(join.count.value)
        if count < 1 or (branches >= 2 and count > branches):
            diags.report("SW3067", f"'join first {count}' with {branches} branch{'es' if branches != 1 else ''}",
                         join.count.span, label=f"must be from 1 to {max(branches, 1)}",
                         help="wait for at least one branch and at most all of them ('join all')")


# ---- branch states -----------------------------------------------------------------------------


def _check_branch_state(view: StateView, flow: Flow, diags: Diagnostics) -> None:
    name = view.name
    i = flow.index.get(name)
    if i is not None and flow.states[i] is view.decl and flow.entry_of[i] is None:
        diags.report("SW3062", f"branch state '{name}' belongs to no branch", view.decl.name.span,
                     label="no parallel state's branch leads here",
                     help=f"name it in a parallel state, 'parallel [{name}, ...]', or lead to it from a state of "
                          "a branch; or drop 'branch' to make it an ordinary state")
    for flag, word in ((view.decl.start, "the start state"), (view.decl.final, "a final state")):
        if flag:
            diags.report("SW3069", f"branch state '{name}' cannot be {word}", view.decl.name.span,
                         label="runs only inside its branch",
                         help="a run starts and ends outside branches; a branch state without transitions "
                              "ends its branch")
    for item, word in ((view.ask, "ask"), (view.parallel, "parallel"), (view.each, "for")):
        if item is not None:
            diags.report("SW3069", f"branch state '{name}' cannot have '{word}'", item.span,
                         label="branches run agent and action states only",
                         help="a person's answer, nested branches and maps belong to states outside branches: "
                              "put this before or after the parallel state")


def _check_entries_shared(symbols: Symbols, diags: Diagnostics) -> None:
    """An entry two parallel states list (each parallel state lists it once: see _check_parallel)."""
    owner: dict[str, str] = {}
    for view in symbols.states.values():
        if view.parallel is None:
            continue
        listed: dict[str, ast.Name] = {}  # each entry where the state first lists it
        for n in view.parallel.branches:
            listed.setdefault(n.value, n)
        for entry, name in listed.items():
            if entry in owner:
                diags.report("SW3063", f"branch '{entry}' is also a branch of state '{owner[entry]}'", name.span,
                             label="already another parallel state's branch",
                             help="give each parallel state branches of its own")
            else:
                owner[entry] = view.name


def _check_edges(flow: Flow, diags: Diagnostics) -> None:
    """Transitions that leave a branch or enter one from outside, and states two branches reach."""
    conflicted = {state for state, _, _ in flow.branch_conflicts}
    for i, decl in enumerate(flow.states):
        entry = flow.entry_of[i]
        for t in decl.transitions:
            if t.kind == "stay" or t.target is None:
                continue
            j = flow.index.get(t.target.value)
            if j is None:
                continue
            target = flow.states[j]
            parallel = flow.parallel_of[i]
            if decl.branch and entry is not None and parallel is not None and j not in conflicted:
                if not target.branch or (flow.entry_of[j] is not None and flow.entry_of[j] != entry):
                    branch = flow.states[entry].name.value
                    diags.report("SW3064", f"a transition out of branch '{branch}'", t.span,
                                 label=f"'{target.name.value}' is outside this branch",
                                 help=f"end the branch in a state without transitions; the transitions of "
                                      f"parallel state '{flow.states[parallel].name.value}' decide where the "
                                      "run goes after the join")
            elif not decl.branch and target.branch:
                diags.report("SW3065", f"a transition into branch state '{target.name.value}' from outside its "
                             "branch", t.span, label="a branch is entered only through its parallel state",
                             help="lead to the parallel state instead; it starts the branch at its entry")
    for state, first, second in flow.branch_conflicts:
        name = flow.states[state].name.value
        diags.report("SW3063", f"branch state '{name}' is in two branches", flow.states[state].name.span,
                     label=f"reached from '{flow.states[first].name.value}' and from "
                           f"'{flow.states[second].name.value}'",
                     help="give each branch states of its own")


# ---- maps --------------------------------------------------------------------------------------


def _check_each(view: StateView, each: ast.ForEach, symbols: Symbols, diags: Diagnostics) -> None:
    name = view.name
    if each.max is None:
        diags.report("SW3070", f"state '{name}' maps over a list without 'max'", each.span,
                     label="how many elements at most?",
                     help=f"write '{_each_text(each)} max N': a longer list ends the run (failure 'bound')")
    for number, word in ((each.max, "max"), (each.concurrency, "concurrency")):
        if isinstance(number, ast.Number) and int(number.value) < 1:  # a named max: checks/bounds.py
            diags.report("SW3071", f"'{word} {number.value}' in state '{name}'", number.span,
                         label="must be at least 1", help=f"write '{word} N' with N of 1 or more")
    if (isinstance(each.max, ast.Number) and each.concurrency is not None
            and int(each.concurrency.value) > int(each.max.value) >= 1):
        diags.report("SW7060", f"'concurrency {each.concurrency.value}' is more than 'max {each.max.value}'",
                     each.concurrency.span, label="never more than max elements at once",
                     help=f"write 'concurrency {each.max.value}', or leave it out")
    if view.kind not in ("agent", "action", "call", "parallel", "none") or view.decl.final:
        what = ("a final state" if view.decl.final else "a state that asks a person" if view.kind == "human"
                else "a state without an agent or a tool call")
        diags.report("SW3072", f"'for' in {what}", each.span, label="nothing here to run once per element",
                     help="map an agent state ('agent NAME' and 'do \"...\"') or an action state ('call ...')")
    taken = {**{n: "an input" for n in symbols.inputs}, **{n: "a state" for n in symbols.states},
             **{n: "a run variable" for n in symbols.variables},
             GUARD_OUTPUT: "the state's output in guards", **{n: "one of Jinja's own names" for n in JINJA_NAMES}}
    names = [n for n in (each.index, each.item) if n is not None]
    for n in names:
        if n.value in taken:
            diags.report("SW2060", f"'{n.value}' is already {taken[n.value]}", n.span,
                         label="the map's name would hide it",
                         help=f"name the {'position' if n is each.index else 'element'} something else, e.g. "
                              f"'{n.value}_{'index' if n is each.index else 'item'}'")
    if each.index is not None and each.index.value == each.item.value:
        diags.report("SW2060", f"the position and the element are both named '{each.item.value}'",
                     each.item.span, label="the same name twice",
                     help=f"write 'for i, {each.item.value} in ...'")


def _each_text(each: ast.ForEach) -> str:
    names = f"{each.index.value}, {each.item.value}" if each.index is not None else each.item.value
    return f"for {names} in ..."
