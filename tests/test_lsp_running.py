"""`statewright lsp` runs what it shows, driven by a real LSP client (pygls's) over stdio: code lenses run one
test block or all of a file's and write the runner, results come back as diagnostics and messages, the
runner is written on save when that is set, a runner's line leads back to its `.fsm` position, and the
capabilities the server advertises are the requests it answers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types
from support.lsp_session import Session, run, uri_of

from statewright import api
from statewright.cli import main
from statewright.lsp import running

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "support_triage.fsm"
TEXT = EXAMPLE.read_text(encoding="utf-8")
TEST_NAMES = ["a how-to question is answered at once", "an outage waits for a person who edits the reply",
              "a refund request the person holds back fails the run", "nobody answers within a day"]
RUN_TEST, RUN_TESTS = "statewright.runTest", "statewright.runTests"
COMPILE, RUNNER_SOURCE = "statewright.compileRunner", "statewright.runnerSource"


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n")


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    """A copy of the example in a directory of its own, where runners may be written."""
    path = tmp_path / "flows" / "support_triage.fsm"
    path.parent.mkdir()
    shutil.copyfile(EXAMPLE, path)
    return path


# ---- code lenses and test runs --------------------------------------------------------------------------


def test_lenses_run_every_test_compile_the_runner_and_run_each_test_block() -> None:
    uri = uri_of(EXAMPLE)

    async def scenario(s: Session) -> None:
        s.open(uri, TEXT)
        lenses = await s.code_lenses(uri)
        by_line: dict[int, list[tuple[str, str, list[object]]]] = {}
        for lens in lenses:
            assert lens.command is not None
            command = lens.command.title, lens.command.command, list(lens.command.arguments or ())
            by_line.setdefault(lens.range.start.line, []).append(command)
        machine_line = line_of(TEXT, "machine support_triage")
        assert by_line.pop(machine_line) == [("▶ Run 4 tests", RUN_TESTS, [uri]), ("Compile the runner", COMPILE, [uri])]
        assert by_line == {line_of(TEXT, f'test "{name}"'): [("▶ Run test", RUN_TEST, [uri, name])]
                           for name in TEST_NAMES}

    run(scenario)


def test_a_test_lens_runs_that_test_alone_as_statewright_test_runs_it() -> None:
    uri = uri_of(EXAMPLE)

    async def scenario(s: Session) -> None:
        s.open(uri, TEXT)
        lens = next(lens for lens in await s.code_lenses(uri)
                    if lens.command and list(lens.command.arguments or ()) == [uri, TEST_NAMES[2]])
        assert lens.command is not None
        result = await s.command(lens.command.command, *lens.command.arguments)
        assert result["ok"] is True and result["failed"] == 0
        [outcome] = result["tests"]
        expected = api.run_tests(api.check_file(EXAMPLE), names=[TEST_NAMES[2]])
        assert [(outcome["name"], outcome["passed"], outcome["path"])] == [
            (o.name, o.passed, o.actual_path) for o in expected]
        assert outcome["path"] == ["classify", "draft_escalation", "approve", "held"]
        kind, text = await s.message("passed")
        assert kind == types.MessageType.Info
        assert text == f"support_triage.fsm: test {TEST_NAMES[2]!r} passed"

    run(scenario)


def test_a_failing_test_is_a_diagnostic_over_its_block_until_the_text_changes() -> None:
    uri = uri_of(EXAMPLE)
    broken = TEXT.replace("expect path [classify, answer]\n", "expect path [classify, draft_escalation]\n")
    assert broken != TEXT

    async def scenario(s: Session) -> None:
        s.open(uri, broken)
        assert not await s.diagnostics(uri)
        result = await s.command(RUN_TESTS, uri)
        assert result["ok"] and result["failed"] == 1
        assert [(t["name"], t["passed"]) for t in result["tests"]] == [
            (name, name != TEST_NAMES[0]) for name in TEST_NAMES]
        kind, text = await s.message("1 failed")
        assert (kind, text) == (types.MessageType.Error, "support_triage.fsm: 3 passed, 1 failed")
        published = s.published[uri][-1]
        assert published.version == 1
        [failure] = published.diagnostics
        assert failure.source == "statewright test" and failure.severity == types.DiagnosticSeverity.Error
        line = line_of(broken, f'test "{TEST_NAMES[0]}"')
        assert (failure.range.start.line, failure.range.start.character) == (line, 4)
        assert failure.range.end == types.Position(line, 4 + len(f'test "{TEST_NAMES[0]}"'))
        assert failure.message.startswith(f"test {TEST_NAMES[0]!r} failed")
        assert "expected path: classify -> draft_escalation" in failure.message
        assert "actual path:   classify -> answer" in failure.message
        # the same failure `statewright test` reports
        [cli_outcome] = [o for o in api.run_tests(api.check_text(broken, "x.fsm")) if not o.passed]
        assert all(m in failure.message for m in cli_outcome.messages)
        s.replace(uri, broken + "\n")
        assert not await s.diagnostics(uri)  # the results belonged to the text they ran

    run(scenario)


def test_tests_do_not_run_while_the_file_has_errors_and_an_unknown_test_is_named() -> None:
    uri = uri_of(EXAMPLE)

    async def scenario(s: Session) -> None:
        s.open(uri, TEXT.replace("-> approve\n", "-> aprove\n"))
        assert [d.code for d in await s.diagnostics(uri) if d.severity == types.DiagnosticSeverity.Error] == ["SW2002"]
        result = await s.command(RUN_TESTS, uri)
        assert result == {"ok": False, "error": "support_triage.fsm has 1 error (SW2002 first): its tests cannot "
                                                "run"}
        kind, _ = await s.message("its tests cannot run")
        assert kind == types.MessageType.Warning
        s.replace(uri, TEXT)
        result = await s.command(RUN_TEST, uri, "no such test")
        assert result["ok"] is False and "no test block named 'no such test'" in result["error"]
        result = await s.command(RUN_TESTS, "file:///not/open.fsm")
        assert result["ok"] is False and "is not open" in result["error"]

    run(scenario)


# ---- the runner ------------------------------------------------------------------------------------------


def test_the_compile_lens_writes_the_runner_statewright_compile_writes(spec: Path, tmp_path: Path) -> None:
    uri = uri_of(spec)
    target = spec.parent / "support_triage_runner.py"

    async def scenario(s: Session) -> None:
        s.open(uri, TEXT)
        result = await s.command(COMPILE, uri)
        assert result == {"ok": True, "path": str(target)}
        await s.message(f"wrote {target}")

    run(scenario)
    by_cli = spec.parent / "by_cli.py"
    assert main(["compile", str(spec), "-o", str(by_cli)]) == 0
    assert target.read_bytes() == by_cli.read_bytes()
    done = subprocess.run([sys.executable, str(target), "--selftest"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_runner_is_not_written_over_a_file_statewright_did_not_generate(spec: Path) -> None:
    uri = uri_of(spec)
    mine = spec.parent / "support_triage_runner.py"
    mine.write_text("print('mine')\n", encoding="utf-8")

    async def scenario(s: Session) -> None:
        s.open(uri, TEXT)
        result = await s.command(COMPILE, uri)
        assert result["ok"] is False and str(mine) in result["error"]
        kind, _ = await s.message(str(mine))
        assert kind == types.MessageType.Warning

    run(scenario)
    assert mine.read_text(encoding="utf-8") == "print('mine')\n"


def test_compile_on_save_follows_the_setting_and_its_runner_path(spec: Path) -> None:
    uri = uri_of(spec)
    default = spec.parent / "support_triage_runner.py"
    configured = spec.parent / "build" / "triage.py"

    async def scenario(s: Session) -> None:
        s.open(uri, TEXT)
        s.save(uri)
        await s.code_lenses(uri)  # a round trip after the save: it was handled
        assert not default.exists()
        s.configure({"statewright": {"compileOnSave": True}})
        s.save(uri)
        kind, text = await s.message(f"wrote {default}", how="log")
        assert kind == types.MessageType.Info and default.is_file()
        assert not [m for m in s.messages if m[0] == "show"]  # a save that writes the runner says so quietly
        s.configure({"statewright": {"compileOnSave": True, "runnerPath": "build/{stem}.py",
                                     "runnerStandalone": False}})
        s.replace(uri, TEXT.replace("temperature 0.2", "temperature 0.3"))
        s.save(uri)
        await s.message(f"wrote {spec.parent / 'build' / 'support_triage.py'}", how="log")
        s.configure({"statewright": {"runnerPath": "build/triage.py"}})
        s.replace(uri, TEXT.replace("-> approve\n", "-> aprove\n"))
        s.save(uri)
        kind, text = await s.message("not compiled", how="log")
        assert kind == types.MessageType.Warning and "has 1 error (SW2002 first)" in text
        assert not configured.exists()

    run(scenario)
    written = (spec.parent / "build" / "support_triage.py").read_text(encoding="utf-8")
    assert "temperature=0.3" in written and "from statewright_runtime import" in written
    assert api.check_runtime_package(spec.parent / "build" / "statewright_runtime").current


def test_compile_on_save_can_be_set_when_the_server_starts(spec: Path) -> None:
    uri = uri_of(spec)

    async def scenario(s: Session) -> None:
        s.open(uri, TEXT)
        s.save(uri)
        await s.message("wrote", how="log")

    run(scenario, initialization_options={"compileOnSave": True, "runnerPath": "{dir}/out/{stem}.py"})
    assert (spec.parent / "out" / "support_triage.py").is_file()


def test_a_runner_line_leads_back_to_the_fsm_line_it_was_written_from(spec: Path) -> None:
    runner = spec.parent / "gen" / "runner.py"
    runner.parent.mkdir()
    assert main(["compile", str(spec), "-o", str(runner), "--standalone"]) == 0  # the runtime's lines in it too
    lines = runner.read_text(encoding="utf-8").split("\n")
    guard = next(i for i, line in enumerate(lines) if line.startswith("# when any("))
    runtime_line = next(i for i, line in enumerate(lines) if line.startswith("def run_machine("))

    async def scenario(s: Session) -> None:
        found = await s.command(RUNNER_SOURCE, uri_of(runner), guard + 1)  # the guard function's body
        assert found["uri"] == uri_of(spec)
        at = found["range"]["start"]
        assert at == found["range"]["end"]
        assert TEXT.split("\n")[at["line"]][at["character"]:].startswith("when any(t in [")
        assert await s.command(RUNNER_SOURCE, uri_of(runner), runtime_line) is None
        assert await s.command(RUNNER_SOURCE, uri_of(spec), 3) is None
        kind, text = await s.message("not a runner")
        assert kind == types.MessageType.Warning and "support_triage.fsm" in text

    run(scenario)


def test_a_runner_source_counts_columns_in_utf16_like_the_editor(tmp_path: Path) -> None:
    spec = tmp_path / "wide.fsm"
    spec.write_text(TEXT.replace('"You triage support tickets.', '"𝄞 You triage support tickets.'), encoding="utf-8")
    runner = tmp_path / "runner.py"
    assert main(["compile", str(spec), "-o", str(runner)]) == 0
    text = spec.read_text(encoding="utf-8")
    lines = runner.read_text(encoding="utf-8").split("\n")
    guard = next(i for i, line in enumerate(lines) if line.startswith("# when any("))
    before = text.split("\n")[line_of(text, "when any(")]
    assert "𝄞" not in before  # the wide character is on another line: the column is the same in both
    agent_line = next(i for i, line in enumerate(lines) if '"agent triager":' in line)

    async def scenario(s: Session) -> None:
        found = await s.command(RUNNER_SOURCE, uri_of(runner), guard)
        assert found["range"]["start"] == {"line": line_of(text, "when any("), "character": 8}
        found = await s.command(RUNNER_SOURCE, uri_of(runner), agent_line)
        assert found["range"]["start"] == {"line": line_of(text, "agent triager {"), "character": 4}

    run(scenario)


def test_a_runner_source_counts_columns_in_the_encoding_the_client_agreed_on(tmp_path: Path) -> None:
    # the column was counted in UTF-16 code units whatever the session had agreed on
    (tmp_path / "wide.fsm").write_text("\u00e9\U0001d11ex\n", encoding="utf-8")
    runner = tmp_path / "runner.py"
    runner.write_text('SOURCE_MAP = {\n    "s": "wide.fsm:1:3",\n}\n', encoding="utf-8")
    for encoding, character in (("utf-16", 3), ("utf-8", 6), ("utf-32", 2)):
        found = running.runner_source(runner.as_uri(), 1, encoding)
        assert found is not None and found.range.start == types.Position(0, character)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs and /dev/zero")
def test_a_runner_or_spec_that_is_no_regular_file_is_refused_and_the_server_goes_on(tmp_path: Path) -> None:
    # a NUL in the runner's URI was an internal error; /dev/zero named as the runner, or as the spec a
    # runner maps to, was read until the server was killed for its memory; a FIFO held the runner thread
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "runner.py").write_text('SOURCE_MAP = {\n    "s": "/dev/zero:2:5",\n}\n', encoding="utf-8")
    user = tmp_path / "user.fsm"
    os.mkfifo(tmp_path / "pipe.fsm")

    async def scenario(s: Session) -> None:
        for uri, said in ((tmp_path.as_uri() + "/a%00b.py", "cannot hold the character NUL"),
                          ("file:///dev/zero", "it is a device, not a regular file"),
                          ((tmp_path / "pipe.py").as_uri(), "it is a FIFO (named pipe), not a regular file")):
            assert await s.command(RUNNER_SOURCE, uri, 0) is None
            kind, _ = await s.message(said)
            assert kind == types.MessageType.Warning
        found = await s.command(RUNNER_SOURCE, (tmp_path / "runner.py").as_uri(), 1)
        assert found["uri"] == "file:///dev/zero" and found["range"]["start"] == {"line": 1, "character": 4}
        s.open(uri_of(user), 'use "pipe.fsm"\n' + TEXT)
        [problem] = [d for d in await s.diagnostics(uri_of(user)) if d.code == "SW2101"]
        assert problem.message.startswith("cannot read 'pipe.fsm': it is a FIFO (named pipe), not a regular file")

    run(scenario)


# ---- capabilities and links --------------------------------------------------------------------------------


def test_the_capabilities_are_the_requests_the_server_answers() -> None:
    uri = uri_of(EXAMPLE)
    prepare = types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
        rename=types.RenameClientCapabilities(prepare_support=True)))

    async def scenario(s: Session) -> None:
        caps = s.result.capabilities
        assert caps.code_lens_provider is not None and not caps.code_lens_provider.resolve_provider
        assert caps.execute_command_provider is not None
        assert sorted(caps.execute_command_provider.commands) == sorted(
            ["statewright.explainCode", RUN_TEST, RUN_TESTS, COMPILE, RUNNER_SOURCE])
        assert caps.rename_provider == types.RenameOptions(prepare_provider=True)
        s.open(uri, TEXT)
        await s.diagnostics(uri)
        line = line_of(TEXT, "state classify")
        assert await s.prepare_rename(uri, line, 16) == types.Range(types.Position(line, 16),
                                                                     types.Position(line, 24))
        assert await s.code_lenses(uri)

    run(scenario, capabilities=prepare)

    async def without_prepare(s: Session) -> None:
        # the LSP allows RenameOptions only to a client that can send prepareRename
        assert s.result.capabilities.rename_provider is True

    run(without_prepare)


def test_every_request_the_server_registers_is_advertised() -> None:
    from statewright.lsp.server import server

    advertised = {
        types.TEXT_DOCUMENT_HOVER: "hover_provider", types.TEXT_DOCUMENT_DEFINITION: "definition_provider",
        types.TEXT_DOCUMENT_REFERENCES: "references_provider", types.TEXT_DOCUMENT_COMPLETION: "completion_provider",
        types.TEXT_DOCUMENT_RENAME: "rename_provider", types.TEXT_DOCUMENT_PREPARE_RENAME: "rename_provider",
        types.TEXT_DOCUMENT_FORMATTING: "document_formatting_provider",
        types.TEXT_DOCUMENT_DOCUMENT_SYMBOL: "document_symbol_provider",
        types.TEXT_DOCUMENT_FOLDING_RANGE: "folding_range_provider",
        types.TEXT_DOCUMENT_CODE_ACTION: "code_action_provider", types.TEXT_DOCUMENT_CODE_LENS: "code_lens_provider",
    }
    notifications = {types.INITIALIZE, types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE,
                     types.TEXT_DOCUMENT_DID_SAVE, types.TEXT_DOCUMENT_DID_CLOSE,
                     types.WORKSPACE_DID_CHANGE_CONFIGURATION}
    registered = set(server.protocol.fm.features)
    assert registered - notifications == set(advertised)

    async def scenario(s: Session) -> None:
        caps = s.result.capabilities
        assert all(getattr(caps, field) for field in advertised.values())
        unanswered = {name for name in ("declaration_provider", "type_definition_provider", "implementation_provider",
                                        "document_highlight_provider", "document_link_provider",
                                        "signature_help_provider", "semantic_tokens_provider",
                                        "inlay_hint_provider", "workspace_symbol_provider",
                                        "document_range_formatting_provider", "selection_range_provider")
                      if getattr(caps, name)}
        assert unanswered == set()

    run(scenario)


def test_diagnostics_link_nowhere_by_default_and_to_the_link_a_client_names() -> None:
    uri = uri_of(EXAMPLE)
    broken = TEXT.replace("-> approve\n", "-> aprove\n")

    async def default(s: Session) -> None:
        s.open(uri, broken)
        found = await s.diagnostics(uri)
        assert "SW2002" in {d.code for d in found} and all(d.code_description is None for d in found)

    async def configured(s: Session) -> None:
        s.open(uri, broken)
        [d] = [d for d in await s.diagnostics(uri) if d.code == "SW2002"]
        assert d.code_description == types.CodeDescription(href="https://docs.example.org/diagnostics/#SW2002")

    run(default)
    run(configured, initialization_options={"explainLink": "https://docs.example.org/diagnostics/#{code}"})


def test_an_unsaved_document_has_no_place_for_a_runner_but_runs_its_tests() -> None:
    uri = "untitled:Untitled-1"

    async def scenario(s: Session) -> None:
        s.open(uri, TEXT)
        result = await s.command(COMPILE, uri)
        assert result == {"ok": False, "error": "save the file first: a runner is written beside its .fsm file"}
        result = await s.command(RUN_TEST, uri, TEST_NAMES[0])
        assert result["ok"] and [t["passed"] for t in result["tests"]] == [True]

    run(scenario)
