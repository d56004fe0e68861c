"""Calls of other machines: `run` states, a machine's `returns`, and test steps scripted by path.

A `run NAME(arg = EXPR, ...)` state runs a machine a `use` line makes callable: it does no work of its
own (no agent, instruction, question, tool call or output), is not final, and gives each required input
of the callee an argument of its type (the arguments are guard expressions, typed like a tool call's;
in a map of calls they see the element). Its output, the call's outcome, is typed in checks/callees.py.

`returns TYPE` is held to the machine's final states: each that succeeds gives a TYPE (a `result`
template gives text; one without takes the last output, the output of the state that led there).

A test step for a called machine's state names it by path — `investigate/draft`, `investigate[2]/draft`
in a map of calls (the call of the list's third element: elements are numbered from 0, as a map's
position is), `a/b/c` deeper — and is then checked against that state as in its own machine.
"""

from __future__ import annotations

import dataclasses

from ...diagnostics import Diagnostics, Span, did_you_mean, quoted_list
from ...grammar import ast
from .. import ir
from . import testblocks
from .approvals import check_approval_step
from .callees import Callee, import_type, machine_result
from .expressions import ExprChecker
from .flow import EntryFacts, Flow
from .resolve import StateView, Symbols, unknown_state_help
from .type_algebra import assignable, normalized, output_type, type_text


def check_calls(symbols: Symbols, diagnostics: Diagnostics, flow: Flow | None) -> None:
    """Every `run` state, the machine's `returns`, and its tests' steps for called machines."""
    for view in symbols.states.values():
        if view.run is not None:
            _check_shape(view, view.run, diagnostics)
            callee = symbols.callees.get(view.run.machine.value)
            if callee is not None:
                _check_arguments(view, view.run, callee, symbols, diagnostics, flow)
            else:  # an unknown machine (reported): its arguments are still read, as expressions of this machine
                checker = ExprChecker(symbols, diagnostics, None, reader=view.name, flow=flow,
                                      local=symbols.each_names.get(view.name))
                for arg in view.run.args:
                    checker.infer(arg.value)
    if symbols.machine.returns is not None:
        _check_returns(symbols.machine.returns, symbols, diagnostics)
    for test in symbols.tests:
        for item in test.decl.items:
            if isinstance(item, (ast.Reply, ast.ReplyCalls, ast.Verdict, ast.TestTimeout, ast.Approval)):
                steps = ast.state_path(item.state)
                if steps is not None:
                    _check_step(item, steps, symbols, diagnostics)


# ---- run states ----------------------------------------------------------------------------------


def _check_shape(view: StateView, run: ast.RunCall, diags: Diagnostics) -> None:
    name = view.name
    for item, word in ((view.agent, "agent"), (view.instruction, "do"), (view.ask, "ask"), (view.call, "call"),
                       (view.output, "output"), (view.parallel, "parallel"), (view.join, "join"),
                       (view.retries, "retries"), (view.model, "model")):
        if item is not None:
            diags.report("SW3101", f"state '{name}' runs a machine, so it cannot have '{word}'", item.span,
                         label=f"'run {run.machine.value}(...)' does this state's work",
                         help=f"remove '{word}', or split the state: one that runs the machine, one that does "
                              "this")
    if view.decl.final:
        diags.report("SW3102", f"final state '{name}' cannot run a machine", run.span,
                     label="a run ends on entering a final state",
                     help=f"run the machine in a state before '{name}', and lead from it to '{name}'")


def _check_arguments(view: StateView, run: ast.RunCall, callee: Callee, symbols: Symbols, diags: Diagnostics,
                     flow: Flow | None) -> None:
    """The arguments against the callee's inputs: each an input, each once, of its type; every required
    input given."""
    inputs = callee.symbols.inputs
    # what the transitions into the state show (a variant tested, a value not none) holds in its arguments,
    # as in a tool call's
    checker = ExprChecker(symbols, diags, None, reader=view.name, flow=flow, local=symbols.each_names.get(view.name)
                          ).knowing(symbols.entry_facts.get(view.name, EntryFacts()))
    seen: set[str] = set()
    for arg in run.args:
        got = checker.infer(arg.value)
        key = arg.name.value
        if key in seen:
            diags.report("SW4103", f"argument '{key}' is given twice", arg.name.span, label="second occurrence",
                         help=f"pass '{key}' once")
            continue
        seen.add(key)
        decl = inputs.get(key)
        if decl is None:
            diags.report("SW4100", f"machine '{callee.name}' has no input '{key}'", arg.name.span,
                         label="unknown input",
                         help=did_you_mean(key, inputs) or (f"its inputs are {quoted_list(inputs)}" if inputs
                                                            else f"'{callee.name}' takes no inputs"))
            continue
        want = import_type(symbols, callee, callee.symbols.resolve_type(decl.type))
        if not isinstance(want, ir.Optional_):
            got = checker.present(got, arg.value)
        if not assignable(got, want):
            diags.report("SW4102", f"input '{key}' of '{callee.name}' is {type_text(want)}, not "
                         f"{type_text(normalized(got))}", arg.value.span, label=f"this is {type_text(normalized(got))}",
                         help=f"pass a value of type {type_text(want)}" + (
                             f" (the map's element, '{view.each.item.value}', is in scope)" if view.each is not None
                             else ""))
    missing = [name for name, decl in inputs.items()
               if name not in seen and decl.default is None and not isinstance(decl.type, ast.OptionalType)]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        diags.report("SW4101", f"'{callee.name}' needs the input{plural} " + ", ".join(f"'{m}'" for m in missing),
                     run.machine.span, label="missing " + ", ".join(missing),
                     help=f"write run {callee.name}(" + ", ".join(f"{m} = ..." for m in missing) + ")")


# ---- returns -------------------------------------------------------------------------------------


def _check_returns(returns: ast.ReturnsSetting, symbols: Symbols, diags: Diagnostics) -> None:
    """Each final state that succeeds gives a value of the declared result type."""
    want = machine_result(symbols)
    if not isinstance(want, (ir.Prim, ir.ListOf, ir.Optional_, ir.Enum, ir.Named)) or want == ir.ANY:
        return  # an unknown type, reported where it is named
    shown = type_text(want)
    for view in symbols.states.values():
        if not view.decl.final or view.fail is not None:
            continue
        if view.result is not None:
            if not assignable(ir.STR, want):
                diags.report("SW4104", f"final state '{view.name}' gives text, and the machine returns {shown}",
                             view.result.span, label="a 'result' template renders text",
                             help=f"remove 'result', so that '{view.name}' gives the last output, or declare "
                                  "'returns str'")
            continue
        if view.kind in ("agent", "action", "call", "human"):
            _check_given(view, view.decl.name.span, want, f"final state '{view.name}' gives", symbols, diags)
            continue
        for source in symbols.states.values():
            for t in source.transitions:
                if t.target is not None and t.target.value == view.name and not source.decl.final:
                    _check_given(source, t.target.span, want, f"'{source.name}' leads to '{view.name}' with",
                                 symbols, diags)


def _check_given(source: StateView, span: Span | None, want: ir.Type, what: str, symbols: Symbols,
                 diags: Diagnostics) -> None:
    got = output_type(source, symbols)
    if assignable(got, want):
        return
    diags.report("SW4104", f"{what} {type_text(normalized(got))}, and the machine returns {type_text(want)}", span,
                 label=f"the result would be the output of '{source.name}'",
                 help=f"give '{source.name}' 'output {type_text(want)}', add a final state with a result for this "
                      "way out, or change 'returns'")


# ---- test steps by path --------------------------------------------------------------------------


def _step_spans(name: ast.Name) -> list[Span | None]:
    """The place of each step of a path in the source (the path's own place when it has none)."""
    span = name.span
    out: list[Span | None] = []
    offset = 0
    for part in name.value.split("/"):
        out.append(span.source.span(span.start + offset, span.start + offset + len(part)) if span is not None
                   else None)
        offset += len(part) + 1
    return out


def _check_step(item: ast.Reply | ast.ReplyCalls | ast.Verdict | ast.TestTimeout | ast.Approval,
                steps: tuple[ast.PathStep, ...], symbols: Symbols, diags: Diagnostics) -> None:
    spans = _step_spans(item.state)
    here, machine = symbols, symbols.machine_name
    for step, span in zip(steps[:-1], spans):
        view = here.states.get(step.state)
        if view is None:
            _unknown_step(step.state, here, machine, span, diags, top=here is symbols)
            return
        if view.run is None:
            diags.report("SW6100", f"state '{step.state}' runs no machine", span,
                         label="a path goes through states that run machines",
                         help=f"script '{step.state}' itself: write its name alone"
                         if view.kind in ("agent", "action", "human") else "")
            return
        callee = here.callees.get(view.run.machine.value)
        if callee is None:
            return  # an unknown machine, or one that cannot be used: reported at its `run` or `use`
        if not _element_fits(view, step, span, diags):
            return
        here, machine = callee.symbols, callee.name
    last, span = steps[-1], spans[-1]
    if last.element is not None:
        diags.report("SW6102", f"'{last.state}[{last.element}]' names a call, and a path ends at a state", span,
                     label="no call to name here", help=f"write '{last.state}' without the brackets")
        return
    view = here.states.get(last.state)
    if view is None:
        _unknown_step(last.state, here, machine, span, diags, top=False)
        return
    alone = dataclasses.replace(item, state=ast.Name(last.state, item.state.span))
    if isinstance(alone, ast.Reply):
        testblocks.check_reply(alone, here, diags)
    elif isinstance(alone, ast.ReplyCalls):
        testblocks.check_reply_calls(alone, here, diags)
    elif isinstance(alone, ast.Verdict):
        testblocks.check_verdict(alone, here, diags)
    elif isinstance(alone, ast.Approval):
        check_approval_step(alone, here, diags)
    else:
        testblocks.check_timeout(alone, here, diags)


def path_target(symbols: Symbols, name: ast.Name) -> tuple[Symbols, StateView] | None:
    """The machine and state a test step's path names (None for a plain name, or a path that names none:
    reported by the checks)."""
    steps = ast.state_path(name)
    if steps is None:
        return None
    here = symbols
    for step in steps[:-1]:
        view = here.states.get(step.state)
        callee = here.callees.get(view.run.machine.value) if view is not None and view.run is not None else None
        if callee is None:
            return None
        here = callee.symbols
    view = here.states.get(steps[-1].state)
    return (here, view) if view is not None else None


def _element_fits(view: StateView, step: ast.PathStep, span: Span | None, diags: Diagnostics) -> bool:
    """A map of calls is entered at the call of one element, by the element's position in the list from 0
    (`investigate[2]`: the third); a single call without one."""
    if view.each is not None and step.element is None:
        diags.report("SW6102", f"state '{step.state}' runs a map of calls: name which call", span,
                     label="which element's call?",
                     help=f"write '{step.state}[0]/...' for the call of the first element of the list, "
                          f"'{step.state}[1]/...' for the second")
        return False
    if view.each is None and step.element is not None:
        diags.report("SW6102", f"state '{step.state}' runs one call, not a map of calls", span,
                     label="no elements to number", help=f"write '{step.state}/...' without the brackets")
        return False
    most = int(view.each.max.value) if view.each is not None and view.each.max is not None else None
    if step.element is not None and most is not None and step.element >= most:
        diags.report("SW6102", f"state '{step.state}' takes at most {most} element{'s' if most != 1 else ''}, so "
                     f"there is no call [{step.element}]", span, label=f"the calls are [0] to [{most - 1}]",
                     help=f"elements are numbered from 0: '{step.state}[0]/...' is the first")
        return False
    return True


def _unknown_step(name: str, here: Symbols, machine: str, span: Span | None, diags: Diagnostics, *,
                  top: bool) -> None:
    if top:
        diags.report("SW6001", f"unknown state '{name}' in a test", span, label="no state with this name",
                     help=unknown_state_help(name, here))
        return
    diags.report("SW6101", f"machine '{machine}' has no state '{name}'", span, label=f"not a state of '{machine}'",
                 help=did_you_mean(name, here.states) or f"its states are {quoted_list(here.states)}")
