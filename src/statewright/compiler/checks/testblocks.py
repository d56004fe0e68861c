"""Test-block checks: the replies, verdicts, inputs and expectations of `test` blocks fit the machine.

Scripted replies fit their states, verdicts repeat a real condition, the inputs are complete and typed,
and every expectation can come true.

References to unknown states in a test are reported during name resolution (SW6001); here they are
skipped.
"""

from __future__ import annotations

from collections import Counter

from ...diagnostics import Diagnostics, close_names, did_you_mean, quoted_list
from ...grammar import ast
from .. import ir
from .resolve import LIMIT_NAMES, StateView, Symbols, TestView
from .type_algebra import TypeLike, output_type, parse_signature_type, step_output_type, type_text
from .values import value_problems


def expected_failures() -> tuple[str, ...]:
    """What `expect failure KIND` may name: a failure kind, or the name of the limit that ran out."""
    from ...runtime.result import FAILURE_KINDS  # here, not at import: only a test that expects one needs it

    return (*FAILURE_KINDS, *LIMIT_NAMES)


def check_tests(symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Check every test block of the machine."""
    # what each test reads of the whole machine, found once rather than per test
    required = [name for name, decl in symbols.inputs.items()
                if decl.default is None and not isinstance(decl.type, ast.OptionalType)]
    finals = [v for v in symbols.states.values() if v.decl.final]
    every_final_has_result = all(v.result is not None for v in finals)
    for test in symbols.tests:
        _check_inputs(test, symbols, required, diagnostics)
        for item in test.decl.items:
            if isinstance(item, ast.Reply):
                _check_reply(item, symbols, diagnostics)
            elif isinstance(item, ast.ReplyCalls):
                _check_reply_calls(item, symbols, diagnostics)
            elif isinstance(item, ast.Verdict):
                _check_verdict(item, symbols, diagnostics)
            elif isinstance(item, ast.TestTimeout):
                _check_timeout(item, symbols, diagnostics)
        _check_expectations(test, symbols, diagnostics)
        expectations = test.expectations
        if expectations:
            # how often the expected path visits each state, counted once for all the test's expectations
            on_path = Counter(s.value for s in test.expect_path.states) if test.expect_path is not None else None
            for expectation in expectations:
                _check_visit_expectation(expectation, on_path, symbols, diagnostics)
        _check_result_can_match(test, symbols, finals, every_final_has_result, diagnostics)


def _check_inputs(test: TestView, symbols: Symbols, required: list[str], diags: Diagnostics) -> None:
    given: set[str] = set()
    misspelled: set[str] = set()  # inputs given under a misspelled name: reported as that, not as missing
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
                misspelled.update(close_names(key, symbols.inputs)[:1])
                diags.report("SW6004", f"the machine has no input '{key}'", entry.key.span,
                             label="unknown input", help=did_you_mean(key, symbols.inputs) or (
                                 f"its inputs are {quoted_list(symbols.inputs)}" if symbols.inputs
                                 else "the machine declares no inputs"))
                continue
            want = symbols.resolve_type(decl.type)
            for p in value_problems(entry.value, want, symbols, decl.constraints):
                fits = "its constraints" if p.constraint else f"its type {type_text(want)}"
                diags.report("SW4006", f"test input '{key}' does not fit {fits}", p.span, label=p.message,
                             help=p.help)
    missing = [name for name in required if name not in given and name not in misspelled]
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
    if view.kind in ("final", "none", "parallel", "call"):
        why = {"final": "is final", "parallel": "runs branches, not an agent or a tool",
               "call": "runs a machine"}.get(view.kind, "runs no agent and no tool")
        diags.report("SW6003", f"state '{view.name}' {why}, so it takes no reply", item.state.span,
                     label="nothing here reads a reply",
                     help=f"script the states of the machine it runs by path: 'reply {view.name}/STATE ...'"
                     if view.kind == "call" else
                     "script the replies of agent states, action states and the answers of states "
                     "that ask a person")
        return
    want: TypeLike = step_output_type(view, symbols)  # (a map's element's: one reply per element, in order)
    if item.variant is not None and want == ir.ANY:
        return  # an output whose types are not all known (reported): nothing to check the reply against
    if item.variant is not None and not isinstance(want, ir.Variant):
        diags.report("SW6020", f"the output of state '{view.name}' has no variants", item.variant.span,
                     label=f"'{item.variant.value}' names no variant",
                     help=f"only a reply for a variant output (`output A | B`) names its type: write "
                          f"'reply {view.name} VALUE'")
        return
    if isinstance(want, ir.Variant):
        chosen = _reply_variant_type(item, want, view.name, symbols, diags)
        if chosen is None:
            return
        want = chosen
    untyped_agent = view.kind in ("agent", "human") and view.output is None
    for p in value_problems(item.value, want, symbols):
        if untyped_agent:
            diags.report("SW6002", f"state '{view.name}' has no typed output, so its reply must be text",
                         p.span, label=p.message,
                         help="write the reply as a string, or declare 'output TYPE' in the state")
        else:
            breaks = "breaks a constraint of" if p.constraint else "does not fit"
            diags.report("SW6002", f"the reply for '{view.name}' {breaks} its output type {type_text(want)}",
                         p.span,
                         label=p.message, help=p.help)


def _check_reply_calls(item: ast.ReplyCalls, symbols: Symbols, diags: Diagnostics) -> None:
    """`reply STATE call TOOL(...)`: STATE's agent has each tool, and each call's arguments fit it."""
    view = symbols.states.get(item.state.value)
    if view is None:
        return
    if view.kind != "agent" or view.agent is None:
        diags.report("SW6009", f"state '{view.name}' runs no agent, so no reply of it can call a tool",
                     item.state.span, label="no agent here asks for tools",
                     help="script tool calls for a state whose agent has 'tools [...]'; an action state's "
                          "tool result is scripted with 'reply STATE VALUE'")
        return
    agent_name = view.agent.name.value
    agent = symbols.agents.get(agent_name)
    if agent is None:
        return  # an unknown agent is reported where the state names it
    tools = [t.dotted for t in agent.tools.tools] if agent.tools is not None else []
    for call in item.calls:
        name = call.tool.dotted
        if name not in tools:
            diags.report("SW6009", f"agent '{agent_name}' of state '{view.name}' has no tool '{name}'",
                         call.tool.span, label="not one of the agent's tools",
                         help=did_you_mean(name, tools) or (f"its tools are {quoted_list(tools)}" if tools else
                                                            f"give agent '{agent_name}' the tool: tools [{name}]"))
            continue
        _check_scripted_arguments(call, symbols, diags)


def _check_scripted_arguments(call: ast.ScriptedCall, symbols: Symbols, diags: Diagnostics) -> None:
    from ...runtime.tool_signatures import STD_TOOLS

    name = call.tool.dotted
    params = STD_TOOLS[name]["params"] if name in STD_TOOLS else None
    given = {a.name.value for a in call.args}
    missing = [p for p, (_, required) in (params or {}).items() if required and p not in given]
    unknown = [a for a in call.args if params is not None and a.name.value not in params]
    misspelled = len(unknown) == 1 and len(missing) == 1  # one wrong name for the one missing: a misspelling
    seen: set[str] = set()
    for arg in call.args:
        key = arg.name.value
        if key in seen:
            diags.report("SW4011", f"argument '{key}' is given twice", arg.name.span, label="second occurrence",
                         help=f"pass '{key}' once")
            continue
        seen.add(key)
        if params is None:
            continue  # a user tool's own signature decides when the call runs
        if key not in params:
            hint = did_you_mean(key, params) or (f"did you mean '{missing[0]}'? ('{name}' needs it)"
                                                 if misspelled else "")
            diags.report("SW4011", f"'{name}' has no parameter '{key}'", arg.name.span, label="unknown parameter",
                         help=hint or f"its parameters are {quoted_list(params)}")
            continue
        want = parse_signature_type(params[key][0])
        for p in value_problems(arg.value, want, symbols):
            diags.report("SW4006", f"argument '{key}' of '{name}' must be {type_text(want)}", p.span,
                         label=p.message, help=p.help)
    if missing and not misspelled:
        diags.report("SW4011", f"'{name}' needs the argument{'s' if len(missing) > 1 else ''} "
                     + ", ".join(f"'{m}'" for m in missing), call.tool.span, label="missing " + ", ".join(missing),
                     help=f"write {name}(" + ", ".join(f"{m} = ..." for m in missing) + ")")


def reply_variant(value: ast.Value, t: ir.Type, symbols: Symbols) -> str | None:
    """The one variant of a variant output that a reply's value fits; None when none or several do."""
    if not isinstance(t, ir.Variant):
        return None
    fits = [o for o in t.options if not value_problems(value, ir.Named(o), symbols)]
    return fits[0] if len(fits) == 1 else None


def _reply_variant_type(item: ast.Reply, want: ir.Variant, state: str, symbols: Symbols,
                        diags: Diagnostics) -> ir.Named | None:
    """The variant a reply for a variant output is checked against: the one it names, or the one its
    fields fit. None when that is already reported (SW6020), or when the reply fits none (reported here
    against the variant it comes closest to, SW6002)."""
    options = want.options
    if item.variant is not None:
        name = item.variant.value
        if name not in options:
            diags.report("SW6020", f"'{name}' is not a variant of the output of '{state}'", item.variant.span,
                         label=f"the output is {type_text(want)}",
                         help=did_you_mean(name, options) or f"name one of {quoted_list(options, len(options), 'or')}")
            return None
        return ir.Named(name)
    problems = {o: value_problems(item.value, ir.Named(o), symbols) for o in options}
    fits = [o for o in options if not problems[o]]
    if len(fits) == 1:
        return None  # it fits one variant, so it is that one: nothing to report
    if len(fits) > 1:
        diags.report("SW6020", f"the reply for '{state}' fits more than one of its variants", item.value.span,
                     label=f"it could be {quoted_list(fits, len(fits), 'or')}",
                     help=f"name the variant it is: 'reply {state} {fits[0]} ...'")
        return None
    closest = min(options, key=lambda o: len(problems[o]))
    for p in problems[closest]:
        diags.report("SW6002", f"the reply for '{state}' fits none of its variants {type_text(want)}", p.span,
                     label=p.message, help=p.help or f"it comes closest to {closest}; name the variant it is "
                                                     f"meant to be: 'reply {state} {closest} ...'")
    return None


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
                     help="add 'expect path [...]', 'expect final STATE', 'expect result ...', "
                          "'expect output STATE ...' or 'expect failure KIND'")


def _check_visit_expectation(item: ast.ExpectOutput | ast.ExpectInstruction, on_path: Counter[str] | None,
                             symbols: Symbols, diags: Diagnostics) -> None:
    """`expect output` and `expect instruction`: a visit that can happen (`on_path` counts the visits of the
    test's expected path, if it has one), of a state that has the thing expected, with a value of its type."""
    visit = 1
    if item.visit is not None:
        visit = int(item.visit.value)
        if visit < 1:
            diags.report("SW3015", "visits are counted from 1", item.visit.span, label="there is no visit 0",
                         help="the first visit is 'visit 1', which is also what no 'visit' means")
            return
    view = symbols.states.get(item.state.value)
    if view is None or view.kind == "none":
        return  # an unknown state (SW6001) or one that does no work (SW3009) is reported already
    name = view.name
    if isinstance(item, ast.ExpectInstruction):
        if view.kind != "agent":
            what = {"final": "a final state", "action": "an action state: it calls a tool",
                    "human": "a state that asks a person a question",
                    "parallel": "a parallel state: its branches' agents have the instructions",
                    "call": "a state that runs a machine"}[view.kind]
            help_text = {"final": "expect the run's result instead: expect result ...",
                         "parallel": "expect the instruction of a branch's state instead"}.get(
                view.kind, f"expect its output instead: expect output {name} ...")
            diags.report("SW6041", f"state '{name}' has no instruction", item.state.span,
                         label=f"{what}, and no agent is sent an instruction", help=help_text)
            return
    elif view.kind == "final":
        diags.report("SW6041", f"final state '{name}' has no output", item.state.span,
                     label="a final state ends the run; it does no step",
                     help="expect the run's result instead: expect result ...")
        return
    else:
        _check_expected_output(item, view.name, output_type(view, symbols), view.kind == "agent" and
                               view.output is None, symbols, diags)
    if on_path is not None:
        count = on_path[name]
        if count < visit:
            times = {0: f"never visits '{name}'", 1: f"visits '{name}' once"}.get(count,
                                                                            f"visits '{name}' {count} times")
            diags.report("SW7043", f"the expected path {times}",
                         item.visit.span if item.visit is not None else item.state.span,
                         label=f"visit {visit} is not on the expected path",
                         help="the test cannot pass: fix the visit number, or the expected path")


def _check_expected_output(item: ast.ExpectOutput, name: str, want: TypeLike, text_output: bool, symbols: Symbols,
                           diags: Diagnostics) -> None:
    if item.contains:
        shown = type_text(want)
        if shown not in ("str", "any") and not shown.startswith('"'):
            diags.report("SW6040", f"'contains' needs a text output; the output of '{name}' is {shown}",
                         item.value.span, label="a substring of what?",
                         help=f"compare the value itself: expect output {name} ...")
        return
    for p in value_problems(item.value, want, symbols, partial=True):
        if text_output:
            diags.report("SW6040", f"state '{name}' has no typed output, so its expected output is text",
                         p.span, label=p.message,
                         help="write the expected text as a string, or 'contains \"...\"' for a part of it")
        else:
            diags.report("SW6040", f"the expected output of '{name}' does not fit its output type "
                         f"{type_text(want)}", p.span, label=p.message, help=p.help)


def _check_result_can_match(test: TestView, symbols: Symbols, finals: list[StateView], every_final_has_result: bool,
                            diags: Diagnostics) -> None:
    """`expect result VALUE` compares typed values: a value that is not text can never equal what a final
    state's `result` template renders. `finals` are the machine's final states in source order, and
    `every_final_has_result` whether each of them has a `result`."""
    if test.expect_result is None or test.expect_failure is not None:
        return
    value = test.expect_result.value
    if value.kind == "str":
        return
    end: StateView | None = None  # the final state the test expects the run to end in, when it names one
    if test.expect_final is not None:
        end = symbols.states.get(test.expect_final.state.value)
        if end is None or not end.decl.final:
            return
    elif test.expect_path is not None and test.expect_path.states:
        end = symbols.states.get(test.expect_path.states[-1].value)
        if end is not None and not end.decl.final:
            end = None  # a path that stops short of a final state: the run may end in any of them
    if end is not None:
        finals, every_final_has_result = [end], end.result is not None
    if finals and every_final_has_result:
        written = value.span.text if value.span is not None else ""
        scalar = value.kind in ("int", "float", "bool", "none")
        diags.report("SW6042", "this result can never match: the run's result is text", value.span,
                     label=f"{_VALUE_KINDS.get(value.kind, value.kind)}, not text",
                     help=(f"a final state's result template renders text; write it as text: expect result "
                           f'"{written}"' if scalar else
                           "a final state's result template renders text; expect that text, in quotes"),
                     notes=[f"'{v.name}' has a result template" for v in finals[:3]])


_VALUE_KINDS = {"int": "a number", "float": "a number", "bool": "true or false", "none": "none",
                "list": "a list", "object": "an object"}


# The checks of one scripted step, for a step that names a called machine's state by path (checks/calls.py):
# the step is checked against that state, in that machine's symbol tables.
check_reply = _check_reply
check_reply_calls = _check_reply_calls
check_verdict = _check_verdict
check_timeout = _check_timeout
