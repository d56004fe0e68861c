"""`statewright lsp` driven over stdio by a real LSP client (pygls's): diagnostics as you type, navigation
through states, agents, types, tools and inputs (templates and test blocks included), hover, completion,
rename, formatting, the outline, folding and quick fixes; two documents edited at once stay apart."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types
from support.lsp_session import Session, apply_edits, run, uri_of

from statewright import api

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PIPELINE = (EXAMPLES / "content_pipeline.fsm").read_text(encoding="utf-8")
URI = uri_of(EXAMPLES / "content_pipeline.fsm")


def where(text: str, needle: str, nth: int = 0, inside: int = 0) -> tuple[int, int]:
    """The (line, character) of the `nth` occurrence of `needle`, `inside` characters into it."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    at += inside
    line = text.count("\n", 0, at)
    return line, at - (text.rfind("\n", 0, at) + 1)


def line_of(text: str, needle: str, nth: int = 0) -> int:
    return where(text, needle, nth)[0]


# ---- the session and diagnostics ---------------------------------------------------------------------


def test_initialize_advertises_every_feature() -> None:
    async def scenario(s: Session) -> None:
        caps = s.result.capabilities
        assert s.result.server_info is not None and s.result.server_info.name == "statewright"
        assert caps.hover_provider and caps.definition_provider and caps.references_provider
        assert caps.completion_provider is not None and "." in (caps.completion_provider.trigger_characters or [])
        assert caps.rename_provider
        assert caps.document_formatting_provider and caps.document_symbol_provider
        assert caps.folding_range_provider and caps.code_action_provider
        assert caps.execute_command_provider is not None
        assert "statewright.explainCode" in caps.execute_command_provider.commands

    run(scenario)


def test_a_file_with_errors_gets_every_diagnostic_with_its_code_exact_range_severity_and_help() -> None:
    text = PIPELINE.replace("        -> review\n    }\n\n    state review", "        -> reviw\n    }\n\n    state review")
    text = text.replace("when output.score >= 85", "when output.scor >= 85")
    text = text.replace("    input topic: str\n", "    input topic: str\n    input spare: str = \"x\"\n", 1)  # a warning

    async def scenario(s: Session) -> None:
        s.open(URI, text)
        found = await s.diagnostics(URI)
        by_code = {d.code: d for d in found}
        unknown = by_code["SW2002"]
        line, column = where(text, "-> reviw", inside=3)
        assert unknown.range == types.Range(types.Position(line, column), types.Position(line, column + 5))
        assert unknown.severity == types.DiagnosticSeverity.Error
        assert unknown.source == "statewright"
        assert unknown.message.startswith("unknown state 'reviw'")
        assert "help: did you mean" in unknown.message
        assert unknown.code_description is None  # no link unless the client names one (test_lsp_running.py)
        field = by_code["SW2006"]
        line, column = where(text, "output.scor ", inside=7)
        assert (field.range.start, field.range.end) == (types.Position(line, column),
                                                        types.Position(line, column + 4))
        # the same codes, in the same order, as `statewright check` reports for the text
        expected = api.check_text(text, "content_pipeline.fsm").diagnostics
        assert [d.code for d in found] == [d.code for d in expected]
        warnings = [d for d in found if d.code == "SW7005"]
        assert warnings and all(d.severity == types.DiagnosticSeverity.Warning for d in warnings)

    run(scenario)


def test_a_carriage_return_without_a_line_feed_is_shown_where_the_editor_shows_it() -> None:
    text = PIPELINE.replace("    input topic: str\n", "    input topic: str  # the subject\r    input spare: str\n", 1)

    async def scenario(s: Session) -> None:
        s.open(URI, text)
        [found] = await s.diagnostics(URI)
        assert found.code == "SW1007" and found.severity == types.DiagnosticSeverity.Error
        line, column = where(text, "\r")
        assert found.range == types.Range(types.Position(line, column), types.Position(line, column + 1))
        [expected] = api.check_text(text, "content_pipeline.fsm").diagnostics
        assert expected.code == "SW1007" and expected.span.start_pos.line == line + 1

    run(scenario)


def test_editing_the_file_changes_its_diagnostics() -> None:
    broken = PIPELINE.replace("-> publish", "-> pubish")

    async def scenario(s: Session) -> None:
        s.open(URI, broken)
        assert "SW2002" in {d.code for d in await s.diagnostics(URI)}
        line, column = where(broken, "-> pubish", inside=3)
        s.edit(URI, (line, column), (line, column + 6), "publish")  # an incremental change
        assert not await s.diagnostics(URI)
        s.replace(URI, PIPELINE.replace("machine content_pipeline {", "machine content_pipeline {{"))
        [syntax] = await s.diagnostics(URI)
        assert syntax.code == "SW1002"
        s.replace(URI, PIPELINE)
        assert not await s.diagnostics(URI)

    run(scenario)


def test_a_burst_of_edits_ends_with_the_diagnostics_of_the_last_text() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        for i in range(30):
            s.replace(URI, PIPELINE.replace("-> publish", f"-> publish{i}"))
        last = await s.diagnostics(URI)
        assert [d.message.split(":")[0] for d in last if d.code == "SW2002"] == ["unknown state 'publish29'"]

    run(scenario)


def test_an_edit_that_arrives_while_the_document_compiles_gets_its_own_diagnostics() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from compile_scaling import generate_machine

    big = generate_machine(300)

    async def scenario(s: Session) -> None:
        uri = "file:///tmp/big.fsm"
        s.open(uri, big)
        await asyncio.sleep(0.05)  # the first compile is under way (or its index is being built)
        s.replace(uri, big.replace("input threshold: int = 80", "input threshold: int = oops"))
        assert {d.code for d in await s.diagnostics(uri)} == {"SW1002"}
        assert not await s.diagnostics(uri, version=1)

    run(scenario)


@pytest.mark.slow
def test_the_lsp_benchmark_runs_and_ends_with_its_result() -> None:
    bench = Path(__file__).resolve().parents[1] / "bench" / "lsp.py"
    done = subprocess.run([sys.executable, str(bench), "--states", "50", "--repeat", "1"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT {") and '"ok": true' in last


def test_positions_count_utf16_code_units() -> None:
    text = 'machine m {\n    description "héllo 😀" input x: str = unknown\n}\n'

    async def scenario(s: Session) -> None:
        s.open("file:///tmp/unicode.fsm", text)
        [d] = await s.diagnostics("file:///tmp/unicode.fsm")
        line_text = text.splitlines()[1]
        chars = line_text.index("unknown")
        assert d.range.start == types.Position(1, chars + 1)  # the emoji is two UTF-16 code units

    run(scenario)


# ---- navigation ----------------------------------------------------------------------------------------


def test_definition_goes_from_every_kind_of_reference_to_the_declaration() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        cases = {
            "state target": (where(PIPELINE, "        -> review\n", inside=12), "state review"),
            "state in a template": (where(PIPELINE, "{{ review.output.fixes", inside=4), "state review"),
            "state in a test": (where(PIPELINE, "reply review", inside=7), "state review"),
            "state in an expected path": (where(PIPELINE, "expect path [harvest, draft", inside=23), "state draft"),
            "agent": (where(PIPELINE, "agent critic\n", inside=7), "agent critic {"),
            "listener": (where(PIPELINE, "tell [writer, critic]", inside=16), "agent critic {"),
            "type": (where(PIPELINE, "output Critique", inside=8), "type Critique"),
            "input in a template": (where(PIPELINE, "{{ topic }}", inside=4), "input topic"),
            "input in a prompt": (where(PIPELINE, "{{ audience }}", inside=4), "input audience"),
            "input in a test": (where(PIPELINE, 'topic "finite', inside=1), "input topic"),
            "field in a guard": (where(PIPELINE, "output.score >= 85", inside=8), "score: int"),
            "field in a template": (where(PIPELINE, "review.output.score }}", inside=15), "score: int"),
            "field in a reply": (where(PIPELINE, "score 91", inside=1), "score: int"),
        }
        lines = PIPELINE.splitlines()
        for name, ((line, column), declared) in cases.items():
            [location] = await s.definition(URI, line, column)
            assert location.uri == URI, name
            assert declared in lines[location.range.start.line], name

    run(scenario)


def test_references_of_a_state_include_its_templates_and_test_blocks() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        found = await s.references(URI, *where(PIPELINE, "state review", inside=7))
        lines = PIPELINE.splitlines()
        texts = sorted({lines[r.range.start.line].strip() for r in found})
        assert "state review {" in texts
        assert 'do "Revise your article. Apply each of these fixes: {{ review.output.fixes }}"' in texts
        assert 'reply review { score 60, fixes ["restructure"] }' in texts
        assert any(t.startswith("expect path [harvest, draft, review") for t in texts)
        without = await s.references(URI, *where(PIPELINE, "state review", inside=7), declaration=False)
        assert len(without) == len(found) - 1

    run(scenario)


TOOLS = """machine tools {
    tool lookup = "mypkg.tools:lookup"

    agent helper {
        prompt "You help."
        tools [lookup, std.python]
    }

    start state ask {
        agent helper
        do "Ask."
        -> fetch
    }

    state fetch {
        call lookup(query = "x")
        -> done
    }

    final state done

    test "t" {
        reply ask "x"
        reply fetch "y"
        expect path [ask, fetch, done]
    }
}
"""


def test_a_tool_is_found_where_it_is_declared_listed_and_called() -> None:
    uri = "file:///tmp/tools.fsm"

    async def scenario(s: Session) -> None:
        s.open(uri, TOOLS)
        found = await s.references(uri, *where(TOOLS, "call lookup", inside=6))
        assert sorted(r.range.start.line for r in found) == [
            line_of(TOOLS, "tool lookup"), line_of(TOOLS, "tools [lookup"), line_of(TOOLS, "call lookup")]
        [declared] = await s.definition(uri, *where(TOOLS, "tools [lookup", inside=8))
        assert declared.range.start.line == line_of(TOOLS, "tool lookup")
        std = await s.hover(uri, *where(TOOLS, "std.python", inside=4))
        assert std is not None and "standard tool" in std.contents.value  # type: ignore[union-attr]
        user = await s.hover(uri, *where(TOOLS, "call lookup", inside=6))
        assert user is not None and "mypkg.tools:lookup" in user.contents.value  # type: ignore[union-attr]

    run(scenario)


# ---- hover ---------------------------------------------------------------------------------------------


def test_hover_tells_a_states_agent_output_and_transitions_a_fields_type_and_doc_and_a_diagnostic() -> None:
    text = PIPELINE.replace("-> publish", "-> pubish")

    async def scenario(s: Session) -> None:
        s.open(URI, text)
        state = await s.hover(URI, *where(text, "state review", inside=7))
        value = state.contents.value  # type: ignore[union-attr]
        assert "agent: `critic`" in value and "output: `Critique`" in value
        assert "when output.score >= 85 -> pubish" in value and "otherwise -> human_review" in value
        field = await s.hover(URI, *where(text, "output.score", inside=9))
        value = field.contents.value  # type: ignore[union-attr]
        assert "`Critique.score`: `int`" in value and "0-100: accuracy" in value
        problem = await s.hover(URI, *where(text, "-> pubish", inside=4))
        value = problem.contents.value  # type: ignore[union-attr]
        assert "SW2002" in value and "unknown state" in value
        assert "Wrong:" in value  # the long explanation, as `statewright explain` prints it

    run(scenario)


def test_the_explain_command_answers_with_the_long_form_of_a_code() -> None:
    async def scenario(s: Session) -> None:
        answer = await s.request(s.client.workspace_execute_command_async, types.ExecuteCommandParams(
            command="statewright.explainCode", arguments=["SW3016"]))
        assert answer.startswith("SW3016: ")

    run(scenario)


# ---- completion ----------------------------------------------------------------------------------------


def test_completion_offers_states_fields_template_variables_and_keywords_where_they_fit() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        await s.diagnostics(URI)
        line = line_of(PIPELINE, "        -> revise max 2")
        # each case types a line into the review state, asks, and takes it back
        cases = [
            ("        -> ", {"harvest", "draft", "review", "revise", "publish", "human_review"}),
            ("        when output.", {"score", "fixes"}),
            ("        when harvest.output.", {"key_points", "open_questions"}),
            ('        do "Use {{ review.output.', {"score", "fixes"}),
            ('        do "Use {{ ', {"topic", "audience", "harvest", "review"}),
            ('        do "Use {{ review.', {"output", "visits"}),
            ("        agent ", {"researcher", "writer", "critic"}),
            ("        output ", {"Signals", "Critique", "str"}),
            # the review state has its agent, instruction, output, retries and otherwise: the rest an agent state takes
            ("        ", {"model", "tell", "visits", "for", "when", "->"}),
        ]
        for typed, expected in cases:
            s.edit(URI, (line, 0), (line, 0), typed + "\n")
            labels = set(await s.completion(URI, line, len(typed)))
            assert expected <= labels, (typed, labels)
            if typed.isspace():
                assert not {"agent", "do", "output", "retries", "otherwise", "ask", "after", "call", "parallel"} & labels
            s.edit(URI, (line, 0), (line + 1, 0), "")
        # a test block: state names after `reply`
        test_line = line_of(PIPELINE, "        reply draft \"A first draft.\"")
        s.edit(URI, (test_line, 0), (test_line, 0), "        reply \n")
        assert {"harvest", "review"} <= set(await s.completion(URI, test_line, len("        reply ")))

    run(scenario)


def test_completion_works_in_a_line_that_does_not_parse_yet() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        await s.diagnostics(URI)
        line = line_of(PIPELINE, "        -> revise max 2")
        s.edit(URI, (line, 0), (line, 0), "        when review.output.\n")
        assert {"score", "fixes"} <= set(await s.completion(URI, line, len("        when review.output.")))

    run(scenario)


# ---- rename --------------------------------------------------------------------------------------------


def test_renaming_a_state_changes_it_everywhere_and_the_file_still_checks() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        edit = await s.rename(URI, *where(PIPELINE, "state review", inside=7), "critique")
        renamed = apply_edits(PIPELINE, edit.changes[URI])
        assert "state critique {" in renamed and "-> critique\n" in renamed and "state review" not in renamed
        assert "{{ critique.output.score }}" in renamed and "{{ critique.output.fixes }}" in renamed and "reply critique {" in renamed
        assert "expect path [harvest, draft, critique, publish]" in renamed
        assert api.check_text(renamed, "x.fsm").ok

    run(scenario)


def test_renaming_an_input_agent_and_type_reaches_prompts_templates_tests_and_listeners() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        for needle, inside, new, shown in (
                ("input audience", 6, "readers", ["{{ readers }}", 'readers "students" }']),
                ("agent critic", 6, "judge", ["agent judge {", "tell [writer, judge]", "        agent judge\n"]),
                ("type Critique", 5, "Review", ["type Review {", "output Review"])):
            edit = await s.rename(URI, *where(PIPELINE, needle, inside=inside), new)
            renamed = apply_edits(PIPELINE, edit.changes[URI])
            assert all(piece in renamed for piece in shown), (new, renamed)
            assert api.check_text(renamed, "x.fsm").ok, new

    run(scenario)


def test_a_rename_that_would_clash_or_break_the_file_is_refused() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        for new in ("draft", "topic", "loop", "9lives"):
            with pytest.raises(Exception, match="already declares|reserved|not a name"):
                await s.rename(URI, *where(PIPELINE, "state review", inside=7), new)
        prepared = await s.request(s.client.text_document_prepare_rename_async, types.PrepareRenameParams(
            text_document=s.doc(URI), position=types.Position(*where(PIPELINE, "prompt", inside=1))))
        assert prepared is None  # a keyword is nothing to rename

    run(scenario)


# ---- formatting, outline, folding, quick fixes -------------------------------------------------------


def test_formatting_is_the_canonical_fmt_and_keeps_comments() -> None:
    messy = PIPELINE.replace("    state draft {\n        agent writer", "    state   draft {\n  agent writer   # who\n")

    async def scenario(s: Session) -> None:
        s.open(URI, messy)
        edits = await s.formatting(URI)
        formatted = apply_edits(messy, edits)
        assert formatted == api.format_text(messy, "x.fsm").text
        assert "# who" in formatted and "# content_pipeline.fsm" in formatted
        s.replace(URI, formatted)
        assert not await s.formatting(URI)

    run(scenario)


def test_the_outline_lists_the_declarations_and_folding_covers_the_blocks() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, PIPELINE)
        [machine] = await s.request(s.client.text_document_document_symbol_async, types.DocumentSymbolParams(
            text_document=s.doc(URI)))
        assert machine.name == "content_pipeline"
        names = [c.name for c in machine.children]
        assert names[:4] == ["topic", "audience", "Signals", "Critique"]
        assert {"harvest", "review", "human_review", 'test "a strong first draft is published as written"'} <= set(names)
        critique = next(c for c in machine.children if c.name == "Critique")
        assert [f.name for f in critique.children] == ["score", "fixes"]
        folds = await s.request(s.client.text_document_folding_range_async, types.FoldingRangeParams(
            text_document=s.doc(URI)))
        starts = {f.start_line for f in folds}
        assert line_of(PIPELINE, "state review {") in starts and line_of(PIPELINE, 'prompt """') in starts
        assert any(f.kind == types.FoldingRangeKind.Comment and f.start_line == 0 for f in folds)

    run(scenario)


def test_a_did_you_mean_becomes_a_quick_fix() -> None:
    text = PIPELINE.replace("-> publish", "-> pubish")

    async def scenario(s: Session) -> None:
        s.open(URI, text)
        found = await s.diagnostics(URI)
        unknown = [d for d in found if d.code == "SW2002"]
        actions = await s.request(s.client.text_document_code_action_async, types.CodeActionParams(
            text_document=s.doc(URI), range=unknown[0].range,
            context=types.CodeActionContext(diagnostics=unknown)))
        [fix] = [a for a in actions if a.title == "Replace 'pubish' with 'publish'"]
        assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
        fixed = apply_edits(text, fix.edit.changes[URI])
        assert fixed == PIPELINE

    run(scenario)


# ---- two documents at once -----------------------------------------------------------------------------


def test_two_files_edited_concurrently_keep_their_own_comments_and_diagnostics() -> None:
    left = (EXAMPLES / "content_pipeline.fsm").read_text(encoding="utf-8")
    right = (EXAMPLES / "trivia_writing.fsm").read_text(encoding="utf-8")
    uris = {"left": "file:///tmp/left.fsm", "right": "file:///tmp/right.fsm"}

    async def scenario(s: Session) -> None:
        s.open(uris["left"], left)
        s.open(uris["right"], right)
        texts = {}
        for i in range(12):  # interleaved edits; each file gets its own comment and its own mistake
            texts["left"] = f"# left edit {i}\n" + left.replace("-> publish", f"-> left_missing{i}")
            texts["right"] = f"# right edit {i}\n" + right.replace("machine ", f"# right inner {i}\nmachine ", 1)
            s.replace(uris["left"], texts["left"])
            s.replace(uris["right"], texts["right"])
        for side in ("left", "right"):
            got = await s.diagnostics(uris[side])
            want = api.check_text(texts[side], "x.fsm").diagnostics
            assert [(d.code, d.message.splitlines()[0]) for d in got] == [
                (d.code, d.message + (f": {d.label}" if d.label else "")) for d in want], side
        lefts = [d.message for d in await s.diagnostics(uris["left"]) if d.code == "SW2002"]
        assert lefts == [m for m in lefts if "left_missing11" in m] and lefts
        formatted = {side: apply_edits(texts[side], await s.formatting(uris[side]) or []) for side in texts}
        assert "# left edit 11" in formatted["left"] and "right" not in formatted["left"].split("\n", 1)[0]
        assert "# right edit 11" in formatted["right"] and "# right inner 11" in formatted["right"]
        assert "left edit" not in formatted["right"] and "right inner" not in formatted["left"]

    run(scenario)


# ---- every bundled example ------------------------------------------------------------------------------


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.fsm")), ids=lambda p: p.stem)
def test_every_example_opens_clean_and_every_reference_leads_to_its_declaration(example: Path) -> None:
    from statewright.lsp.analysis import Analysis

    text = example.read_text(encoding="utf-8")
    uri = uri_of(example)
    index = Analysis(uri, 1, text).index
    assert index is not None
    references = [o for o in index.occurrences if not o.definition and index.definition(o.key) is not None]

    async def scenario(s: Session) -> None:
        s.open(uri, text)
        assert [d for d in await s.diagnostics(uri) if d.severity == types.DiagnosticSeverity.Error] == []
        lines = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]

        def position(offset: int) -> tuple[int, int]:
            line = max(i for i, start in enumerate(lines) if start <= offset)
            return line, offset - lines[line]

        answers = await asyncio.gather(*(s.definition(uri, *position(o.start)) for o in references))
        for occurrence, [location] in zip(references, answers):
            declared = index.definition(occurrence.key)
            assert declared is not None
            assert (location.range.start.line, location.range.start.character) == position(declared.start)
        symbols = await s.request(s.client.text_document_document_symbol_async, types.DocumentSymbolParams(
            text_document=s.doc(uri)))
        assert symbols and symbols[0].children

    run(scenario)


# ---- start-up ------------------------------------------------------------------------------------------


def test_check_never_imports_the_language_server() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ("import sys\nfrom statewright.cli import main\n"
                                f"main(['check', {str(EXAMPLES / 'content_pipeline.fsm')!r}])\n"
                                "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                                "('pygls', 'lsprotocol', 'cattrs')))")],
        capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_positions_can_be_utf8_when_the_client_offers_only_that() -> None:
    text = 'machine m {\n    description "é" input x: str = unknown\n}\n'

    async def scenario(s: Session) -> None:
        assert s.result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
        s.open("file:///tmp/utf8.fsm", text)
        [d] = await s.diagnostics("file:///tmp/utf8.fsm")
        line_text = text.splitlines()[1]
        assert d.range.start.character == len(line_text[: line_text.index("unknown")].encode("utf-8"))

    run(scenario, encodings=[types.PositionEncodingKind.Utf8])


def test_closing_a_document_clears_its_diagnostics() -> None:
    broken = PIPELINE.replace("-> publish", "-> pubish")

    async def scenario(s: Session) -> None:
        s.open(URI, broken)
        assert await s.diagnostics(URI)
        s.client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=s.doc(URI)))
        async with s.arrived:
            await asyncio.wait_for(s.arrived.wait_for(lambda: not s.published[URI][-1].diagnostics), 30)

    run(scenario)
