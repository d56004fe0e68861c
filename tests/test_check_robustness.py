"""The checker on hostile input: huge files, broken files, and what it must never import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from statewright.api import check_text
from statewright.grammar.nesting import MAX_NESTING
from statewright.grammar.parser import MAX_FILE_CHARS

VALID = Path(__file__).parent / "cases" / "valid"


def test_a_file_over_the_size_limit_is_refused_with_a_diagnostic() -> None:
    text = "machine m {\n" + "#" * MAX_FILE_CHARS + "\n}\n"
    compilation = check_text(text, "huge.fsm")
    assert [d.code for d in compilation.diagnostics] == ["SW1021"]
    assert compilation.ir is None


def test_deleting_any_one_line_of_a_valid_machine_never_crashes_the_checker() -> None:
    lines = (VALID / "review-pipeline" / "input.fsm").read_text(encoding="utf-8").split("\n")
    for i in range(len(lines)):
        compilation = check_text("\n".join(lines[:i] + lines[i + 1:]), "cut.fsm")
        errors = [d for d in compilation.diagnostics if d.severity.value == "error"]
        assert (compilation.ir is None) == bool(errors), f"line {i + 1} removed"


def test_many_independent_mistakes_are_all_reported_in_one_run() -> None:
    source = (VALID / "review-pipeline" / "input.fsm").read_text(encoding="utf-8")
    broken = (source.replace("agent critic\n", "agent critc\n")
              .replace("-> review\n    }\n\n    state review", "-> reviw\n    }\n\n    state review")
              .replace("output.score >= 85", "output.scor >= 85")
              .replace("{{ review.output.fixes }}", "{{ review.output.fixs }}")
              .replace("reply review { score 90  fixes [] }", 'reply review { score "90"  fixes [] }'))
    diagnostics = check_text(broken, "broken.fsm").diagnostics
    errors = sorted(d.code for d in diagnostics if d.severity.value == "error")
    assert errors == ["SW2002", "SW2003", "SW2006", "SW2006", "SW6002"]


_PROBE = (
    "import sys\n"
    "from statewright.api import check_file\n"
    "c = check_file(sys.argv[1])\n"
    "assert c.ir is not None\n"
    "print(' '.join(sorted(m for m in ('litellm', 'pydantic') if m in sys.modules)))\n"
)


def test_checking_a_file_imports_neither_litellm_nor_pydantic() -> None:
    path = str(VALID / "all-features" / "input.fsm")
    loaded = subprocess.run([sys.executable, "-c", _PROBE, path], check=True, capture_output=True,
                            text=True).stdout.strip()
    assert loaded == ""


def _type_chain(n: int, *, closed: bool = False) -> str:
    """A machine whose output type T0 holds T1, which holds T2, ... T{n-1} (which holds T0 when closed)."""
    lines = ["machine chain {"]
    for i in range(n):
        inner = f"T{i + 1}" if i + 1 < n else ("T0" if closed else "str")
        lines += [f"    type T{i} {{", f"        next: list[{inner}]", "    }"]
    lines += ['    agent w { prompt "p" }', "    start state a {", "        agent w", '        do "x"',
              "        output T0", "        -> done", "    }", "    final state done", "}"]
    return "\n".join(lines) + "\n"


def test_a_chain_of_types_longer_than_the_recursion_limit_is_one_error_and_one_at_the_limit_compiles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Types nest by name, so the parser's nesting limit does not bound a chain of them: the checks walk it
    without recursion (and in linear time: the recursive-type check used to search a path from every type),
    and a chain deeper than a value may nest is one SW4015; the deepest chain allowed compiles, each class
    after the ones it holds."""
    from statewright.cli import main

    spec = tmp_path / "chain.fsm"
    spec.write_text(_type_chain(sys.getrecursionlimit() + 200))
    assert main(["compile", str(spec), "-o", str(tmp_path / "chain.py")]) == 1
    err = capsys.readouterr().err
    assert err.count("error[SW4015]") == 1 and "Traceback" not in err
    spec.write_text(_type_chain(MAX_NESTING // 2))  # each type a record holding a list: two levels
    assert main(["compile", str(spec), "-o", str(tmp_path / "chain.py")]) == 0
    runner = (tmp_path / "chain.py").read_text()
    assert runner.index("class T1(") < runner.index("class T0(")


def test_a_long_cycle_of_types_is_one_sw4009() -> None:
    compilation = check_text(_type_chain(1500, closed=True), "cycle.fsm")
    reports = [d for d in compilation.diagnostics if d.code == "SW4009"]
    assert [d.message for d in reports] == ["type 'T0' contains itself"]
    assert reports[0].label.startswith("T0.next -> T1.next -> ") and reports[0].label.endswith("T1499.next -> T0")


def _first_cycles(edges: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The SW4009 reports a plain search gives (message, chain): from each type in order, the first path
    back to it depth first, fields in order, once per set of types on it."""
    reports, reported = [], set()
    for start in edges:
        stack: list[tuple[str, list[tuple[str, str]]]] = [(start, [])]
        visited: set[str] = set()
        found = None
        while stack and found is None:
            node, path = stack.pop()
            for target, field in edges[node]:
                if target == start:
                    found = [*path, (node, field)]
                    break
                if target not in visited:
                    visited.add(target)
                    stack.append((target, [*path, (node, field)]))
        if found is not None and frozenset(n for n, _ in found) not in reported:
            reported.add(frozenset(n for n, _ in found))
            chain = " -> ".join(f"{n}.{f}" for n, f in found) + f" -> {start}"
            reports.append((f"type '{start}' contains itself", chain))
    return reports


def test_recursive_types_are_reported_as_a_plain_search_reports_them() -> None:
    import random

    rng = random.Random(4009)
    for _ in range(300):
        n = rng.randint(1, 7)
        edges: dict[str, list[tuple[str, str]]] = {}
        lines = ["machine m {"]
        for i in range(n):
            lines.append(f"    type T{i} {{")
            edges[f"T{i}"] = []
            for j in range(rng.randint(1, 3)):
                k = rng.randrange(n + 1)
                inner = f"T{k}" if k < n else "str"
                if k < n:
                    edges[f"T{i}"].append((inner, f"f{j}"))
                lines.append(f"        f{j}: {rng.choice([inner, inner + '?', f'list[{inner}]'])}")
            lines.append("    }")
        lines += ['    agent w { prompt "p" }', "    start state a {", "        agent w", '        do "x"',
                  "        output T0", "        -> done", "    }", "    final state done", "}"]
        compilation = check_text("\n".join(lines) + "\n", "types.fsm")
        got = [(d.message, d.label) for d in compilation.diagnostics if d.code == "SW4009"]
        assert got == _first_cycles(edges), "\n".join(lines)


def _wide_parallel(n: int) -> str:
    """One parallel state with `n` branches of two states (a{i} -> b{i}) and one that forks (c -> d or e),
    then a state whose instruction reads the first, the last and the forked branches' outputs."""
    lines = ["machine wide {", "    type R {", "        ok: bool", "    }", '    agent w { prompt "p" }',
             '    start state go { agent w  do "x"  -> fan }',
             f"    state fan {{ parallel [{', '.join(f'a{i}' for i in range(n))}, c]  join all  -> after }}"]
    for i in range(n):
        lines += [f'    branch state a{i} {{ agent w  do "x"  output R  -> b{i} }}',
                  f'    branch state b{i} {{ agent w  do "x" }}']
    lines += ['    branch state c { agent w  do "x"  output R  when output.ok -> d  otherwise -> e }',
              '    branch state d { agent w  do "x"  output R }', '    branch state e { agent w  do "x" }',
              (f'    state after {{ agent w  do "{{{{ a0.output.ok }}}} {{{{ b{n - 1}.output }}}} '
               '{{ c.output.ok }} {{ d.output.ok }}"  -> done }'), "    final state done", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_a_parallel_state_with_thousands_of_branches_records_each_and_knows_what_its_join_ran() -> None:
    """Each branch's states are found once for the whole machine (a scan of every state per branch made
    5,000 branches take over five seconds): every branch is recorded with its ends, and after `join all`
    each state that every path through its branch passes has surely run, the others not."""
    n = 5000
    compilation = check_text(_wide_parallel(n), "wide.fsm")
    assert [(d.code, d.span.text if d.span else "") for d in compilation.diagnostics] == [("SW4014", "d.output.ok")]
    assert compilation.symbols is not None
    branches = compilation.symbols.branches["fan"]
    assert branches == (*((f"a{i}", (f"b{i}",)) for i in range(n)), ("c", ("d", "e")))
    assert compilation.symbols.branch_of["b7"] == "a7" and compilation.symbols.branch_of["e"] == "c"


def test_a_type_of_thousands_of_fields_is_read_field_by_field_from_one_table() -> None:
    """A reply giving every field of a wide type, and a template reading each of them: each field is found
    in a table of its type made once (each look-up used to walk or rebuild the type's fields, so 6,000
    fields took six seconds). A field declared twice is the first declaration, constraints included."""
    n = 6000
    fields = "".join(f"        f{i}: int\n" for i in range(n - 1))
    reply = "".join(f"            f{i} {i}\n" for i in range(n))
    reads = " ".join(f"{{{{ s0.output.f{i} }}}}" for i in range(n))
    text = (f"machine wide {{\n    type R {{\n{fields}        f{n - 1}: int in 0..5\n        f{n - 1}: str\n    }}\n"
            '    agent w { prompt "p" }\n'
            f'    start state s0 {{ agent w  do "x"  output R  when output.f{n - 1} > 1 -> s1  -> s1 }}\n'
            f'    state s1 {{ agent w  do "{reads} {{{{ s0.output.nope }}}}"  -> done }}\n    final state done\n'
            f'    test "all" {{\n        reply s0 {{\n{reply}        }}\n        expect path [s0, s1, done]\n    }}\n}}\n')
    diagnostics = check_text(text, "wide.fsm").diagnostics
    assert [(d.code, d.message, d.span.text if d.span else "") for d in diagnostics] == [
        ("SW2001", f"field 'f{n - 1}' is declared twice in type 'R'", f"f{n - 1}"),
        ("SW2006", "R has no field 'nope'", "nope"),
        ("SW6002", "the reply for 's0' breaks a constraint of its output type R", str(n - 1)),
    ]


@pytest.mark.slow
def test_thousands_of_tests_are_checked_against_the_machine_without_rereading_it_per_test() -> None:
    """Each test's name is looked up among those before it, and the final states its `expect result` may
    end in are found once (each test used to compare its name with every earlier test and filter every
    final state: 5,000 tests and final states took over five seconds)."""
    n = 5000
    lines = ["machine many {", '    agent w { prompt "p" }', '    start state s0 { agent w  do "x"  output int',
             *(f"        when output == {i} -> f{i}" for i in range(n)), "        -> mid }",
             '    state mid { agent w  do "x"  -> f0 }',
             *(f'    final state f{i} {{ result "{{{{ s0.output }}}}" }}' for i in range(n)),
             *(f"    test \"t{i}\" {{ reply s0 {i}  expect path [s0, f{i}]  expect result {i} }}" for i in range(n)),
             '    test "t7" { reply s0 -1  reply mid "y"  expect path [s0, mid]  expect result -1 }', "}"]
    first = next(i for i, line in enumerate(lines, 1) if line.startswith('    test "t7"'))
    diagnostics = check_text("\n".join(lines) + "\n", "many.fsm").diagnostics
    (twice,) = [d for d in diagnostics if d.code == "SW2001"]
    assert twice.span is not None and twice.span.start_pos.line == len(lines) - 1
    assert twice.help == f"give each test its own name (the first is at line {first})"
    results = [d for d in diagnostics if d.code == "SW6042"]
    assert [d.span.text if d.span else "" for d in results] == [*(str(i) for i in range(n)), "-1"]
    assert [d.notes for d in results[:2]] == [("'f0' has a result template",), ("'f1' has a result template",)]
    assert results[-1].notes == tuple(f"'f{i}' has a result template" for i in range(3))  # it may end in any
    assert len(diagnostics) == n + 2


@pytest.mark.slow
def test_thousands_of_branch_states_in_two_branches_and_entries_of_two_parallel_states_are_each_reported() -> None:
    """Every state two branches reach, and every entry two parallel states list, is one SW3063 at its own
    place (the states in two branches were gathered again for each transition, and each shared entry was
    looked for along the whole list)."""
    n = 2000
    lines = ["machine shared {", '    agent w { prompt "p" }', '    start state s0 { agent w  do "x"  -> p }',
             f"    state p {{ parallel [{', '.join(f'a{i}' for i in range(n))}]  -> q }}",
             f"    state q {{ parallel [{', '.join(f'b{i}' for i in range(n))}, a0, a1]  -> done }}",
             *(f'    branch state {x}{i} {{ agent w  do "x"  -> c{i} }}' for i in range(n) for x in "ab"),
             *(f'    branch state c{i} {{ agent w  do "x" }}' for i in range(n)), "    final state done", "}"]
    diagnostics = check_text("\n".join(lines) + "\n", "shared.fsm").diagnostics
    assert {d.code for d in diagnostics} == {"SW3063"}
    shared = [d for d in diagnostics if "is also a branch" in d.message]
    assert [(d.message, d.span.start_pos.line if d.span else 0) for d in shared] == [
        (f"branch '{a}' is also a branch of state 'p'", 5) for a in ("a0", "a1")]
    twice = [d for d in diagnostics if "is in two branches" in d.message]
    assert [d.message for d in twice] == [f"branch state 'c{i}' is in two branches" for i in range(n)]
    assert twice[0].label == "reached from 'a0' and from 'b0'"


@pytest.mark.slow
def test_a_test_expecting_the_output_of_each_of_thousands_of_states_on_its_path_counts_the_path_once() -> None:
    """How often the expected path visits a state is counted once per test, not once per `expect output`
    (counted for each, the cost grew with the square of the path)."""
    n = 8000
    names = [f"s{i}" for i in range(n)]
    lines = ["machine chain {", '    agent w { prompt "p" }',
             *(f'    {"start " if i == 0 else ""}state s{i} {{ agent w  do "x"  -> {(names[i + 1:] or ["done"])[0]} }}'
               for i in range(n)), "    final state done", '    test "along" {',
             *(f'        reply s{i} "r"' for i in range(n)), f"        expect path [{', '.join(names)}, done]",
             *(f'        expect output s{i} "r"' for i in range(n)), f'        expect output s{n - 1} visit 2 "r"',
             "    }", "}"]
    diagnostics = check_text("\n".join(lines) + "\n", "chain.fsm").diagnostics
    assert [(d.code, d.message, d.span.text if d.span else "") for d in diagnostics] == [
        ("SW7043", f"the expected path visits 's{n - 1}' once", "2")]


def test_the_output_of_a_parallel_state_of_a_thousand_branches_read_by_a_thousand_states() -> None:
    """The type of a parallel state's output is worked out from its branches once, not on every read of
    it (a thousand states reading the output of a thousand branches took five seconds)."""
    n = 1000
    lines = ["machine fan {", "    type R { ok: bool }", '    agent w { prompt "p" }',
             '    start state s0 { agent w  do "x"  -> par }',
             f"    state par {{ parallel [{', '.join(f'b{i}' for i in range(n))}]  join all  -> r0 }}",
             *(f'    branch state b{i} {{ agent w  do "x"  output R }}' for i in range(n)),
             *(f'    state r{i} {{ agent w  do "{{{{ par.output[{i}].{"nope" if i == n - 1 else "ok"} }}}}"  '
               f'when par.output[0].ok -> {f"r{i + 1}" if i + 1 < n else "done"}  -> done }}' for i in range(n)),
             "    final state done", "}"]
    diagnostics = check_text("\n".join(lines) + "\n", "fan.fsm").diagnostics
    assert [(d.code, d.message, d.span.text if d.span else "") for d in diagnostics] == [
        ("SW2006", "R has no field 'nope'", "nope")]


@pytest.mark.slow
def test_each_state_of_a_cycle_of_thousands_with_no_way_out_is_reported_with_the_cycle_named_once() -> None:
    """Every state of a cycle no run leaves is an SW3005 whose note names the cycle, made once for the
    cycle (it was made again for each of its states: 7,000 states took six seconds)."""
    n = 7000
    lines = ["machine loop {", '    agent w { prompt "p" }',
             *(f'    {"start " if i == 0 else ""}state s{i} {{ agent w  do "x"  -> s{(i + 1) % n} }}' for i in range(n)),
             "    final state done", "}"]
    diagnostics = check_text("\n".join(lines) + "\n", "loop.fsm").diagnostics
    stuck = [d for d in diagnostics if d.code == "SW3005"]
    assert [d.message for d in stuck] == [f"no final state can be reached from 's{i}'" for i in range(n)]
    names = ", ".join(f"'s{i}'" for i in range(12))  # the first twelve, as messages cut lists of states
    assert {d.notes for d in stuck} == {(f"from here the run ends up going round {names} and {n - 12} more",)}
    assert [d.code for d in diagnostics if d.code != "SW3005"] == ["SW3008", "SW7004"]  # the cycle; done


@pytest.mark.slow
def test_the_dimension_benchmark_runs_and_ends_with_its_result() -> None:
    bench = Path(__file__).resolve().parents[1] / "bench" / "dimension_scaling.py"
    done = subprocess.run([sys.executable, str(bench), "--scale", "0.02", "--repeat", "1"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT ")
    result = json.loads(last.removeprefix("RESULT "))
    assert {"type_chain_exponent", "misspellings_exponent", "targets_met"} <= result.keys()


def test_checking_a_file_leaves_no_cycles_behind() -> None:
    """`statewright check` runs with the cyclic collector off: whatever a check builds for a file must be
    freed by reference counting once its result is dropped (a template checker held in a cycle by its own
    narrowing once doubled the memory of checking a machine of thousands of states)."""
    import gc

    files = [p for p in sorted(VALID.glob("*/input.fsm")) if "\nuse " not in "\n" + p.read_text(encoding="utf-8")]
    texts = [(p.read_text(encoding="utf-8"), str(p)) for p in files]
    for text, path in texts:  # caches filled
        check_text(text, path)

    def alive() -> int:
        modules = (vars(type(o)).get("__module__") for o in gc.get_objects())
        return sum(1 for m in modules if isinstance(m, str) and m.startswith("statewright."))

    gc.collect()
    gc.disable()
    try:
        before = alive()
        for text, path in texts:
            check_text(text, path)
        assert alive() - before < 50  # a cache's new entry at most, not a file's tree
    finally:
        gc.enable()
