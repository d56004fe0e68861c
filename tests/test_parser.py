"""The parser front: the grammar has no conflicts, strings decode exactly, mistakes get named errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from statewright.grammar import ast, build_parser, parse_text, syntax_errors


def only_error(text: str) -> tuple[str, str, int, int]:
    result = parse_text(text, "t.fsm")
    assert result.machine is None
    [diag] = result.diagnostics.items
    pos = diag.span.start_pos
    return diag.code, diag.message, pos.line, pos.column


def test_the_grammar_has_no_conflicts() -> None:
    build_parser(strict=True, cache=False)  # raises on any shift/reduce or reduce/reduce conflict


@pytest.mark.parametrize(
    "keyword", ["description", "model", "result", "state", "input", "type", "agent", "max"]
)
def test_keywords_are_usable_as_field_and_entry_names(keyword: str) -> None:
    text = f"""machine m {{
    type T {{
        a: str "doc"
        {keyword}: int
    }}

    start state s {{
        agent w
        do "x"
        -> d
    }}

    final state d

    test "t" {{
        reply s {{ a 1  {keyword} "x" }}
    }}
}}
"""
    result = parse_text(text, "t.fsm")
    assert not result.diagnostics.items, [d.message for d in result.diagnostics]
    [type_decl] = result.machine.of(ast.TypeDecl)
    assert [f.name.value for f in type_decl.fields] == ["a", keyword]
    [test] = result.machine.of(ast.TestDecl)
    assert [e.key.value for e in test.items[0].value.value] == ["a", keyword]


def test_a_keyword_is_only_ever_a_whole_word() -> None:
    # a name that begins like a keyword the parser accepts there is read whole, never cut at the keyword
    assert only_error("machine m {\n    start statex {\n    }\n}\n")[:2] == ("SW1013", "missing 'state' keyword")
    code, message, _, _ = only_error('machine m {\n    start state a {\n        for x in xs max 2\n'
                                     '        doo "x"\n    }\n}\n')
    assert (code, message) == ("SW1002", "unexpected name 'doo'")


def test_parallel_join_and_for_each_read_into_their_nodes() -> None:
    result = parse_text("""machine m {
    start state r {
        parallel [a, b]
        join first 2 where output.ok
        -> d
    }
    state build {
        for i, f in plan.output.files max 9 concurrency 3
        agent w
        do "x"
        -> d
    }
}
""", "t.fsm")
    assert not result.diagnostics.items
    review, build = result.machine.of(ast.StateDecl)
    parallel, join = review.items[0], review.items[1]
    assert isinstance(parallel, ast.Parallel) and [n.value for n in parallel.branches] == ["a", "b"]
    assert isinstance(join, ast.Join) and join.rule.value == "first" and join.count is not None
    assert join.count.value == 2 and isinstance(join.guard, ast.Attribute)
    each = build.items[0]
    assert isinstance(each, ast.ForEach) and each.index is not None and each.index.value == "i"
    assert each.item.value == "f" and each.max is not None and each.max.value == 9
    assert each.concurrency is not None and each.concurrency.value == 3


def test_every_mention_of_a_name_is_one_string() -> None:
    # the compiler looks states, agents and inputs up by name everywhere; interned names compare by pointer
    result = parse_text("""machine m {
    input topic: str
    agent w { prompt "p" }
    start state a {
        agent w
        do "x"
        when a.output == topic -> b
        -> b
    }
    final state b
}
""", "t.fsm")
    assert not result.diagnostics.items
    a, b = result.machine.of(ast.StateDecl)
    agent_decl = result.machine.of(ast.AgentDecl)[0]
    uses_agent, _, when, otherwise = a.items
    assert isinstance(uses_agent, ast.AgentRef) and uses_agent.name.value is agent_decl.name.value
    assert isinstance(when, ast.Transition) and isinstance(otherwise, ast.Transition)
    assert when.target is not None and otherwise.target is not None
    assert when.target.value is otherwise.target.value is b.name.value
    assert isinstance(when.guard, ast.BinaryOp) and isinstance(when.guard.left, ast.Attribute)
    assert isinstance(when.guard.left.value, ast.NameExpr) and when.guard.left.value.name is a.name.value
    assert isinstance(when.guard.right, ast.NameExpr)
    assert when.guard.right.name is result.machine.of(ast.InputDecl)[0].name.value


def test_a_missing_brace_before_a_keyword_is_reported_at_the_keyword() -> None:
    code, message, line, column = only_error(
        'machine m {\n    type T {\n        a: str\n    agent w {\n    }\n}\n'
    )
    assert (code, message, line, column) == ("SW1002", "unexpected token 'agent'", 4, 5)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"tab\there"', "tab\there"),
        (r'"\\"', "\\"),
        (r'"\u00e9"', "é"),
        (r'"\ud83d\ude00"', "😀"),
        ('"{{ x }}"', "{{ x }}"),
    ],
)
def test_double_quoted_strings_decode_exactly(raw: str, value: str) -> None:
    result = parse_text(f"machine m {{\n    description {raw}\n}}\n")
    assert result.machine.items[0].text.value == value


def test_triple_quoted_strings_are_literal_and_dedented() -> None:
    text = 'machine m {\n    description """\n        First line.\n          Indented \\n kept.\n    """\n}\n'
    [desc] = parse_text(text).machine.of(ast.Description)
    assert desc.text.value == "First line.\n  Indented \\n kept."
    assert desc.text.triple


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (r'machine m { description "\q" }', "SW1006"),
        (r'machine m { description "\ud800" }', "SW1006"),
        ('machine m { description "open\n}', "SW1004"),
        ("machine m { start state a { when x = 1 -> b } }", "SW1010"),
        ("machine m { start state a { else -> b } }", "SW1011"),
        ("machine m { start state a { when x && y -> b } }", "SW1012"),
        ("machine m { final done }", "SW1013"),
        ("machine m { start state a { when x b } }", "SW1014"),
        ("machine m { state a: }", "SW1015"),
        ("machine m { state a { agent w; } }", "SW1001"),
        ("machine m {", "SW1003"),
        ("", "SW1003"),
    ],
)
def test_common_mistakes_get_named_errors(text: str, code: str) -> None:
    assert only_error(text)[0] == code


STATE_WITH = 'machine m {{\n    start state a {{\n        agent w\n        do "x"\n        {line}\n    }}\n' \
             '    final state b\n}}\n'


@pytest.mark.parametrize(
    ("line", "code", "message", "help"),
    [
        ("when output => b", "SW1014", "'=>' is not an arrow", "write '->'"),
        ("when output == 'x' -> b", "SW1001", "unexpected character \"'\"", 'strings use double quotes'),
        ("-> b;", "SW1001", "unexpected character ';'", "statements need no ';'"),
        ("when output.ok and -> b", "SW1002", "unexpected '->'", "an expression is missing before '->'"),
        ("when -> b", "SW1002", "unexpected '->'", "an expression is missing before '->'"),
    ],
)
def test_more_common_mistakes_are_named_in_the_message_or_the_help(line: str, code: str, message: str,
                                                                   help: str) -> None:
    [diag] = parse_text(STATE_WITH.format(line=line), "t.fsm").diagnostics.items
    assert (diag.code, diag.message) == (code, message)
    assert diag.help.startswith(help)


def test_a_block_left_open_before_the_next_declaration_says_its_brace_may_be_missing() -> None:
    text = 'machine m {\n    start state a {\n        agent w\n        do "x"\n        -> b\n\n' \
           '    final state b\n}\n'
    [diag] = parse_text(text, "t.fsm").diagnostics.items
    assert (diag.code, diag.message, diag.span.start_pos.line) == ("SW1002", "unexpected token 'final'", 7)
    assert diag.help == "the block before this line may be missing its closing '}'"


@pytest.mark.parametrize("mistake", syntax_errors.MISTAKES, ids=lambda m: f"{m.code}-{m.message[:24]}")
def test_every_example_in_the_table_of_mistakes_is_reported_as_that_mistake(
        mistake: syntax_errors.Mistake) -> None:
    # the table is how a syntax error gets its name: an example that no longer fails this way (after a
    # change to the grammar) would silently stop naming real mistakes
    for example in mistake.examples:
        [diag, *_] = parse_text(example, "t.fsm").diagnostics.items
        token = diag.span.text[len(mistake.before) : len(diag.span.text) - len(mistake.after)]
        word = syntax_errors._word_before(example, diag.span.start)  # the keyword before a ':' (SW1030)
        assert (diag.code, diag.message, diag.help) == (
            mistake.code, mistake.message.format(token=token, word=word),
            mistake.help.format(token=token, word=word)), example


def test_syntax_errors_never_name_lark_terminals() -> None:
    texts = [example for mistake in syntax_errors.MISTAKES for example in mistake.examples]
    texts += ["machine m { start state a { when x -> } }", "machine m { type T { a: } }", "machine m { = }"]
    for text in texts:
        for diag in parse_text(text, "t.fsm").diagnostics.items:
            assert "__" not in diag.message + diag.help and "ANON" not in diag.message + diag.help, text


def test_positions_are_one_based_characters() -> None:
    code, _, line, column = only_error('machine m {\n    description "é" ;\n}\n')
    assert (code, line, column) == ("SW1001", 2, 21)  # "é" is one column


def test_a_carriage_return_without_a_line_feed_is_an_error_where_it_stands() -> None:
    body = 'machine m {\n    agent w { prompt "You write." }\n    start state a { agent w do "x" -> b }\n    final state b\n}\n'
    assert parse_text(body.replace("\n", "\r\n")).machine is not None  # CRLF: line breaks as LF
    # a comment that an editor shows as ending at the CR; to the lexer it would take in the next line
    hidden = body.replace("    agent w {", "    # the writer\r    agent w {")
    code, message, line, column = only_error(hidden)
    assert (code, line, column) == ("SW1007", 2, 17)
    assert message == "a carriage return without a line feed"
    # in a string, in a triple-quoted one, at the end of the file; counted after the first
    for text in (body.replace('"x"', '"x\ry"'), body.replace('"x"', '"""\n  x\r  y\n"""'), body + "\r"):
        assert only_error(text)[0] == "SW1007", text
    code, message, line, _ = only_error(body.replace("\n", "\r").replace("\r", "\n", 1))
    assert (code, line) == ("SW1007", 2) and message.endswith("(and 3 more after it)")
    # what the escape means is still a carriage return, written as one
    assert parse_text(body.replace('"x"', '"x\\ry"')).machine is not None


def test_comments_are_collected_with_spans() -> None:
    result = parse_text("# head\nmachine m { # trailing\n}\n")
    assert [c.text for c in result.comments] == ["# head", "# trailing"]
    assert result.comments[1].span.start_pos.line == 2


def test_layout_does_not_change_the_tree() -> None:
    a = parse_text('machine m { start state a { agent w do "x" -> b } final state b }').machine
    b = parse_text(
        'machine m {\n  start state a {\n    agent w\n    do "x"\n    -> b\n  }\n\n  final state b\n}\n'
    ).machine
    assert a == b


def test_numbers_with_absurdly_many_digits_are_diagnosed() -> None:
    code, message, line, _ = only_error(
        "machine m {\n    limits {\n        steps " + "9" * 5000 + "\n    }\n}\n"
    )
    assert (code, line) == ("SW3015", 3)
    assert "5,000 digits" in message


# ---- walking the syntax tree ------------------------------------------------------------------------


def guard_of(expression: str) -> ast.Expr:
    machine = parse_text(f"machine m {{ start state s {{ when {expression} -> s }} }}").machine
    assert machine is not None
    [state] = machine.of(ast.StateDecl)
    guard = state.transitions[0].guard
    assert guard is not None
    return guard


def test_iter_expr_gives_each_expression_before_the_ones_inside_it_in_source_order() -> None:
    walked = list(ast.iter_expr(guard_of("len(output.fixes[0]) > -limit and not [a, 1]")))
    assert [type(e).__name__ for e in walked] == [
        "BinaryOp",  # and
        "BinaryOp", "Call", "Index", "Attribute", "NameExpr", "Literal", "UnaryOp", "NameExpr",  # left
        "UnaryOp", "ListExpr", "NameExpr", "Literal",  # right
    ]
    assert [e.name for e in walked if isinstance(e, ast.NameExpr)] == ["output", "limit", "a"]


def test_iter_expr_reversed_puts_every_expression_after_what_it_contains() -> None:
    walked = list(reversed(list(ast.iter_expr(guard_of("(a + b) * -c == [d]")))))
    position = {id(e): i for i, e in enumerate(walked)}
    for e in walked:
        assert all(position[id(child)] < position[id(e)] for child in ast.expr_children(e))


def test_iter_expr_walks_any_depth_without_recursion() -> None:
    expr: ast.Expr = ast.Literal(1)
    for _ in range(50_000):
        expr = ast.UnaryOp("-", expr)
    assert sum(1 for _ in ast.iter_expr(expr)) == 50_001


def test_iter_type_ref_gives_the_type_references_outermost_first() -> None:
    machine = parse_text('machine m { input x: list[list[Item]?]  input y: "a" | "b" }').machine
    assert machine is not None
    x, y = machine.of(ast.InputDecl)
    assert [type(t).__name__ for t in ast.iter_type_ref(x.type)] == [
        "ListType", "OptionalType", "ListType", "NamedType"]
    assert [type(t).__name__ for t in ast.iter_type_ref(y.type)] == ["EnumType"]


def test_every_broken_declaration_reports_its_own_syntax_error() -> None:
    text = """machine m {
    start state draft {
        agent writer
        do "Write." ;
        -> review
    }

    state review {
        agent writer
        do "Review."
        when output.ok = true -> done
    }

    state fine {
        agent writer
        do "Fine."
        -> done
    }

    state polish {
        else -> done
    }

    final state done
}
"""
    result = parse_text(text, "t.fsm")
    assert result.machine is None
    found = [(d.code, d.span.start_pos.line, d.span.start_pos.column) for d in result.diagnostics.items]
    assert found == [("SW1001", 4, 21), ("SW1010", 11, 24), ("SW1011", 21, 9)]


def test_a_missing_brace_does_not_cascade_into_later_declarations() -> None:
    text = 'machine m {\n    start state a {\n        agent w\n        do "x"\n        -> b\n\n    final state b\n}\n'
    result = parse_text(text, "t.fsm")
    assert len(result.diagnostics.items) == 1


# ---- reentrancy ----------------------------------------------------------------------------------


def test_files_parsed_in_two_threads_at_once_keep_their_own_comments_and_trees() -> None:
    import threading

    def source(tag: str, states: int) -> str:
        body = "".join(f"    # {tag} comment {i}\n    state {tag}{i} {{ agent w do \"x\" -> {tag}{i + 1} }}\n"
                       for i in range(states))
        return f"# {tag} head\nmachine {tag} {{\n{body}    final state {tag}{states}\n}}\n"

    texts = {"left": source("left", 300), "right": source("right", 200)}
    problems: list[str] = []
    start = threading.Barrier(2)

    def parse_many(tag: str) -> None:
        start.wait()
        for _ in range(20):
            result = parse_text(texts[tag], f"{tag}.fsm")
            comments = [c.text for c in result.comments]
            if result.machine is None or result.machine.name.value != tag:
                problems.append(f"{tag}: wrong tree")
            if len(comments) != texts[tag].count("#") or any(tag not in c for c in comments):
                problems.append(f"{tag}: comments {comments[:3]}...")
            if any(c.span.source.path != f"{tag}.fsm" for c in result.comments):
                problems.append(f"{tag}: a comment of another file")

    threads = [threading.Thread(target=parse_many, args=(tag,)) for tag in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []


def test_the_garbage_collector_is_back_on_after_parses_in_two_threads_overlap() -> None:
    import gc
    import threading

    from statewright.grammar.parser import paused_gc

    inside = threading.Event()
    leave = threading.Event()

    def hold() -> None:
        with paused_gc():
            inside.set()
            leave.wait(5)

    assert gc.isenabled()
    other = threading.Thread(target=hold)
    with paused_gc():  # the first pause ends while the other thread's is still on
        other.start()
        inside.wait(5)
    assert not gc.isenabled(), "the other thread's parse is still running"
    leave.set()
    other.join()
    assert gc.isenabled()


def test_what_a_pause_built_is_not_rescanned_by_the_next_young_collection() -> None:
    """After the last pause, the many objects built during it are in the oldest generation: the first
    allocation does not start a collection of all of them (a quarter of a second at 10,000 states)."""
    import gc

    from statewright.grammar.parser import _PROMOTED_FROM, paused_gc

    assert gc.isenabled() and gc.get_freeze_count() == 0
    with paused_gc():
        built = [[i] for i in range(_PROMOTED_FROM)]
        assert gc.get_count()[0] > gc.get_threshold()[0]  # a young collection is due
    assert gc.get_count()[0] < gc.get_threshold()[0]
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(built) in oldest and id(built[-1]) in oldest
    assert gc.get_freeze_count() == 0


def test_a_pause_leaves_objects_another_part_of_the_process_froze_frozen() -> None:
    import gc

    from statewright.grammar.parser import _PROMOTED_FROM, paused_gc

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            built = [[i] for i in range(_PROMOTED_FROM)]
        assert gc.get_freeze_count() == frozen > 0  # thawing would have released them
        assert id(built) not in {id(o) for o in gc.get_objects(generation=2)}  # not moved: still young
    finally:
        gc.unfreeze()


def test_a_small_spec_is_left_to_the_young_collections() -> None:
    """A pause that built a few objects (a language server's check of one spec) does not promote them:
    a young collection frees its reference cycles soonest."""
    import gc

    from statewright.grammar.parser import paused_gc

    gc.collect()
    with paused_gc():
        built = [[i] for i in range(2 * gc.get_threshold()[0])]
    assert id(built) not in {id(o) for o in gc.get_objects(generation=2)}


def test_a_bad_byte_after_a_byte_order_mark_is_at_the_column_an_editor_shows(tmp_path: Path) -> None:
    from statewright import api

    for bom in (b"", b"\xef\xbb\xbf"):  # the mark is not content: the columns are the same with and without
        path = tmp_path / "bom.fsm"
        path.write_bytes(bom + b'machine m { description "caf\xe9" }\n')
        [diag] = api.check_file(str(path)).diagnostics
        assert diag.code == "SW1005" and (diag.span.start_pos.line, diag.span.start_pos.column) == (1, 29), bom
