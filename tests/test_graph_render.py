"""Graph rendering: the same picture in Mermaid and Graphviz dot, every label escaped for its format,
and guard expressions written back as source text."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statewright.compiler import ir
from statewright.compiler.views.graph import dot_text, mermaid_text, render_graph
from statewright.compiler.views.source_text import expr_to_source
from statewright.grammar import ast, parse_text

HAVE_CHECKER = importlib.util.find_spec("statewright.compiler.checks") is not None
needs_checker = pytest.mark.skipif(not HAVE_CHECKER, reason="the compiler's checks are not available yet")

# Labels an author can write that must not break either format or change what it shows.
HOSTILE = (
    'say "hi"\n|x| {{ y }} \\N \\ #quot; <b>&amp; `md` $$x$$ %% ; end é 日本 🙂 \u202eevil\u200b \x00\t'
)


def machine(*states: ir.State, start: str = "draft", name: str = "review") -> ir.Machine:
    return ir.Machine(
        name=name, description="", inputs=(), model="openai/gpt-4o-mini", verifier_model="openai/gpt-4o-mini",
        temperature=None, limits=ir.Limits(), types=(), tools=(), agents=(), states=states, start=start,
    )


def guard(source: str) -> ast.Expr:
    """The expression tree the parser builds for `source`."""
    parsed = parse_text(f"machine m {{ start state a {{ call t(x = {source}) }} }}")
    assert parsed.machine is not None, [d.message for d in parsed.diagnostics]
    state = parsed.machine.of(ast.StateDecl)[0]
    call = next(i for i in state.items if isinstance(i, ast.ToolCall))
    return call.args[0].value


REVIEW = machine(
    ir.State("draft", "agent", transitions=(ir.Transition("always", "review"),)),
    ir.State("review", "agent", visits=3, transitions=(
        ir.Transition("guard", "publish", guard=guard("output.score >= 85")),
        ir.Transition("condition", "draft", condition="the draft makes claims without sources"),
        ir.Transition("always", "revise", max=2),
        ir.Transition("otherwise", "ask"),
    )),
    ir.State("revise", "agent", transitions=(ir.Transition("always", "review"),)),
    ir.State("ask", "agent", transitions=(
        ir.Transition("guard", "publish", guard=guard('output == "yes"')),
        ir.Transition("stay", "ask", max=1),
        ir.Transition("otherwise", "failed"),
    )),
    ir.State("publish", "final", final=True),
    ir.State("failed", "final", final=True),
)


# ---- whole pictures ---------------------------------------------------------------------------------


def test_mermaid_draws_a_flowchart_with_start_marker_final_circles_and_styled_edges() -> None:
    assert render_graph(REVIEW, "mermaid") == textwrap.dedent("""\
        flowchart TD
            sw_start(( ))
            s_draft("draft")
            s_review("review<br>visits 3")
            s_revise("revise")
            s_ask("ask")
            s_publish((("publish")))
            s_failed((("failed")))
            sw_start --> s_draft
            s_draft --> s_review
            s_review ==>|"output.score #62;= 85"| s_publish
            s_review -.->|"the draft makes claims without sources"| s_draft
            s_review -->|"max 2"| s_revise
            s_review -.->|"otherwise"| s_ask
            s_revise --> s_review
            s_ask ==>|"output == #34;yes#34;"| s_publish
            s_ask -.->|"stay<br>max 1"| s_ask
            s_ask -.->|"otherwise"| s_failed
            linkStyle 3 stroke-dasharray:6 4,stroke:#c2410c,color:#c2410c
            linkStyle 5 stroke-dasharray:2 3
            linkStyle 6 stroke:#c2410c,color:#c2410c
            linkStyle 8 stroke-dasharray:2 3
            linkStyle 9 stroke-dasharray:2 3
            style sw_start fill:#333,stroke:#333
        """)


def test_dot_draws_a_digraph_with_a_point_start_double_circle_finals_and_styled_edges() -> None:
    assert render_graph(REVIEW, "dot") == textwrap.dedent("""\
        digraph "review" {
            node [shape=box, style=rounded, fontname="Helvetica"];
            edge [fontname="Helvetica", fontsize=10];
            "(start)" [shape=point, width=0.15, label=""];
            "draft" [label="draft"];
            "review" [label="review\\nvisits 3"];
            "revise" [label="revise"];
            "ask" [label="ask"];
            "publish" [label="publish", shape=doublecircle];
            "failed" [label="failed", shape=doublecircle];
            "(start)" -> "draft";
            "draft" -> "review";
            "review" -> "publish" [label="output.score >= 85", style=bold];
            "review" -> "draft" [label="the draft makes claims without sources", style=dashed, \
color="#c2410c", fontcolor="#c2410c"];
            "review" -> "revise" [label="max 2"];
            "review" -> "ask" [label="otherwise", style=dotted];
            "revise" -> "review" [color="#c2410c", fontcolor="#c2410c"];
            "ask" -> "publish" [label="output == \\"yes\\"", style=bold];
            "ask" -> "ask" [label="stay\\nmax 1", style=dotted];
            "ask" -> "failed" [label="otherwise", style=dotted];
        }
        """)


FAN_OUT = machine(
    ir.State("reviews", "parallel", parallel=ir.Parallel(("style", "facts"), ir.Join("first", 1, guard("output.ok"))),
             transitions=(ir.Transition("always", "build"),)),
    ir.State("style", "agent", branch="style"),
    ir.State("facts", "agent", branch="facts", transitions=(ir.Transition("always", "facts_note"),)),
    ir.State("facts_note", "agent", branch="facts"),
    ir.State("build", "agent", each=ir.Each("file", guard("files"), 20, "i", 4),
             transitions=(ir.Transition("always", "done"),)),
    ir.State("done", "final", final=True),
    start="reviews",
)


def test_a_parallel_state_draws_its_branches_in_a_box_a_join_node_and_a_map_its_list() -> None:
    mermaid = render_graph(FAN_OUT, "mermaid")
    assert textwrap.dedent("""\
        s_reviews{{"reviews<br>parallel"}}
        subgraph b_reviews["branches of reviews"]
            s_style("style")
            s_facts("facts")
            s_facts_note("facts_note")
        end
        j_reviews[/"join first 1<br>where output.ok"\\]
        s_build[["build<br>for i, file in files<br>max 20, 4 at once"]]""") in textwrap.dedent(
        "\n".join(line[4:] for line in mermaid.splitlines()))
    for edge in ('s_reviews -->|"branch"| s_style', 's_reviews -->|"branch"| s_facts',
                 's_style -.->|"done"| j_reviews', 's_facts_note -.->|"done"| j_reviews',
                 "j_reviews --> s_build", "s_facts --> s_facts_note"):
        assert f"    {edge}\n" in mermaid
    dot = render_graph(FAN_OUT, "dot")
    assert '    "reviews" [label="reviews\\nparallel", shape=hexagon];\n' in dot
    assert '    subgraph "cluster_reviews" {\n        label="branches of reviews";\n' in dot
    assert '    "(join reviews)" [label="join first 1\\nwhere output.ok", shape=invtrapezium];\n' in dot
    assert '    "build" [label="build\\nfor i, file in files\\nmax 20, 4 at once", peripheries=2];\n' in dot
    assert '    "(join reviews)" -> "build";\n' in dot and '    "facts_note" -> "(join reviews)" [' in dot


def test_an_unknown_format_is_a_value_error_naming_the_formats() -> None:
    with pytest.raises(ValueError, match="mermaid, dot"):
        render_graph(REVIEW, "svg")


def test_rendering_is_deterministic_across_hash_seeds() -> None:
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_graph_render as t; "
        "from statewright.compiler.views.graph import render_graph; "
        "print(render_graph(t.REVIEW, 'mermaid') + render_graph(t.REVIEW, 'dot'))"
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)], env=env,
                              capture_output=True, text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert outputs.pop().startswith("flowchart TD\n")


# ---- edge kinds -----------------------------------------------------------------------------------


def edge_lines(m: ir.Machine, fmt: str) -> list[str]:
    arrow = "->" if fmt == "dot" else "-"
    lines = render_graph(m, fmt).splitlines()
    return [line.strip() for line in lines if arrow in line and "start" not in line]


def test_a_long_condition_is_shortened_to_forty_characters_with_an_ellipsis() -> None:
    m = machine(
        ir.State("draft", "agent", transitions=(
            ir.Transition("condition", "done",
                          condition="the article   covers\nevery key point and cites a source for each"),
            ir.Transition("always", "done"),
        )),
        ir.State("done", "final", final=True),
    )
    [label] = re.findall(r'label="([^"]*)"', edge_lines(m, "dot")[0])
    assert label == "the article covers every key point and…"
    assert len(label) <= 40


def test_a_traceback_goes_to_a_state_no_later_in_breadth_first_order_and_stay_is_no_traceback() -> None:
    m = machine(
        ir.State("late", "agent", transitions=(ir.Transition("always", "draft"),)),  # declared first
        ir.State("draft", "agent", transitions=(
            ir.Transition("guard", "late", guard=guard("visits(draft) > 1")),
            ir.Transition("condition", "draft", condition="try again"),
            ir.Transition("stay", "draft", max=2),
        )),
        start="draft",
    )
    dot = render_graph(m, "dot")
    assert '"late" -> "draft" [color="#c2410c", fontcolor="#c2410c"];' in dot
    assert '"draft" -> "late" [label="visits(draft) > 1", style=bold];' in dot
    assert '"draft" -> "draft" [label="try again", style=dashed, color="#c2410c"' in dot
    assert '"draft" -> "draft" [label="stay\\nmax 2", style=dotted];' in dot


def test_states_the_start_never_reaches_are_still_drawn() -> None:
    m = machine(
        ir.State("draft", "agent", transitions=(ir.Transition("always", "done"),)),
        ir.State("orphan", "agent", transitions=(ir.Transition("always", "draft"),)),
        ir.State("done", "final", final=True),
    )
    mermaid = render_graph(m, "mermaid")
    assert 's_orphan("orphan")' in mermaid
    assert "s_orphan --> s_draft" in mermaid


def test_a_state_named_like_a_mermaid_keyword_gets_a_safe_id() -> None:
    m = machine(
        ir.State("end", "agent", transitions=(ir.Transition("always", "o"),)),
        ir.State("o", "final", final=True),
        start="end",
    )
    assert "    s_end --> s_o\n" in render_graph(m, "mermaid")


# ---- escaping ---------------------------------------------------------------------------------------


def decode_mermaid(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label)


def decode_dot(label: str) -> str:
    unescaped = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), label)
    return unescaped.replace("&amp;", "&")


def shown(text: str) -> str:
    """What a label shows for `text`: whitespace collapsed, invisible characters made visible."""
    flat = " ".join(text.split())
    return "".join(c if c.isprintable() else "\ufffd" for c in flat)


@pytest.mark.parametrize("text", [
    HOSTILE, '"', "\\", "#35;", "a|b", "<br>", "{{ x }}", "%%{init}%%", "end", "\u202e", "x\r\ny", "",
])
def test_mermaid_text_leaves_only_plain_characters_and_decodes_back(text: str) -> None:
    label = mermaid_text(text)
    assert re.fullmatch(r"[A-Za-z0-9 .,:_\-+*/=!?'()\[\]{}@^~\\]*", re.sub(r"#\d+;|[^\x00-\x7f]", "", label))
    assert decode_mermaid(label) == shown(text)


@pytest.mark.parametrize(
    "text", [HOSTILE, '"', "\\", "\\N", "\\l", "a\\", "x\ny", "&lt;&#38;", "日本 🙂", ""]
)
def test_dot_text_escapes_quotes_and_backslashes_and_decodes_back(text: str) -> None:
    label = dot_text(text)
    # no bare quote or entity; each backslash escapes
    assert re.fullmatch(r'(?:[^"\\&]|\\["\\]|&amp;)*', label)
    assert decode_dot(label) == shown(text)


HOSTILE_GUARD = ast.BinaryOp("==", ast.NameExpr("output"), ast.Literal(HOSTILE))


def hostile_machine() -> ir.Machine:
    return machine(
        ir.State("end", "agent", visits=2, transitions=(
            ir.Transition("condition", "o", condition=HOSTILE[:38]),
            ir.Transition("guard", "o", guard=HOSTILE_GUARD),
        )),
        ir.State("o", "final", final=True),
        start="end",
        name="graph",
    )


def test_hostile_labels_stay_inside_their_quotes_in_mermaid() -> None:
    text = render_graph(hostile_machine(), "mermaid")
    edge = re.compile(r'    s_\w+ (-->|==>|-\.->)(\|"[^"]*"\|)? s_\w+')
    node = re.compile(r'    (sw_start\(\( \)\)|s_\w+\("[^"]*"\)|s_\w+\(\(\("[^"]*"\)\)\))')
    other = re.compile(r"    (linkStyle \d+ [^;\n]+|style sw_start .+|sw_start --> s_\w+)")
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    for line in lines[1:]:
        assert edge.fullmatch(line) or node.fullmatch(line) or other.fullmatch(line), line
    labels = [decode_mermaid(lab) for lab in re.findall(r'\|"([^"]*)"\|', text)]
    assert labels[0] == shown(HOSTILE[:38])
    assert labels[1] == shown(expr_to_source(HOSTILE_GUARD))


def test_hostile_labels_stay_inside_their_quotes_in_dot() -> None:
    text = render_graph(hostile_machine(), "dot")
    quoted = r'"(?:[^"\\]|\\.)*"'
    statement = re.compile(rf"    {quoted}( -> {quoted})?( \[[^\[\]]*\])?;|    (node|edge) \[.*\];")
    lines = text.splitlines()
    assert lines[0] == 'digraph "graph" {' and lines[-1] == "}"
    for line in lines[1:-1]:
        assert statement.fullmatch(line), line
    labels = [decode_dot(lab) for lab in re.findall(r'label="((?:[^"\\]|\\.)*)"', text)]
    assert shown(HOSTILE[:38]) in labels
    assert "end\nvisits 2" in labels


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graphviz_reads_hostile_labels_as_plain_text() -> None:
    done = subprocess.run(["dot", "-Tsvg"], input=render_graph(hostile_machine(), "dot"),
                          capture_output=True, text=True, check=True)
    assert "&lt;b&gt;&amp;amp; `md` $$x$$ %% ; end é 日本 🙂" in done.stdout
    assert "{{ y }} \\\\N \\\\ #quot;" in done.stdout  # the guard's own escapes, shown literally


# ---- guard expressions back to source -------------------------------------------------------------


@pytest.mark.parametrize(("source", "expected"), [
    ("output.score >= 85", "output.score >= 85"),
    ("(a + b) * c", "(a + b) * c"),
    ("a + (b * c)", "a + b * c"),
    ("a - (b - c)", "a - (b - c)"),
    ("(a - b) - c", "a - b - c"),
    ("a / (b * c) % d", "a / (b * c) % d"),
    ("(a and b) or c", "a and b or c"),
    ("a and (b or c)", "a and (b or c)"),
    ("not (a and b)", "not (a and b)"),
    ("not a == b", "not a == b"),
    ("(not a) == b", "(not a) == b"),
    ("-(a + b)", "-(a + b)"),
    ("- - a", "--a"),
    ("(a < b) == true", "(a < b) == true"),
    ('"x" not in output.tags', '"x" not in output.tags'),
    ("len(output.fixes) == 0 or visits(draft) > 2", "len(output.fixes) == 0 or visits(draft) > 2"),
    ("output.items[0].name", "output.items[0].name"),
    ("(a + b).c", "(a + b).c"),
    ("[1, 2.5, none, false]", "[1, 2.5, none, false]"),
    (r'"tab\there \"q\" \\ \u0001"', r'"tab\there \"q\" \\ \u0001"'),
])
def test_expressions_are_written_back_with_only_the_parentheses_they_need(source: str, expected: str) -> None:
    assert expr_to_source(guard(source)) == expected


_NAMES = st.sampled_from(["output", "score", "draft", "topic", "x"])
_LITERALS = st.one_of(
    st.none(), st.booleans(), st.integers(0, 10**6),
    st.floats(min_value=0, max_value=1e20, allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
).map(ast.Literal)
_OPS = st.sampled_from(
    ["and", "or", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "+", "-", "*", "/", "%"]
)


def _compound(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(ast.BinaryOp, _OPS, children, children),
        st.builds(ast.UnaryOp, st.sampled_from(["not", "-"]), children),
        st.builds(ast.Attribute, children, _NAMES.map(ast.Name)),
        st.builds(ast.Index, children, children),
        st.builds(ast.Call, st.sampled_from(["len", "visits"]).map(ast.Name),
                  st.lists(children, max_size=2).map(tuple)),
        st.lists(children, max_size=3).map(lambda items: ast.ListExpr(tuple(items))),
    )


EXPRESSIONS = st.recursive(st.one_of(_NAMES.map(ast.NameExpr), _LITERALS), _compound, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_any_expression_written_back_parses_to_the_same_tree(expr: ast.Expr) -> None:
    assert guard(expr_to_source(expr)) == expr


# ---- through the paths users take ---------------------------------------------------------------------

SMALL = """\
machine review {
    agent writer { prompt "You write." }
    start state draft {
        agent writer
        do "Write."
        -> review
    }
    state review {
        agent writer
        do "Check."
        when "it needs work" -> draft max 2
        otherwise -> done
    }
    final state done
}
"""


@needs_checker
def test_the_api_renders_a_checked_file() -> None:
    from statewright import api

    comp = api.check_text(SMALL, "review.fsm")
    assert comp.ok, [(d.code, d.message) for d in comp.diagnostics]
    mermaid = api.render_graph(comp, "mermaid")
    assert 's_review -.->|"it needs work<br>max 2"| s_draft' in mermaid
    assert 's_review -.->|"otherwise"| s_done' in mermaid
    assert '"review" -> "draft" [label="it needs work\\nmax 2", style=dashed' in api.render_graph(comp, "dot")


@needs_checker
def test_the_graph_command_prints_dot(tmp_path: Path) -> None:
    path = tmp_path / "review.fsm"
    path.write_text(SMALL, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "statewright", "graph", str(path), "--format", "dot"],
                          check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('digraph "review" {')
    assert '"(start)" -> "draft";' in done.stdout


@needs_checker
def test_the_example_in_the_graphs_page_is_what_the_command_draws() -> None:
    from statewright import api

    page = (Path(__file__).resolve().parent.parent / "docs" / "graphs.md").read_text(encoding="utf-8")
    [fsm] = re.findall(r"```fsm\n(.*?)```", page, re.DOTALL)
    [mermaid] = re.findall(r"```mermaid\n(.*?)```", page, re.DOTALL)
    [dot] = re.findall(r"```dot\n(.*?)```", page, re.DOTALL)
    comp = api.check_text(fsm, "review_loop.fsm")
    assert [(d.code, d.message) for d in comp.diagnostics] == []
    assert api.render_graph(comp, "mermaid") == mermaid
    assert api.render_graph(comp, "dot") == dot
