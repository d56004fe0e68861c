"""`statewright fmt`: one canonical layout, comments kept, nothing reordered, syntax errors refused."""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from statewright.compiler.views.formatter import (
    LINE_WIDTH,
    FormatResult,
    format_source,
    format_text,
    unified_diff,
)
from statewright.diagnostics import SourceFile
from statewright.grammar import parse_text

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.fsm"))


def fmt(source: str) -> str:
    """The canonical text of `source`, which must format without diagnostics."""
    result = format_text(source)
    assert [(d.code, d.message) for d in result.diagnostics] == []
    assert result.text is not None
    return result.text


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def state_body(text: str) -> str:
    """The formatted body of the single state in `machine m { state s { TEXT } }`, dedented."""
    lines = fmt(f"machine m {{ state s {{ {text} }} }}").split("\n")
    assert lines[:2] == ["machine m {", "    state s {"]
    assert lines[-3:] == ["    }", "}", ""]
    return textwrap.dedent("\n".join(lines[2:-3]))


def guard(expression: str) -> str:
    """How the formatter prints the guard `expression`."""
    line = state_body(f"when {expression} -> t")
    assert line.startswith("when ") and line.endswith(" -> t"), line
    return line[len("when "):-len(" -> t")]


def comments_of(text: str) -> Counter[str]:
    parsed = parse_text(text)
    return Counter(c.text.rstrip() for c in parsed.comments)


# ---- the whole layout ----------------------------------------------------------------------------

DESIGN_EXAMPLE = src('''
    # review.fsm — draft, critique, revise, publish
    machine review_pipeline {
        description "Write a technical article, have it critiqued, revise at most twice."

        input topic: str
        input audience: str = "engineers"

        model "openai/gpt-4o-mini"          # default for every agent and for the verifier
        limits { steps 30  cost_usd 0.50 }

        type Critique {
            score: int        "0–100"
            fixes: list[str]  "concrete fixes, one per item"
        }

        agent writer {
            prompt """
                You are a senior technical writer for {{ audience }}.
            """
            tools [std.python]
        }
        agent critic {
            model "anthropic/claude-haiku-4-5"
            prompt "You review drafts strictly against the rubric."
        }

        start state draft {
            agent writer
            do "Write an article about {{ topic }}."
            tell [critic]                       # listeners: who receives this state's output
            -> review
        }

        state review {
            agent critic
            do "Score the draft and list fixes."
            output Critique
            when output.score >= 85 -> publish                          # guard: evaluated by code
            when "the draft makes claims without sources" -> draft      # judged by the verifier
            -> revise max 2                                             # bounded edge
            otherwise -> failed
        }

        state revise {
            agent writer
            do "Apply these fixes: {{ review.output.fixes }}"
            tell [critic]
            -> review
        }

        final state publish { result "{{ revise.output or draft.output }}" }
        final state failed

        test "good draft publishes" {
            input { topic "FSMs" }
            reply draft "A draft."
            reply review { score 90  fixes [] }
            expect path [draft, review, publish]
        }
    }
''')

DESIGN_EXAMPLE_CANONICAL = src('''
    # review.fsm — draft, critique, revise, publish
    machine review_pipeline {
        description "Write a technical article, have it critiqued, revise at most twice."

        input topic: str
        input audience: str = "engineers"

        model "openai/gpt-4o-mini"  # default for every agent and for the verifier
        limits {
            steps 30
            cost_usd 0.5
        }

        type Critique {
            score: int "0–100"
            fixes: list[str] "concrete fixes, one per item"
        }

        agent writer {
            prompt """
                You are a senior technical writer for {{ audience }}.
            """
            tools [std.python]
        }

        agent critic {
            model "anthropic/claude-haiku-4-5"
            prompt "You review drafts strictly against the rubric."
        }

        start state draft {
            agent writer
            do "Write an article about {{ topic }}."
            tell [critic]  # listeners: who receives this state's output
            -> review
        }

        state review {
            agent critic
            do "Score the draft and list fixes."
            output Critique
            when output.score >= 85 -> publish  # guard: evaluated by code
            when "the draft makes claims without sources" -> draft  # judged by the verifier
            -> revise max 2  # bounded edge
            otherwise -> failed
        }

        state revise {
            agent writer
            do "Apply these fixes: {{ review.output.fixes }}"
            tell [critic]
            -> review
        }

        final state publish {
            result "{{ revise.output or draft.output }}"
        }

        final state failed

        test "good draft publishes" {
            input { topic "FSMs" }
            reply draft "A draft."
            reply review { score 90, fixes [] }
            expect path [draft, review, publish]
        }
    }
''')


def test_the_design_example_formats_to_the_canonical_layout() -> None:
    assert fmt(DESIGN_EXAMPLE) == DESIGN_EXAMPLE_CANONICAL


def test_canonical_text_is_left_unchanged() -> None:
    assert fmt(DESIGN_EXAMPLE_CANONICAL) == DESIGN_EXAMPLE_CANONICAL


def test_formatting_keeps_the_syntax_tree_of_the_design_example() -> None:
    assert parse_text(fmt(DESIGN_EXAMPLE)).machine == parse_text(DESIGN_EXAMPLE).machine


def test_a_machine_crammed_on_one_line_gets_one_statement_per_line() -> None:
    assert fmt('machine m { model "x" temperature 0.2 state a { agent w do "go" -> b } final state b }') == src('''
        machine m {
            model "x"
            temperature 0.2

            state a {
                agent w
                do "go"
                -> b
            }

            final state b
        }
    ''')


def test_the_output_ends_with_exactly_one_newline() -> None:
    assert fmt("machine m {}") == "machine m {}\n"
    assert fmt("\n\n  machine m {}\n\n\n\n") == "machine m {}\n"


# ---- blank lines ---------------------------------------------------------------------------------


def test_machine_items_of_one_group_sit_together_and_groups_are_one_blank_line_apart() -> None:
    source = src('''
        machine m {
            description "d"
            input a: str


            input b: int = 3
            model "x"


            verifier model "y"
            temperature 0
            limits { steps 3 }
            tool std.python
            tool lookup = "pkg.mod:lookup"
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            description "d"

            input a: str
            input b: int = 3

            model "x"
            verifier model "y"
            temperature 0
            limits {
                steps 3
            }

            tool std.python
            tool lookup = "pkg.mod:lookup"
        }
    ''')


def test_every_type_agent_state_and_test_is_set_apart_by_one_blank_line() -> None:
    source = 'machine m { type A {} type B {} agent a {} agent b {} state s state t test "x" {} test "y" {} }'
    assert fmt(source) == src('''
        machine m {
            type A {}

            type B {}

            agent a {}

            agent b {}

            state s

            state t

            test "x" {}

            test "y" {}
        }
    ''')


def test_items_are_never_moved_to_join_their_group() -> None:
    assert fmt('machine m { input a: str model "x" input b: str }') == src('''
        machine m {
            input a: str

            model "x"

            input b: str
        }
    ''')


def test_blank_lines_inside_blocks_are_removed() -> None:
    source = src('''
        machine m {
            state a {

                agent w


                do "go"

                -> b

            }
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            state a {
                agent w
                do "go"
                -> b
            }
        }
    ''')


# ---- each construct ------------------------------------------------------------------------------


def test_limits_put_one_limit_per_line() -> None:
    assert fmt("machine m { limits { steps 30  cost_usd 0.50 tokens 1000 seconds 60 } }") == src('''
        machine m {
            limits {
                steps 30
                cost_usd 0.5
                tokens 1000
                seconds 60
            }
        }
    ''')
    assert fmt("machine m { limits {  } }") == "machine m {\n    limits {}\n}\n"


def test_tool_declarations_keep_import_paths_and_put_options_one_per_line() -> None:
    source = 'machine m { tool std.http_get { allow ["example.com"]  timeout 10 } tool lookup="a.b:c" tool x {} }'
    assert fmt(source) == src('''
        machine m {
            tool std.http_get {
                allow ["example.com"]
                timeout 10
            }
            tool lookup = "a.b:c"
            tool x
        }
    ''')


def test_secrets_headers_and_query_keep_their_order_and_names_are_bare_where_they_can_be() -> None:
    source = ('machine m { tool std.http_get { headers { "Authorization": "Bearer ${K}", "X-Api-Key" "${K}" }'
              ' allow ["a.example"] # hosts\n secrets [K,] query { "key" "${K}" "two words" "x" } } }')
    assert fmt(source) == src('''
        machine m {
            tool std.http_get {
                headers {
                    Authorization "Bearer ${K}"
                    "X-Api-Key" "${K}"
                }
                allow ["a.example"]  # hosts
                secrets [K]
                query {
                    key "${K}"
                    "two words" "x"
                }
            }
        }
    ''')


def test_expectations_along_the_path_print_visit_and_contains_in_one_order() -> None:
    source = ('machine m { test "t" { expect output review visit  2 {score 88, fixes: []} '
              'expect output draft contains "x" expect instruction review visit 1 contains """a "b" c""" '
              'expect instruction draft "exact" allow  unused  replies } }')
    assert fmt(source) == src('''
        machine m {
            test "t" {
                expect output review visit 2 { score 88, fixes [] }
                expect output draft contains "x"
                expect instruction review visit 1 contains """a "b" c"""
                expect instruction draft "exact"
                allow unused replies
            }
        }
    ''')


def test_type_fields_are_name_colon_type_and_doc() -> None:
    source = src('''
        machine m {
            type T {
                a : int        "doc"
                b:list[ str ]
                c: "low"|"high" ?
                d: list["x" | "y"?]?
                e : Other? "other"
            }
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            type T {
                a: int "doc"
                b: list[str]
                c: "low" | "high"?
                d: list["x" | "y"?]?
                e: Other? "other"
            }
        }
    ''')


def test_agent_settings_go_one_per_line_and_lists_lose_trailing_commas() -> None:
    source = 'machine m { agent w { model "x"  temperature 0.7  tools [std.python, lookup,] memory last 6 ' \
             'fallbacks ["a", "b",] memory none } }'
    assert fmt(source) == src('''
        machine m {
            agent w {
                model "x"
                temperature 0.7
                tools [std.python, lookup]
                memory last 6
                fallbacks ["a", "b"]
                memory none
            }
        }
    ''')


def test_state_modifiers_are_written_start_then_final() -> None:
    assert fmt("machine m { final start state a }") == "machine m {\n    start final state a\n}\n"


def test_a_state_keeps_whether_it_was_written_with_braces() -> None:
    assert fmt("machine m { final state a final state b {} }") == src('''
        machine m {
            final state a

            final state b {}
        }
    ''')


def test_state_items_keep_their_order() -> None:
    assert state_body('-> z  retries 2 visits 3 tell [a,b,] output T agent w do "x" result "r"') == src('''
        -> z
        retries 2
        visits 3
        tell [a, b]
        output T
        agent w
        do "x"
        result "r"
    ''').rstrip("\n")


def test_every_kind_of_transition() -> None:
    assert state_body('when x>1->a max 2 when "done" -> b otherwise stay max 1 ->c otherwise->d') == src('''
        when x > 1 -> a max 2
        when "done" -> b
        otherwise stay max 1
        -> c
        otherwise -> d
    ''').rstrip("\n")


def test_parallel_states_write_their_branches_and_join_on_one_line_each() -> None:
    assert state_body("parallel[a,b,]join first 2 where output.ok and(x>1) ->done") == src('''
        parallel [a, b]
        join first 2 where output.ok and x > 1
        -> done
    ''').rstrip("\n")
    assert state_body("join all") == "join all"
    assert state_body("join first where not output.ok") == "join first where not output.ok"


def test_a_branch_state_is_written_with_its_modifier() -> None:
    assert fmt("machine m { branch state a { agent w do \"x\" } }") == src('''
        machine m {
            branch state a {
                agent w
                do "x"
            }
        }
    ''')


def test_a_map_writes_its_names_list_bound_and_concurrency_in_one_line() -> None:
    assert state_body("for i ,f in a.output.files max 20 concurrency 4 agent w") == src('''
        for i, f in a.output.files max 20 concurrency 4
        agent w
    ''').rstrip("\n")
    assert state_body("for f in (xs)  max 3") == "for f in xs max 3"


def test_tool_calls_write_each_argument_as_name_equals_expression() -> None:
    assert state_body("call std.python(code=engineer.output.code,timeout = 120.0,)") == (
        "call std.python(code = engineer.output.code, timeout = 120.0)"
    )
    assert state_body("call lookup( )") == "call lookup()"


def test_test_blocks_write_short_objects_on_one_line_with_commas_between_entries() -> None:
    source = src('''
        machine m {
            test "t" {
                input {
                    topic: "FSMs",
                    audience "devs"
                }
                reply draft "A draft."
                reply review { score: 90, fixes: [], meta: { ok true  none_ none } }
                reply critique { score 90 issues [] }
                reply empty {}
                verdict review "the draft is sourced"
                verdict review none
                expect path [draft, review,]
                expect final done
                expect result -1.5
                expect failure steps
            }
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            test "t" {
                input { topic "FSMs", audience "devs" }
                reply draft "A draft."
                reply review { score 90, fixes [], meta { ok true, none_ none } }
                reply critique { score 90, issues [] }
                reply empty {}
                verdict review "the draft is sourced"
                verdict review none
                expect path [draft, review]
                expect final done
                expect result -1.5
                expect failure steps
            }
        }
    ''')


def test_an_object_too_long_for_its_line_puts_one_entry_per_line_without_colons_or_commas() -> None:
    long = "x" * 60
    source = (f'machine m {{ test "t" {{ reply review {{ score: 90, fixes: ["{long}"], '
              'meta: { ok true  none_ none } } } }')
    assert fmt(source) == src(f'''
        machine m {{
            test "t" {{
                reply review {{
                    score 90
                    fixes ["{long}"]
                    meta {{ ok true, none_ none }}
                }}
            }}
        }}
    ''')


def test_a_value_that_fills_the_line_width_exactly_stays_on_one_line_and_one_column_more_breaks() -> None:
    def formatted(width: int) -> str:
        # `        reply r { text "` is 24 columns and `" }` 3 more: the string fills the rest of `width`
        return fmt(f'machine m {{ test "t" {{ reply r {{ text "{"a" * (width - 27)}" }} }} }}')

    fits = formatted(LINE_WIDTH)
    assert max(len(line) for line in fits.splitlines()) == LINE_WIDTH
    assert len(fits.splitlines()) == 5
    broken = formatted(LINE_WIDTH + 1)
    assert f'        reply r {{\n            text "{"a" * (LINE_WIDTH - 26)}"\n        }}\n' in broken


def test_wide_characters_count_two_columns_towards_the_line_width() -> None:
    # 40 wide characters are 80 columns: with the 27 around them, one line would be 107 columns wide
    wide = fmt('machine m { test "t" { reply r { text "' + "字" * 40 + '" } } }')
    assert '        reply r {\n            text "' in wide
    narrow = fmt('machine m { test "t" { reply r { text "' + "z" * 40 + '" } } }')
    assert '        reply r { text "' + "z" * 40 + '" }\n' in narrow


def test_an_object_holding_a_string_written_over_several_lines_stays_a_block() -> None:
    source = 'machine m { test "t" { reply r { text """\n    two\n    lines\n""", n 1 } } }'
    out = fmt(source)
    assert '        reply r {\n            text """\n                two\n                lines\n' in out
    assert fmt(out) == out


def test_lists_holding_objects_stay_on_one_line_when_they_fit_else_put_each_item_on_its_own_line() -> None:
    source = 'machine m { test "t" { reply r [{q "a" n 1}, {}, "x", [ {y 2} ]] expect result [[1, 2], {}, []] } }'
    assert fmt(source) == src('''
        machine m {
            test "t" {
                reply r [{ q "a", n 1 }, {}, "x", [{ y 2 }]]
                expect result [[1, 2], {}, []]
            }
        }
    ''')
    long = "y" * 70
    source = f'machine m {{ test "t" {{ reply r [{{q "{long}" n 1}}, {{}}, "x", [ {{y 2}} ]] }} }}'
    assert fmt(source) == src(f'''
        machine m {{
            test "t" {{
                reply r [
                    {{ q "{long}", n 1 }},
                    {{}},
                    "x",
                    [{{ y 2 }}],
                ]
            }}
        }}
    ''')


def test_an_object_key_spelled_like_a_keyword_reads_back_as_a_key() -> None:
    source = 'machine m { test "t" { reply r { score: 1, model: "x", state: {}, output: 2, note "n" } } }'
    assert fmt(source) == src('''
        machine m {
            test "t" {
                reply r { score 1, model "x", state {}, output 2, note "n" }
            }
        }
    ''')


def test_an_input_default_that_is_an_object_is_one_line_when_it_fits_else_a_block() -> None:
    assert fmt('machine m { input cfg: Config = { depth 2 tags ["a"] } }') == src('''
        machine m {
            input cfg: Config = { depth 2, tags ["a"] }
        }
    ''')
    tags = ", ".join(f'"tag{i}"' for i in range(12))
    assert fmt(f"machine m {{ input cfg: Config = {{ depth 2, tags [{tags}] }} }}") == src(f'''
        machine m {{
            input cfg: Config = {{
                depth 2
                tags [{tags}]
            }}
        }}
    ''')


# ---- expressions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "printed"),
    [
        ("(a and b) or c", "a and b or c"),
        ("a and (b or c)", "a and (b or c)"),
        ("(a or b) or c", "a or b or c"),
        ("a or (b or c)", "a or (b or c)"),
        ("not (a == b)", "not a == b"),
        ("(not a) == b", "(not a) == b"),
        ("not (a and b)", "not (a and b)"),
        ("not not a", "not not a"),
        ("(a < b) == c", "(a < b) == c"),
        ("a == (b < c)", "a == (b < c)"),
        ("(a - b) - c", "a - b - c"),
        ("a - (b - c)", "a - (b - c)"),
        ("(a * b) + c", "a * b + c"),
        ("a * (b + c)", "a * (b + c)"),
        ("a % (b * c)", "a % (b * c)"),
        ("-(a.b)", "-a.b"),
        ("(-a).b", "(-a).b"),
        ("- - a", "--a"),
        ("-(a + b)", "-(a + b)"),
        ("(a + b)[0]", "(a + b)[0]"),
        ("((x))[((0))]", "x[0]"),
        ("f((a), (b or c))", "f(a, b or c)"),
        ("len( output.fixes ) >= 2", "len(output.fixes) >= 2"),
        ("visits(review)<3", "visits(review) < 3"),
        ("x not in [1, 2,]", "x not in [1, 2]"),
        ("not (x in y)", "not x in y"),
        ("(not x) in y", "(not x) in y"),
        ("(a in b) in c", "(a in b) in c"),
        ("output . score>=85", "output.score >= 85"),
        ('review.output["key"] == none', 'review.output["key"] == none'),
        ("true != false", "true != false"),
        ("(1).real", "1.real"),
        ("(\"s\").x", '"s".x'),
        ("[]", "[]"),
    ],
)
def test_guards_are_printed_with_the_fewest_parentheses_that_keep_their_meaning(written: str, printed: str) -> None:
    assert guard(written) == printed
    assert parse_text(fmt(f"machine m {{ state s {{ when {written} -> t }} }}")).machine == parse_text(
        f"machine m {{ state s {{ when {written} -> t }} }}"
    ).machine


# ---- numbers and strings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "printed"),
    [("30", "30"), ("007", "7"), ("0.50", "0.5"), ("1e3", "1000.0"), ("1E-7", "1e-07"), ("2.5e+20", "2.5e+20"),
     ("1e999", "1e999"), ("123456789.987654321", "123456789.98765433"), ("0.1", "0.1")],
)
def test_numbers_are_printed_so_they_read_back_as_the_same_value(written: str, printed: str) -> None:
    assert fmt(f"machine m {{ temperature {written} }}") == f"machine m {{\n    temperature {printed}\n}}\n"


def test_negative_values_keep_their_sign() -> None:
    assert fmt("machine m { input a: float = - 0.0 input b: int = -3 }").split("\n")[1:3] == [
        "    input a: float = -0.0",
        "    input b: int = -3",
    ]


@pytest.mark.parametrize(
    ("written", "printed"),
    [
        (r'"plain"', r'"plain"'),
        (r'"quote \" backslash \\ done"', r'"quote \" backslash \\ done"'),
        (r'"line\nbreak\ttab\rreturn"', r'"line\nbreak\ttab\rreturn"'),
        ('"raw\ttab"', r'"raw\ttab"'),
        (r'"\u00e9\u20ac \u0041"', '"é€ A"'),
        (r'"bell \u0007 nul \u0000 del \u007f next \u0085 sep \u2028"',
         r'"bell \u0007 nul \u0000 del \u007f next \u0085 sep \u2028"'),
        (r'"{{ topic }} # not a comment"', r'"{{ topic }} # not a comment"'),
        ('"😀"', '"😀"'),
        ('""', '""'),
    ],
)
def test_double_quoted_strings_are_printed_with_escapes(written: str, printed: str) -> None:
    assert fmt(f"machine m {{ description {written} }}") == f"machine m {{\n    description {printed}\n}}\n"


def test_an_escaped_surrogate_pair_is_printed_as_the_character_it_encodes() -> None:
    assert fmt(r'machine m { description "smile \uD83D\uDE00" }') == 'machine m {\n    description "smile 😀"\n}\n'


def test_a_multi_line_value_written_with_escapes_stays_on_one_line() -> None:
    assert fmt(r'machine m { agent a { prompt "one\ntwo\n\nthree" } }').split("\n")[2] == (
        r'        prompt "one\ntwo\n\nthree"'
    )


def test_triple_quoted_blocks_are_reindented_to_their_block() -> None:
    source = src('''
        machine m {
        agent writer {
        prompt """
              You write for {{ audience }}.
                Indented "quoted" line.

              Last line.
                  """
        }
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            agent writer {
                prompt """
                    You write for {{ audience }}.
                      Indented "quoted" line.

                    Last line.
                """
            }
        }
    ''')


def test_a_triple_quoted_block_with_text_on_its_first_line_is_reindented() -> None:
    assert state_body('do """first\n        second\n    """') == src('''
        do """
            first
                    second
        """
    ''').rstrip("\n")


def test_triple_quoted_text_written_on_one_line_stays_on_one_line() -> None:
    assert fmt('machine m { description """Say "yes" or "no" \\n."""  }') == (
        'machine m {\n    description """Say "yes" or "no" \\n."""\n}\n'
    )


def test_triple_quoted_strings_deeper_in_a_statement_follow_its_indentation() -> None:
    source = 'machine m { test "t" { reply r { text """\n  multi\n  line\n  """ } } }'
    assert fmt(source) == src('''
        machine m {
            test "t" {
                reply r {
                    text """
                        multi
                        line
                    """
                }
            }
        }
    ''')


def test_a_triple_quoted_string_that_would_not_read_back_becomes_double_quoted() -> None:
    # a raw control character inside triple quotes would be invisible in the file
    assert fmt('machine m { description """a\x07b""" }') == 'machine m {\n    description "a\\u0007b"\n}\n'


def test_a_triple_quoted_block_ending_in_a_quote_stays_a_block() -> None:
    assert fmt('machine m { description """\n  say "hi"\n""" }') == src('''
        machine m {
            description """
                say "hi"
            """
        }
    ''')


def test_strings_inside_guards_keep_their_kind() -> None:
    assert guard('output.verdict == """ok"""') == 'output.verdict == """ok"""'
    assert state_body('when """the draft cites "sources" """ -> t') == 'when """the draft cites "sources" """ -> t'


# ---- comments ------------------------------------------------------------------------------------


def test_comments_on_their_own_line_stay_before_the_next_statement_at_its_indentation() -> None:
    source = src('''
        machine m {
        # the default model
                model "x"
            state s {
          # first we write
                agent w
            }
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            # the default model
            model "x"

            state s {
                # first we write
                agent w
            }
        }
    ''')


def test_trailing_comments_stay_at_the_end_of_their_line_two_spaces_after_the_code() -> None:
    source = src('''
        machine m {   # the machine
            model "x"#no space
            state s {        # opening
                -> t            # always
            }   # closing
        }     # the end
    ''')
    assert fmt(source) == src('''
        machine m {  # the machine
            model "x"  #no space

            state s {  # opening
                -> t  # always
            }  # closing
        }  # the end
    ''')


def test_comments_at_the_end_of_a_block_stay_at_the_end_of_that_block() -> None:
    source = src('''
        machine m {
            state s {
                -> t
                # more transitions later
            }
            state empty {
                # nothing yet
            }
            # more states later
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            state s {
                -> t
                # more transitions later
            }

            state empty {
                # nothing yet
            }
            # more states later
        }
    ''')


def test_blank_line_separated_comment_groups_keep_one_blank_line() -> None:
    source = src('''
        # file header


        # more header

        machine m {
            model "x"



            # about the next setting

            # directly above it
            temperature 0.2
            # end of machine one


            # end of machine two
        }


        # after the machine
    ''')
    assert fmt(source) == src('''
        # file header

        # more header

        machine m {
            model "x"

            # about the next setting

            # directly above it
            temperature 0.2
            # end of machine one

            # end of machine two
        }

        # after the machine
    ''')


def test_a_comment_inside_an_expression_moves_to_its_own_line_before_the_statement() -> None:
    source = src('''
        machine m {
            state s {
                when output.score >= 85 and  # the bar
                     # and no fixes
                     not output.fixes -> done  # ship it
            }
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            state s {
                # the bar
                # and no fixes
                when output.score >= 85 and not output.fixes -> done  # ship it
            }
        }
    ''')


def test_a_comment_between_a_keyword_and_its_brace_moves_before_the_block() -> None:
    source = "machine m {\n    start # the entry\n    state s\n    { -> t }\n}\n"
    assert fmt(source) == src('''
        machine m {
            # the entry
            start state s {
                -> t
            }
        }
    ''')


def test_comments_inside_one_line_lists_move_before_the_statement() -> None:
    source = src('''
        machine m {
            agent a {
                tools [
                    std.python,  # runs code
                    lookup,      # our own
                ]
            }
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            agent a {
                # runs code
                # our own
                tools [std.python, lookup]
            }
        }
    ''')


def test_comments_inside_objects_stay_with_their_entries() -> None:
    source = src('''
        machine m {
            test "t" {
                reply review {   # a passing review
                    # high enough
                    score 90,  # the bar is 85
                    fixes []
                    # nothing else
                }  # done
                reply r [
                    { a 1 }  # first
                    , { b 2 }
                ]
            }
        }
    ''')
    assert fmt(source) == src('''
        machine m {
            test "t" {
                reply review {  # a passing review
                    # high enough
                    score 90  # the bar is 85
                    fixes []
                    # nothing else
                }  # done
                reply r [
                    { a 1 },  # first
                    { b 2 },
                ]
            }
        }
    ''')


def test_a_comment_keeps_its_text_but_loses_trailing_whitespace() -> None:
    assert fmt("machine m {\n    #  spaced   text  \t\n}\n") == "machine m {\n    #  spaced   text\n}\n"


def test_no_comment_is_lost_from_a_file_full_of_them() -> None:
    source = src('''
        #a
        machine #b
        m #c
        { #d
            limits #e
            { #f
                steps #g
                3 #h
            } #i
            type #j
            T { a #k
            : #l
            int #m
            } #n
            state #o
            s #p
            #q
        } #r
        #s
    ''')
    out = fmt(source)
    assert comments_of(out) == comments_of(source)
    assert len(comments_of(source)) == 19
    assert fmt(out) == out


# ---- refusals, line endings, odd input ------------------------------------------------------------


def test_a_file_with_a_syntax_error_is_refused_with_diagnostics_and_no_text() -> None:
    result = format_text("machine m {\n    state s { when x = 1 -> t }\n}\n", "flow.fsm")
    assert result.text is None
    assert [d.code for d in result.diagnostics] == ["SW1010"]
    assert result.diagnostics[0].span is not None
    assert result.diagnostics[0].span.label() == "flow.fsm:2:22"


@pytest.mark.parametrize("source", ["", "machine m {", "machine m { state }", 'machine m { description "open }'])
def test_broken_files_are_refused(source: str) -> None:
    result = format_text(source)
    assert result.text is None
    assert result.diagnostics and all(d.code.startswith("SW10") for d in result.diagnostics)


def test_unknown_names_and_types_are_formatted_all_the_same() -> None:
    source = "machine m { state s { agent nobody output NoSuchType when ghost.x>1 -> nowhere } }"
    assert fmt(source) == src('''
        machine m {
            state s {
                agent nobody
                output NoSuchType
                when ghost.x > 1 -> nowhere
            }
        }
    ''')


def test_crlf_input_formats_like_lf_input_and_the_output_uses_lf() -> None:
    crlf = DESIGN_EXAMPLE.replace("\n", "\r\n")
    out = fmt(crlf)
    assert "\r" not in out
    assert out == DESIGN_EXAMPLE_CANONICAL


def test_tab_indented_input_is_reindented_with_spaces() -> None:
    source = 'machine m {\n\tagent a {\n\t\tprompt """\n\t\t\tYou write.\n\t\t\t\tIndented.\n\t\t"""\n\t}\n}\n'
    assert fmt(source) == src('''
        machine m {
            agent a {
                prompt """
                    You write.
                    \tIndented.
                """
            }
        }
    ''')


def test_the_deepest_expression_the_parser_accepts_is_formatted() -> None:
    deepest = None
    expression = "x"
    for _ in range(1000):
        expression = f"({expression} + 1)"
        source = f"machine m {{ state s {{ when {expression} > 0 -> t }} }}"
        if parse_text(source).diagnostics.items:
            break
        deepest = source
    assert deepest is not None
    out = fmt(deepest)
    assert "(" not in out  # a left-leaning chain of additions needs no parentheses at all
    assert parse_text(out).machine == parse_text(deepest).machine


def test_format_source_reads_a_source_file() -> None:
    result = format_source(SourceFile("flow.fsm", "machine m{model \"x\"}"))
    assert result == FormatResult('machine m {\n    model "x"\n}\n', [])


# ---- diffs ---------------------------------------------------------------------------------------


def test_unified_diff_shows_the_changed_lines_between_the_original_and_the_formatted_file() -> None:
    old = 'machine m { model "x" }\n'
    diff = unified_diff(old, fmt(old), "flow.fsm")
    assert diff.splitlines()[:2] == ["--- flow.fsm.orig", "+++ flow.fsm"]
    assert '-machine m { model "x" }' in diff.splitlines()
    assert '+    model "x"' in diff.splitlines()


def test_unified_diff_of_equal_texts_is_empty() -> None:
    assert unified_diff("machine m {}\n", "machine m {}\n", "flow.fsm") == ""


def test_unified_diff_marks_a_missing_final_newline() -> None:
    diff = unified_diff("machine m {}", "machine m {}\n", "flow.fsm")
    assert "\\ No newline at end of file" in diff


# ---- the bundled examples and the documentation --------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_bundled_example_is_canonical(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert unified_diff(text, fmt(text), path.name) == ""


def _doc_machines() -> list[str]:
    text = (ROOT / "docs" / "formatting.md").read_text(encoding="utf-8")
    return [b for b in re.findall(r"```fsm\n(.*?)```", text, re.DOTALL) if re.match(r"(#[^\n]*\n)*machine ", b)]


def test_the_formatting_page_shows_what_fmt_really_does() -> None:
    before, after, inline_before, inline_after = _doc_machines()
    assert fmt(before) == after
    assert fmt(inline_before) == inline_after
    assert fmt(after) == after and fmt(inline_after) == inline_after


def test_a_reply_that_calls_tools_is_one_line_with_its_arguments_inline() -> None:
    written = src("""
        machine m {
            tool lookup = "pkg.mod:lookup"
            agent a {
                prompt "P."
                tools [std.write_file, lookup]
            }
            start state s {
                agent a
                do "Go."
                -> done
            }
            final state done
            test "t" {
                reply   s  call std.write_file( path="a.txt" , content = "x\\ny" ),lookup(q = {key "k"  n 2}, tags = [ "a","b" ],)
                reply s "ok"
                expect final done
            }
        }
    """)
    out = fmt(written)
    assert ('        reply s call std.write_file(path = "a.txt", content = "x\\ny"), '
            'lookup(q = { key "k", n 2 }, tags = ["a", "b"])\n') in out
    assert fmt(out) == out
