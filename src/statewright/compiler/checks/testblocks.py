"""Test-block checks: the replies, verdicts, inputs and expectations of `test` blocks fit the machine.

Scripted replies fit their states, verdicts repeat a real condition, the inputs are complete and typed,
and every expectation can come true.

References to unknown states in a test are reported during name resolution (SW6001); here they are
skipped.
"""

from __future__ import annotations

from ...diagnostics import Diagnostics, did_you_mean, quoted_list
from ...grammar import ast
from .resolve import LIMIT_NAMES, Symbols, TestView
from .typecheck import step_output_type, type_text, value_problems


def expected_failures() -> tuple[str, ...]:
    """What `expect failure KIND` may name: a failure kind, or the name of the limit that ran out."""
    from ...runtime.result import FAILURE_KINDS  # here, not at import: only a test that expects one needs it

    return (*FAILURE_KINDS, *LIMIT_NAMES)


def check_tests(symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Check every test block of the machine."""
    for test in symbols.tests:
        _check_inputs(test, symbols, diagnostics)
        for item in test.decl.items:
            if isinstance(item, ast.Reply):
                _check_reply(item, symbols, diagnostics)
            elif isinstance(item, ast.Verdict):
                _check_verdict(item, symbols, diagnostics)
            elif isinstance(item, ast.TestTimeout):
                _check_timeout(item, symbols, diagnostics)
        _check_expectations(test, symbols, diagnostics)


def _check_inputs(test: TestView, symbols: Symbols, diags: Diagnostics) -> None:
    given: set[str] = set()
    if test.input is not None:
        for entry in ast.object_entries(test.input.values):
            key = entry.key.value
            if key in given:
                diags.report("SW6004", f"input '{key}' is given twice", entry.key.span, label="second value",
                             help="give each input once")
                continue
            given.add(key)
            decl = symbols.inputs.get(key)
            if decl is None:
                diags.report("SW6004", f"the machine has no input '{key}'", entry.key.span,
                             label="unknown input", help=did_you_mean(key, symbols.inputs) or (
                                 f"its inputs are {quoted_list(symbols.inputs)}" if symbols.inputs
                                 else "the machine declares no inputs"))
                continue
            want = symbols.resolve_type(decl.type)
            for p in value_problems(entry.value, want, symbols):
                diags.report("SW4006", f"test input '{key}' does not fit its type {type_text(want)}", p.span,
                             label=p.message, help=p.help)
    missing = [name for name, decl in symbols.inputs.items()
               if name not in given and decl.default is None and not isinstance(decl.type, ast.OptionalType)]
    if missing:
        span = test.input.span if test.input is not None else test.decl.name.span
        plural = "s" if len(missing) > 1 else ""
        diags.report("SW6004", f"test \"{test.decl.name.value}\" does not give the required input{plural} "
                     + ", ".join(f"'{m}'" for m in missing), span, label=f"missing {', '.join(missing)}",
                     help="inputs without a default must be given: input { "
                          + "  ".join(f"{m} ..." for m in missing) + " }")


def _check_reply(item: ast.Reply, symbols: Symbols, diags: Diagnostics) -> None:
    view = symbols.states.get(item.state.value)
    if view is None:
        return
    if view.kind in ("final", "none", "parallel"):
        why = {"final": "is final", "parallel": "runs branches, not an agent or a tool"}.get(
            view.kind, "runs no agent and no tool")
        diags.report("SW6003", f"state '{view.name}' {why}, so it takes no reply", item.state.span,
                     label="nothing here reads a reply",
                     help="script the replies of agent states, action states and the answers of states "
                          "that ask a person")
        return
    want = step_output_type(view, symbols)  # (a map's element's: one reply per element, in order)
    untyped_agent = view.kind in ("agent", "human") and view.output is None
    for p in value_problems(item.value, want, symbols):
        if untyped_agent:
            diags.report("SW6002", f"state '{view.name}' has no typed output, so its reply must be text",
                         p.span, label=p.message,
                         help="write the reply as a string, or declare 'output TYPE' in the state")
        else:
            diags.report("SW6002", f"the reply for '{view.name}' does not fit its output type "
                         f"{type_text(want)}", p.span, label=p.message, help=p.help)


def _check_timeout(item: ast.TestTimeout, symbols: Symbols, diags: Diagnostics) -> None:
    view = symbols.states.get(item.state.value)
    if view is None:
        return
    if view.ask is None or not any(t.kind == "timeout" for t in view.transitions):
        why = "asks no person" if view.ask is None else "sets no deadline ('after DURATION -> s')"
        diags.report("SW6008", f"state '{view.name}' {why}, so it cannot time out", item.state.span,
                     label="nothing here waits for an answer in time",
                     help="script a timeout for a state with 'ask' and 'after DURATION -> s'; script an "
                          "answer with 'reply STATE VALUE'")


def _check_verdict(item: ast.Verdict, symbols: Symbols, diags: Diagnostics) -> None:
    view = symbols.states.get(item.state.value)
    if view is None:
        return
    conditions = view.conditions
    if not conditions:
        diags.report("SW6005", f"state '{view.name}' has no natural-language conditions", item.state.span,
                     label="the verifier never judges this state",
                     help="a verdict answers a state's 'when \"...\"' conditions")
        return
    if item.condition is not None and item.condition.value not in conditions:
        diags.report("SW6005", f"state '{view.name}' has no condition \"{item.condition.value}\"",
                     item.condition.span, label="not one of the state's conditions",
                     help=did_you_mean(item.condition.value, conditions)
                     or "repeat a condition word for word, or write 'verdict STATE none'",
                     notes=[f"the conditions of '{view.name}': " + "; ".join(f'"{c}"' for c in conditions)])


def _check_expectations(test: TestView, symbols: Symbols, diags: Diagnostics) -> None:
    if test.expect_final is not None:
        view = symbols.states.get(test.expect_final.state.value)
        if view is not None and not view.decl.final:
            finals = [s for s, v in symbols.states.items() if v.decl.final]
            diags.report("SW6007", f"'{view.name}' is not a final state", test.expect_final.state.span,
                         label="a run ends only in a final state",
                         help=did_you_mean(view.name, finals)
                         or (f"the final states are {quoted_list(finals)}" if finals else
                             "use 'expect path [...]' to check the states a run passes through"))
    if test.expect_failure is not None:
        kind = test.expect_failure.kind
        expected = expected_failures()
        if kind.value not in expected:
            diags.report("SW6006", f"unknown failure kind '{kind.value}'", kind.span,
                         label="not a failure kind",
                         help=did_you_mean(kind.value, expected)
                         or f"expect one of {quoted_list(expected, len(expected), 'or')}")
        if test.expect_final is not None:
            view = symbols.states.get(test.expect_final.state.value)
            if view is None:
                pass  # an unknown state, already reported
            elif view.fail is None:
                diags.report("SW6006", "a test cannot expect both a final state that succeeds and a failure",
                             test.expect_failure.span, label="contradicts 'expect final'",
                             help="a run either reaches a final state or fails; only a final state with "
                                  "'fail' ends a run as failed (kind 'final')")
            elif kind.value != "final":
                diags.report("SW6006", f"a run that ends in '{view.name}' fails with kind 'final', not "
                             f"'{kind.value}'", kind.span, label="the failing final state's kind",
                             help="write 'expect failure final'")
    if not test.has_expectation:
        diags.report("SW7006", f"test \"{test.decl.name.value}\" has no expectation", test.decl.name.span,
                     label="checks only that the run does not crash",
                     help="add 'expect path [...]', 'expect final STATE', 'expect result ...' or "
                          "'expect failure KIND'")
