"""Machine-structure checks: one start, a final state, everything reachable, every run able to finish,
no transition hidden behind an unconditional one, and every cycle bounded."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.guard_oracle import compile_expr

from statewright.compiler.checks.flow import strongly_connected_components
from statewright.compiler.checks.graph import check_graph, known_value
from statewright.diagnostics import Diagnostic, Diagnostics, Severity
from statewright.grammar import ast, parse_text
from statewright.runtime.spec import Scope


def graph_diagnostics(source: str) -> list[Diagnostic]:
    parsed = parse_text(textwrap.dedent(source).strip() + "\n", "input.fsm")
    assert parsed.machine is not None and not parsed.diagnostics.items, [
        d.message for d in parsed.diagnostics
    ]
    diagnostics = Diagnostics()
    check_graph(parsed.machine, diagnostics)
    return diagnostics.sorted()


def codes(source: str) -> list[str]:
    return [d.code for d in graph_diagnostics(source)]


def where(d: Diagnostic) -> tuple[int, int, str]:
    assert d.span is not None
    return d.span.start_pos.line, d.span.start_pos.column, d.span.text


def only(source: str, code: str) -> Diagnostic:
    found = graph_diagnostics(source)
    assert [d.code for d in found] == [code], [(d.code, d.message) for d in found]
    return found[0]


# ---- start and final states -----------------------------------------------------------------------


def test_a_machine_without_a_start_state_is_reported_at_its_name() -> None:
    d = only(
        """
        machine m {
            state draft { -> done }
            final state done
        }
        """,
        "SW3001",
    )
    assert d.message == "machine 'm' has no start state"
    assert where(d) == (1, 9, "m")
    assert "start state draft" in d.help


def test_each_extra_start_state_is_reported_at_its_name_with_a_note_naming_the_first() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a { -> done }
            start state b { -> done }
            start state c { -> done }
            final state done
        }
        """
    )
    assert [(d.code, where(d)) for d in found] == [
        ("SW3002", (3, 17, "b")),
        ("SW3002", (4, 17, "c")),
    ]
    assert found[0].message == "more than one start state: 'b'"
    assert found[0].notes == ("the first start state is 'a' (line 2)",)


def test_extra_start_states_are_not_also_reported_as_unreachable() -> None:
    assert "SW7004" not in codes(
        """
        machine m {
            start state a { -> done }
            start state b { -> done }
            final state done
        }
        """
    )


def test_a_machine_without_a_final_state_is_reported_at_its_name_and_nothing_is_blamed_for_it() -> None:
    d = only(
        """
        machine m {
            start state a { -> b }
            state b { otherwise stay max 3 }
        }
        """,
        "SW3003",
    )
    assert d.message == "machine 'm' has no final state"
    assert where(d) == (1, 9, "m")


def test_an_empty_machine_has_neither_start_nor_final() -> None:
    assert codes("machine m { }") == ["SW3001", "SW3003"]


def test_every_transition_out_of_a_final_state_is_reported_at_the_transition() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a { -> done }
            final state done {
                -> a
                otherwise stay
            }
        }
        """
    )
    assert [(d.code, where(d)) for d in found] == [
        ("SW3006", (4, 9, "-> a")),
        ("SW3006", (5, 9, "otherwise stay")),
    ]
    assert found[0].message == "transition out of final state 'done'"


# ---- transitions that can never fire ------------------------------------------------------------------


def test_a_transition_after_an_unconditional_one_can_never_fire() -> None:
    d = only(
        """
        machine m {
            start state a {
                -> b
                when output == "x" -> done
            }
            state b { -> done }
            final state done
        }
        """,
        "SW3007",
    )
    assert d.message == "transition in state 'a' can never fire"
    assert where(d) == (4, 9, 'when output == "x" -> done')
    assert d.help.startswith("line 3: '-> b' always fires before it")


def test_every_transition_after_the_shadowing_one_is_reported() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a {
                otherwise -> done
                -> b
                when "it is late" -> b
            }
            state b { -> done }
            final state done
        }
        """
    )
    # `b` is only reached by the transitions that never fire, so no run reaches it (issue 9, item 6)
    assert [(d.code, where(d)[0]) for d in found] == [("SW3007", 4), ("SW3007", 5), ("SW7004", 7)]
    assert all("line 3: 'otherwise -> done'" in d.help for d in found[:2])
    assert found[2].notes == ("line 4: '-> b' leads here, but never fires",
                              "line 5: 'when \"it is late\" -> b' leads here, but never fires")


def test_otherwise_stay_without_a_bound_shadows_what_follows() -> None:
    d = only(
        """
        machine m {
            start state a {
                when output == "ok" -> done
                otherwise stay
                -> done
            }
            final state done
        }
        """,
        "SW3007",
    )
    assert where(d)[0] == 5
    assert "line 4: 'otherwise stay'" in d.help


def test_a_bounded_edge_falls_through_so_it_hides_nothing() -> None:
    assert codes(
        """
        machine m {
            start state a {
                -> b max 2
                otherwise stay max 1
                otherwise -> done
            }
            state b { -> a }
            final state done
        }
        """
    ) == []


def test_an_edge_into_a_state_with_visits_falls_through_once_they_are_used_up() -> None:
    assert codes(
        """
        machine m {
            start state a {
                -> b
                -> done
            }
            state b {
                visits 2
                -> a
            }
            final state done
        }
        """
    ) == []


def test_otherwise_stay_in_a_state_with_visits_falls_through() -> None:
    assert codes(
        """
        machine m {
            start state a {
                visits 3
                otherwise stay
                -> done
            }
            final state done
        }
        """
    ) == []


def test_guards_and_conditions_never_hide_later_transitions() -> None:
    assert codes(
        """
        machine m {
            start state a {
                when output.ok -> done
                when "looks fine" -> done
                otherwise -> done
            }
            final state done
        }
        """
    ) == []


# ---- guards whose value never changes ---------------------------------------------------------------


@pytest.mark.parametrize("guard", [
    "true", "not false", "1 == 1", '"a" in "abc"', "2 * 3 > 5", "len([1, 2]) == 2", '[1, 2][0] < 2',
    "1 / 2 == 0.5",
])
def test_a_guard_that_reads_nothing_the_run_decides_is_always_true(guard: str) -> None:
    d = only(f"machine m {{ start state a {{ when {guard} -> done }} final state done }}", "SW7007")
    assert d.severity is Severity.WARNING
    assert d.message == "the guard is always true"
    assert where(d)[2] == guard
    assert "like '-> done'" in d.help


@pytest.mark.parametrize("guard", ["false", "1 > 2", '"x" in []', "not (1 == 1)"])
def test_a_guard_that_is_always_false_is_a_warning_that_its_transition_never_fires(guard: str) -> None:
    d = only(f"machine m {{ start state a {{ when {guard} -> done\n -> done }} final state done }}", "SW7007")
    assert d.message == "the guard is always false"
    assert where(d)[2] == guard
    assert d.help.startswith("the transition never fires")


@pytest.mark.parametrize("guard", [
    "visits(a) > 1",  # the run decides
    "true or output.ok",  # it reads `output`, so it is the run's to decide, whatever the rest says
    "topic == topic",  # an input: the same in one run, not in every run
    "1 / 0 == 1",  # fails at run time: a guard failure, not a value
    '"a" * 1000000000000 == "b"',  # never computed: `*` on text is a type error, reported elsewhere
    "1 + 1",  # not a boolean: SW4004, reported by the type checker
    '"abc".x == 1',
])
def test_guards_whose_value_is_not_known_or_not_a_boolean_get_no_warning(guard: str) -> None:
    assert codes(f"machine m {{ start state a {{ when {guard} -> done\n -> done }} final state done }}") == []


def test_transitions_after_a_guard_that_is_always_true_can_never_fire() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a {
                when 1 == 1 -> done
                when "looks fine" -> a
                otherwise -> done
            }
            final state done
        }
        """
    )
    assert [(d.code, where(d)[0]) for d in found] == [("SW7007", 3), ("SW3007", 4), ("SW3007", 5)]
    assert "line 3: 'when 1 == 1 -> done' always fires before it" in found[1].help


def test_a_bounded_guard_that_is_always_true_falls_through_like_a_bounded_edge() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a {
                when true -> a max 2
                otherwise -> done
            }
            final state done
        }
        """
    )
    assert [d.code for d in found] == ["SW7007"]
    assert "like '-> a max 2'" in found[0].help


def test_an_edge_whose_guard_is_always_false_closes_no_cycle() -> None:
    assert codes(
        """
        machine m {
            start state a { -> b }
            state b {
                when false -> a
                -> done
            }
            final state done
        }
        """
    ) == ["SW7007"]


# ---- reachability -----------------------------------------------------------------------------------


def test_a_state_no_path_leads_to_is_a_warning_at_its_name() -> None:
    d = only(
        """
        machine m {
            start state a { -> done }
            state orphan { -> done }
            final state done
        }
        """,
        "SW7004",
    )
    assert d.severity is Severity.WARNING
    assert d.message == "state 'orphan' is unreachable"
    assert where(d) == (3, 11, "orphan")


def test_reachability_follows_bounded_edges_stay_and_edges_that_come_late() -> None:
    assert codes(
        """
        machine m {
            start state a {
                when "needs research" -> research max 1
                otherwise stay max 2
                otherwise -> b
            }
            state research { -> a }
            state b {
                visits 1
                -> done
            }
            final state done
        }
        """
    ) == []


def test_a_reachable_state_that_cannot_reach_a_final_state_names_where_the_run_gets_stuck() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a {
                when output == "ok" -> done
                -> review
            }
            state review {
                -> fix max 3
                otherwise -> check
            }
            state fix { -> review }
            state check { otherwise stay max 2 }
            final state done
        }
        """
    )
    assert [(d.code, where(d)[2]) for d in found] == [
        ("SW3005", "review"), ("SW3005", "fix"), ("SW3005", "check"),
    ]
    review, _, check = found
    assert review.message == "no final state can be reached from 'review'"
    assert review.notes == ("from here the run ends in 'check', which only leads back to itself",)
    assert check.notes == ("'check' only leads back to itself",)
    assert review.help == "add a transition from 'check' to a final state, e.g. 'otherwise -> done'"


def test_a_run_stuck_going_round_several_states_names_them_all() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a {
                when output == "ok" -> done
                -> b
            }
            state b { -> c max 2 }
            state c { -> b max 2 }
            final state done
        }
        """
    )
    assert [(d.code, where(d)[2]) for d in found] == [("SW3005", "b"), ("SW3005", "c")]
    assert found[0].notes == ("from here the run ends up going round 'b' and 'c'",)
    assert found[0].help == (
        "add a transition from one of those states to a final state, e.g. 'otherwise -> done'"
    )


def test_an_unreachable_dead_end_is_only_reported_as_unreachable() -> None:
    assert codes(
        """
        machine m {
            start state a { -> done }
            state orphan { -> orphan max 2 }
            final state done
        }
        """
    ) == ["SW7004"]


def test_states_with_no_transitions_or_unknown_targets_are_left_to_their_own_diagnostics() -> None:
    # SW3012 (no transitions) and SW2002 (unknown state) are reported elsewhere; blaming everything
    # upstream of them as well would bury the real mistake.
    assert codes(
        """
        machine m {
            start state a {
                when output == "x" -> b
                when output == "y" -> c
                -> done
            }
            state b { }
            state c { -> reviw }
            final state done
        }
        """
    ) == []


# ---- cycles -------------------------------------------------------------------------------------------


def test_a_two_state_cycle_without_a_bound_is_named_with_its_closing_edge() -> None:
    d = only(
        """
        machine m {
            start state draft {
                -> review
            }
            state review {
                when output == "ok" -> done
                -> draft
            }
            final state done
        }
        """,
        "SW3008",
    )
    assert d.message == "cycle with no bound: draft -> review -> draft"
    assert where(d) == (2, 17, "draft")
    assert d.help == (
        "add 'max N' to one of its edges (e.g. line 7: '-> draft') or 'visits N' to one of its states"
    )


def test_a_longer_cycle_is_named_in_the_order_the_run_goes_round_it() -> None:
    d = only(
        """
        machine m {
            start state plan { -> code }
            state test { -> review }
            state code { -> test }
            state review {
                when output == "ok" -> done
                when "the plan is wrong" -> plan
            }
            final state done
        }
        """,
        "SW3008",
    )
    assert d.message == "cycle with no bound: plan -> code -> test -> review -> plan"
    assert "line 7: 'when \"the plan is wrong\" -> plan'" in d.help


def test_one_max_on_any_edge_of_the_cycle_bounds_it() -> None:
    assert codes(
        """
        machine m {
            start state plan { -> code }
            state code { -> test }
            state test { -> review max 3 }
            state review {
                when output == "ok" -> done
                -> plan
            }
            final state done
        }
        """
    ) == []


def test_visits_on_any_state_of_the_cycle_bounds_it() -> None:
    assert codes(
        """
        machine m {
            start state draft { -> review }
            state review {
                visits 4
                when output == "ok" -> done
                -> draft
            }
            final state done
        }
        """
    ) == []


def test_an_edge_after_a_bounded_one_can_fire_so_its_cycle_counts() -> None:
    d = only(
        """
        machine m {
            start state draft { -> review }
            state review {
                when output == "ok" -> done
                -> draft max 2
                -> revise
            }
            state revise { -> review }
            final state done
        }
        """,
        "SW3008",
    )
    assert d.message == "cycle with no bound: review -> revise -> review"


def test_a_transition_that_can_never_fire_closes_no_cycle() -> None:
    assert codes(
        """
        machine m {
            start state draft { -> review }
            state review {
                -> done
                -> draft
            }
            final state done
        }
        """
    ) == ["SW3007"]


def test_an_unbounded_edge_to_the_state_itself_is_a_cycle() -> None:
    d = only(
        """
        machine m {
            start state poll {
                when output == "ready" -> done
                when "still working" -> poll
            }
            final state done
        }
        """,
        "SW3008",
    )
    assert d.message == "cycle with no bound: poll -> poll"


def test_otherwise_stay_is_not_reported_as_a_cycle() -> None:
    # An unbounded `otherwise stay` is SW3016's to report.
    assert "SW3008" not in codes(
        """
        machine m {
            start state ask {
                when output == "ok" -> done
                otherwise stay
            }
            final state done
        }
        """
    )


def test_edges_out_of_final_states_close_no_cycle() -> None:
    assert codes(
        """
        machine m {
            start state a { -> done }
            final state done { -> a }
        }
        """
    ) == ["SW3006"]


def test_interlocked_cycles_are_one_report_naming_the_other_states() -> None:
    d = only(
        """
        machine m {
            start state a {
                when output == "ok" -> done
                -> b
            }
            state b {
                when output == "c" -> c
                -> a
            }
            state c { -> b }
            final state done
        }
        """,
        "SW3008",
    )
    assert d.message == "cycle with no bound: a -> b -> a"
    assert d.notes == ("'c' also loops with these states without a bound",)


def test_separate_cycles_are_reported_separately_in_source_order() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a {
                when output == "x" -> b
                -> c
            }
            state b {
                when output == "ok" -> done
                -> a
            }
            state c {
                when output == "ok" -> done
                -> d
            }
            state d { -> c }
            final state done
        }
        """
    )
    assert [d.message for d in found] == [
        "cycle with no bound: a -> b -> a",
        "cycle with no bound: c -> d -> c",
    ]


def test_unknown_targets_and_duplicate_states_are_skipped_quietly() -> None:
    assert codes(
        """
        machine m {
            start state a {
                when output == "x" -> nowhere
                -> done
            }
            state a { -> a }
            final state done
        }
        """
    ) == []


def test_a_name_declared_twice_is_left_to_its_duplicate_diagnostic() -> None:
    # SW2001 reports the duplicate; here the name counts as final if either declaration is, and its
    # self-loop is not blamed as a cycle.
    assert codes(
        """
        machine m {
            start state draft { -> done }
            state done { -> done }
            final state done
        }
        """
    ) == []


# ---- scale: iterative walks, linear time ------------------------------------------------------------


@pytest.mark.slow
def test_a_chain_of_ten_thousand_states_with_bounded_back_edges_checks_clean() -> None:
    n = 10_000
    lines = ["machine long_chain {"]
    for i in range(n):
        start = "start " if i == 0 else ""
        back = f' when output == "back" -> s{i - 1} max 2' if i else ""
        lines.append(f"    {start}state s{i} {{{back} -> s{i + 1} }}")
    lines.append(f"    final state s{n}")
    lines.append("}")
    assert codes("\n".join(lines)) == []


def test_a_ring_of_five_thousand_states_is_one_cycle() -> None:
    n = 5_000
    lines = ["machine ring {", '    start state s0 { when output == "done" -> done  -> s1 }']
    lines += [f"    state s{i} {{ -> s{(i + 1) % n} }}" for i in range(1, n)]
    lines += ["    final state done", "}"]
    found = graph_diagnostics("\n".join(lines))
    assert [d.code for d in found] == ["SW3008"]
    message = found[0].message
    assert message.startswith("cycle with no bound: s0 -> s1 -> s2 ")
    assert message.endswith(" -> s4998 -> s4999 -> s0")
    assert "(4988 more)" in message
    assert "line 5001: '-> s0'" in found[0].help


# ---- the component algorithm -------------------------------------------------------------------------


def _reaches(successors: list[list[int]], a: int) -> set[int]:
    seen, todo = {a}, [a]
    while todo:
        for b in successors[todo.pop()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9).flatmap(
    lambda n: st.lists(st.lists(st.integers(0, n - 1), max_size=4), min_size=n, max_size=n)
))
def test_components_are_the_mutually_reachable_groups_sinks_first(successors: list[list[int]]) -> None:
    n = len(successors)
    reach = [_reaches(successors, a) for a in range(n)]
    components = strongly_connected_components(n, successors)
    assert sorted(m for c in components for m in c) == list(range(n))
    for c in components:
        assert c == sorted(c)
        assert all(b in reach[a] and a in reach[b] for a in c for b in c)
    position = {m: i for i, c in enumerate(components) for m in c}
    for a in range(n):
        for b in successors[a]:
            # an edge never leads to a component emitted later
            assert position[b] <= position[a]
            if position[b] == position[a]:
                assert a in reach[b]


def test_components_leave_out_excluded_nodes_and_edges_into_them() -> None:
    successors = [[1], [2], [0]]
    assert strongly_connected_components(3, successors, include=[True, True, True]) == [[0, 1, 2]]
    assert strongly_connected_components(3, successors, include=[True, False, True]) == [[0], [2]]


_LITERALS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False), st.text(max_size=4),
).map(ast.Literal)


def _literal_compounds(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    ops = st.sampled_from(
        ["and", "or", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "+", "-", "*", "/", "%"]
    )
    return st.one_of(
        st.builds(ast.BinaryOp, ops, children, children),
        st.builds(ast.UnaryOp, st.sampled_from(["not", "-"]), children),
        st.builds(ast.Index, children, children),
        st.builds(ast.Call, st.just(ast.Name("len")), st.lists(children, min_size=1, max_size=1).map(tuple)),
        st.lists(children, max_size=3).map(lambda items: ast.ListExpr(tuple(items))),
    )


@settings(max_examples=300, deadline=None)
@given(st.recursive(_LITERALS, _literal_compounds, max_leaves=10))
def test_a_known_value_is_what_the_guard_interpreter_computes(expr: ast.Expr) -> None:
    known = known_value(expr)  # never raises, whatever the expression
    if known is not None:
        computed = compile_expr(expr)(Scope(output=None, inputs={}, outputs={}, visits={}))
        assert repr(computed) == repr(known.value)  # repr: a NaN computed twice is the same result


# ---- issue 9, item 6: every graph check follows only the transitions that can fire ------------------


def test_a_final_state_reached_only_by_an_always_false_guard_cannot_be_reached() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a {
                when 1 == 2 -> done
                -> a max 3
            }
            final state done
        }
        """
    )
    assert [d.code for d in found] == ["SW3005", "SW7007", "SW7004"]
    assert found[0].notes[-1] == "line 3: 'when 1 == 2 -> done' would lead on, but never fires"


def test_a_cycle_of_states_no_run_reaches_is_reported_as_unreachable_not_as_unbounded() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a { -> done }
            state b { -> c }
            state c { -> b }
            final state done
        }
        """
    )
    assert [d.code for d in found] == ["SW7004", "SW7004"]


def test_a_state_reached_only_from_an_unreachable_state_is_unreachable_too() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a { -> done }
            state b { -> c }
            state c { -> done }
            final state done
        }
        """
    )
    assert [(d.code, d.message) for d in found] == [("SW7004", "state 'b' is unreachable"),
                                                    ("SW7004", "state 'c' is unreachable")]


def test_a_guard_repeated_in_the_same_state_can_never_fire_the_second_time() -> None:
    found = graph_diagnostics(
        """
        machine m {
            start state a {
                when output == "x" -> done
                when output == "x" -> b
                when output == "x" -> b max 2
                -> b
            }
            state b { -> done }
            final state done
        }
        """
    )
    assert [(d.code, where(d)[0]) for d in found] == [("SW3007", 4), ("SW3007", 5)]
    assert found[0].help.startswith("line 3: 'when output == \"x\" -> done' fires whenever this guard is true")


def test_a_repeated_guard_after_a_bounded_one_can_fire() -> None:
    assert codes(
        """
        machine m {
            start state a {
                when output == "x" -> a max 2
                when output == "x" -> done
                -> done
            }
            final state done
        }
        """
    ) == []
