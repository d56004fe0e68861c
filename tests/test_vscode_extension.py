"""The VS Code extension: its TextMate grammar scopes every keyword, string, template and comment of the
bundled examples (tokenized as VS Code does, with vscode-textmate and vscode-oniguruma under node), its
manifest and language configuration hold together, and it packages as a .vsix with @vscode/vsce.

The npm packages are installed once into editors/vscode/node_modules (gitignored) and kept there; the
tests skip when node or npm is not installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from lark import Lark, Token

from statewright.grammar import ast, parse_text
from statewright.grammar.node import Node, field_names
from statewright.grammar.parser import GRAMMAR_PATH, _FieldNamesPostLex, _keyword_as_name, _parsing

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = ROOT / "editors" / "vscode"
EXAMPLES = sorted((ROOT / "examples").glob("*.fsm"))
TOKEN_CASES = sorted((ROOT / "tests" / "cases" / "tokens").glob("*/input.fsm"))
# the valid golden cases use every construct of the language, the examples only some
SPECS = EXAMPLES + sorted((ROOT / "tests" / "cases" / "valid").glob("*/input.fsm")) + TOKEN_CASES
UPDATE = os.environ.get("UPDATE_EXPECT") == "1"

needs_node = pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None,
                                reason="node and npm are not installed")


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """editors/vscode/node_modules, installed from package-lock.json the first time (about 20 s)."""
    modules = EXTENSION / "node_modules"
    wanted = ("vscode-textmate", "vscode-oniguruma", "vscode-languageclient", "@vscode/vsce")
    if not all((modules / name).is_dir() for name in wanted):
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=EXTENSION,
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            pytest.skip(f"npm could not install the extension's packages: {done.stderr[-500:]}")
    return modules


# ---- what the grammar must scope -------------------------------------------------------------------


def _strings(machine: ast.Machine) -> Iterator[ast.String]:
    stack: list[object] = [machine]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.String):
            yield node
        elif isinstance(node, tuple):
            stack.extend(node)
        elif isinstance(node, Node):
            stack.extend(getattr(node, name) for name in field_names(node) if name != "span")


_KEYWORD_PARSER: list[Lark] = []


def _keywords(text: str) -> Iterator[tuple[int, int]]:
    """Where the lexer reads a keyword (a name used as a name is not one)."""
    if not _KEYWORD_PARSER:
        _KEYWORD_PARSER.append(Lark(GRAMMAR_PATH.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                                    keep_all_tokens=True, propagate_positions=True, postlex=_FieldNamesPostLex()))
    parser = _KEYWORD_PARSER[0]
    words = {t.name for t in parser.terminals if t.pattern.type == "str" and re.fullmatch(r"[a-z_]+", t.pattern.value)}
    with _parsing(text):  # the post-lexer reads `len:` as a field's name, as the real parser does
        tree = parser.parse(text, on_error=_keyword_as_name(parser))
    for token in tree.scan_values(lambda v: isinstance(v, Token)):
        if token.type in words:
            yield token.start_pos or 0, token.end_pos or 0


def expectations(text: str) -> dict[str, list[tuple[int, int]]]:
    """For each kind of text, where it is: (start, end) character offsets."""
    parsed = parse_text(text, "x.fsm")
    assert parsed.machine is not None
    # a header or query name may be written bare (`key "..."`): only quoted text is a string
    strings = [(s.span.start, s.span.end) for s in _strings(parsed.machine) if text[s.span.start] == '"']
    templates = [(start + m.start(), start + m.end()) for start, end in strings
                 for m in _TEMPLATE.finditer(text[start:end]) if not _inside_raw(text[start:end], m.start())]
    return {
        "comment": [(c.span.start, c.span.end) for c in parsed.comments],
        "string": strings,
        "keyword": list(_keywords(text)),
        "meta.embedded.inline.jinja": templates,
    }


_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_RAW = re.compile(r"\{%-?\s*raw\s*-?%\}(.*?)\{%-?\s*endraw\s*-?%\}", re.DOTALL)


def _inside_raw(string: str, at: int) -> bool:
    """Whether offset `at` of a string's text is in the body of a {% raw %} block: text, not a template."""
    return any(m.start(1) <= at < m.end(1) for m in _RAW.finditer(string))


SCOPES = {
    "comment": ("comment.",),
    "string": ("string.",),
    "keyword": ("keyword.", "storage.", "constant.language.", "support.type."),  # `list` is a type
    "meta.embedded.inline.jinja": ("meta.embedded.inline.jinja",),
}


def tokenize(paths: list[Path]) -> dict[str, list[list[object]]]:
    done = subprocess.run(["node", str(EXTENSION / "scripts" / "tokenize.js"), *map(str, paths)],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@needs_node
def test_every_keyword_string_template_and_comment_of_the_examples_gets_its_scope(node_modules: Path) -> None:
    specs = [p for p in SPECS if all(ord(ch) <= 0xFFFF for ch in p.read_text(encoding="utf-8"))]
    assert set(EXAMPLES) <= set(specs), "offsets below assume JavaScript's string indexes"
    tokens = tokenize(specs)
    problems = []
    for path in specs:
        text = path.read_text(encoding="utf-8")
        starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        scopes: list[list[str]] = [[] for _ in text]
        for line, start, end, names in tokens[str(path)]:
            for i in range(starts[line] + start, starts[line] + end):  # type: ignore[operator]
                scopes[i] = names[1:]  # type: ignore[index]
        for kind, ranges in expectations(text).items():
            for start, end in ranges:
                unscoped = [i for i in range(start, end) if not text[i].isspace()
                            and not any(s.startswith(SCOPES[kind]) for s in scopes[i])]
                if unscoped:
                    line = text.count("\n", 0, start) + 1
                    problems.append(f"{path.relative_to(ROOT)}:{line}: {kind} {text[start:end][:40]!r} has "
                                    f"{scopes[unscoped[0]] or 'no scope beyond source.statewright'} at "
                                    f"{text[unscoped[0]]!r}")
    assert problems == []


@needs_node
def test_the_grammar_tells_a_keyword_used_as_a_name_from_a_number_and_an_operator(node_modules: Path,
                                                                                    tmp_path: Path) -> None:
    sample = tmp_path / "sample.fsm"
    sample.write_text('machine m {\n    state s {\n        when output.score >= 1.5 and not x -> done max 2\n'
                      '    }\n}\n', encoding="utf-8")
    line = [t for t in tokenize([sample])[str(sample)] if t[0] == 2]
    text = sample.read_text(encoding="utf-8").splitlines()[2]
    by_text = {text[t[1]:t[2]]: t[3][-1] for t in line}  # type: ignore[misc]
    assert by_text[">="] == "keyword.operator.comparison.statewright"
    assert by_text["1.5"] == "constant.numeric.float.statewright"
    assert by_text["->"] == "keyword.operator.arrow.statewright"
    assert by_text["and"] == by_text["not"] == "keyword.operator.logical.statewright"
    assert by_text["2"] == "constant.numeric.integer.statewright"


@needs_node
def test_the_grammar_tells_a_function_from_a_bound_and_scopes_if_and_else(node_modules: Path, tmp_path: Path) -> None:
    sample = tmp_path / "sample.fsm"
    sample.write_text('machine m {\n    state s {\n        when max(output.xs) > 1 if sum(output.xs) > 0 else false'
                      ' -> done max rounds\n    }\n}\n', encoding="utf-8")
    line = [t for t in tokenize([sample])[str(sample)] if t[0] == 2]
    text = sample.read_text(encoding="utf-8").splitlines()[2]
    scopes = [(text[t[1]:t[2]], t[3][-1]) for t in line]  # type: ignore[misc]
    assert ("max", "support.function.builtin.statewright") in scopes
    assert ("sum", "support.function.builtin.statewright") in scopes
    assert ("if", "keyword.control.statewright") in scopes and ("else", "keyword.control.statewright") in scopes
    assert [s for t, s in scopes if t == "max"] == ["support.function.builtin.statewright",
                                                    "keyword.control.statewright"]


# words that the lexer reads as keywords only at the start of a statement: a variable, a state or a field may
# be named so (`var set`, `timeout approve`, `merge merge <- output`)
_STATEMENT_WORDS = re.compile(r"\b(set|append|extend|merge|approve|reject|edit|before)\b")


@needs_node
def test_update_and_approval_words_are_keywords_exactly_where_the_lexer_reads_keywords(node_modules: Path) -> None:
    specs = [p for p in SPECS if all(ord(ch) <= 0xFFFF for ch in p.read_text(encoding="utf-8"))]
    tokens = tokenize(specs)
    problems, seen = [], 0
    for path in specs:
        text = path.read_text(encoding="utf-8")
        starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        scopes: list[list[str]] = [[] for _ in text]
        for line, start, end, names in tokens[str(path)]:
            for i in range(starts[line] + start, starts[line] + end):  # type: ignore[operator]
                scopes[i] = names[1:]  # type: ignore[index]
        keywords = {start for start, _ in _keywords(text)}
        for m in _STATEMENT_WORDS.finditer(text):
            if any(s.startswith(("string.", "comment.", "meta.embedded")) for s in scopes[m.start()]):
                continue
            seen += 1
            scoped = any(s.startswith(("keyword.", "storage.")) for s in scopes[m.start()])
            if scoped != (m.start() in keywords):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: {m.group()!r} is "
                                f"{'a name' if scoped else 'a keyword'} but has {scopes[m.start()]}")
    assert seen > 30 and problems == []


# ---- tokenization goldens: what each token of a case is scoped as ------------------------------------


def _token_lines(text: str, tokens: list[list[object]]) -> list[str]:
    """One line per token that is not blank: `LINE:COLUMN "text" scope...` (1-based, the root scope left out)."""
    lines = text.split("\n")
    out = []
    for line, start, end, scopes in tokens:
        piece = lines[line][start:end]  # type: ignore[index, misc]
        if piece.strip():
            out.append(f"{line + 1}:{start + 1} {json.dumps(piece, ensure_ascii=False)} "  # type: ignore[operator]
                       + " ".join(scopes[1:]))  # type: ignore[index]
    return out


@needs_node
def test_the_tokens_of_each_case_are_its_golden(node_modules: Path) -> None:
    """tests/cases/tokens/NAME/input.fsm is tokenized as VS Code tokenizes it; tokens.txt holds the result
    (UPDATE_EXPECT=1 rewrites it: review the diff)."""
    tokens = tokenize(TOKEN_CASES)
    assert len(TOKEN_CASES) >= 3
    for case in TOKEN_CASES:
        got = "\n".join(_token_lines(case.read_text(encoding="utf-8"), tokens[str(case)])) + "\n"
        golden = case.parent / "tokens.txt"
        if UPDATE:
            golden.write_text(got, encoding="utf-8")
        assert golden.read_text(encoding="utf-8") == got, f"{golden} differs (UPDATE_EXPECT=1 rewrites it)"


def _scoped(case: str, node_modules: Path) -> list[tuple[int, str, list[str]]]:
    path = ROOT / "tests" / "cases" / "tokens" / case / "input.fsm"
    lines = path.read_text(encoding="utf-8").split("\n")
    return [(int(line) + 1, lines[line][start:end], scopes[1:])  # type: ignore[index, misc, call-overload]
            for line, start, end, scopes in tokenize([path])[str(path)]]


@needs_node
def test_a_duration_is_one_number_token(node_modules: Path) -> None:
    tokens = {text: scopes for _, text, scopes in _scoped("durations", node_modules)}
    for duration in ("1.5h", "1d"):
        assert tokens[duration] == ["constant.numeric.duration.statewright"]
    assert tokens["300"] == ["constant.numeric.integer.statewright"]


@needs_node
def test_a_field_named_like_a_keyword_is_a_name_and_constraints_are_keywords(node_modules: Path) -> None:
    tokens = _scoped("keywords-as-field-names", node_modules)

    def scopes_of(word: str, line: int) -> list[list[str]]:
        return [scopes for at, text, scopes in tokens if at == line and text.strip() == word]

    def keyword(scopes: list[str]) -> bool:
        return any(s.startswith(("keyword.", "storage.")) for s in scopes)

    assert [keyword(s) for s in scopes_of("len", 2) + scopes_of("matches", 2)] == [True, True]  # constraints
    for line, word in ((5, "len"), (6, "matches"), (7, "model"), (8, "description")):  # fields
        assert scopes_of(word, line) == [["variable.other.field.statewright"]], (line, word)
    assert [keyword(s) for s in scopes_of("len", 6)] == [True]  # `matches: list[str] len ..5`
    assert not any(keyword(s) for s in scopes_of("len", 19)[:1] + scopes_of("matches", 19))  # output.len, .matches
    assert scopes_of("len", 19)[1] == ["support.function.builtin.statewright"]  # len(...) is the function
    for word in ("len", "matches", "model", "description"):  # the keys of a test's reply
        assert scopes_of(word, 29) == [["variable.other.key.statewright"]], word
    assert not any(keyword(s) for s in scopes_of("len", 24) + scopes_of("model", 24))  # in a template


@needs_node
def test_the_inside_of_a_raw_block_is_text_not_a_template(node_modules: Path) -> None:
    tokens = _scoped("raw-template", node_modules)
    embedded = [(line, text) for line, text, scopes in tokens if "meta.embedded.inline.jinja" in scopes]
    raw = [(line, text) for line, text, scopes in tokens if scopes[-1:] == ["meta.raw.jinja"]]
    assert raw == [(7, "Keep {{ braces }} and {% tags %} as written."), (13, "{{ this }} and "), (13, "{% that %}")]
    assert [(line, text) for line, text in embedded if "raw" in text] == [
        (7, "{% raw %}"), (7, "{% endraw %}"), (13, "{% raw %}"), (13, "{% endraw %}")]
    assert (13, "topic") in embedded and (6, "topic") in embedded  # templates outside the raw blocks
    # the escaped quotes inside the raw block do not end the string; the line after is code again
    assert [scopes for line, text, scopes in tokens if line == 14 and text == "->"] == [
        ["keyword.operator.arrow.statewright"]]


# ---- the manifest -----------------------------------------------------------------------------------


def test_the_manifest_names_the_grammar_the_language_configuration_and_the_server() -> None:
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    [language] = manifest["contributes"]["languages"]
    assert language["extensions"] == [".fsm"]
    configuration = json.loads((EXTENSION / language["configuration"]).read_text(encoding="utf-8"))
    assert configuration["comments"]["lineComment"] == "#"
    assert ["{", "}"] in configuration["brackets"]
    [grammar] = manifest["contributes"]["grammars"]
    tm = json.loads((EXTENSION / grammar["path"]).read_text(encoding="utf-8"))
    assert tm["scopeName"] == grammar["scopeName"] == "source.statewright"
    assert manifest["contributes"]["configuration"]["properties"]["statewright.server.args"]["default"] == ["lsp"]
    client = (EXTENSION / manifest["main"]).read_text(encoding="utf-8")
    assert "statewright.explainCode" in client and "TransportKind.stdio" in client


def harness(scenario: dict[str, object]) -> dict[str, list[object]]:
    """What the extension does in `scenario`, run under node with stand-ins for VS Code and the client."""
    done = subprocess.run(["node", str(ROOT / "tests" / "support" / "vscode_harness.js"), str(EXTENSION),
                           json.dumps(scenario)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@needs_node
def test_the_palette_commands_are_registered_and_the_settings_reach_the_server() -> None:
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    settings = {"statewright.compileOnSave": True, "statewright.runnerPath": "build/{stem}.py",
                "statewright.runnerStandalone": True}
    seen = harness({"settings": settings})
    assert sorted(seen["registered"]) == sorted(c["command"] for c in manifest["contributes"]["commands"])
    [made] = seen["clients"]
    options = made["clientOptions"]  # type: ignore[index]
    assert options["initializationOptions"] == {
        "explainLink": "command:statewright.explain?%5B%22{code}%22%5D", "compileOnSave": True,
        "runnerPath": "build/{stem}.py", "runnerStandalone": True}
    assert options["synchronize"] == {"configurationSection": "statewright"}
    properties = manifest["contributes"]["configuration"]["properties"]
    json_type = {bool: "boolean", str: "string"}
    for name, value in settings.items():
        assert name in properties and properties[name]["type"] == json_type[type(value)]
    defaults = harness({})["clients"][0]["clientOptions"]["initializationOptions"]  # type: ignore[index]
    assert {key: defaults[key] for key in ("compileOnSave", "runnerPath", "runnerStandalone")} == {
        key.removeprefix("statewright."): properties[key]["default"]
        for key in ("statewright.compileOnSave", "statewright.runnerPath", "statewright.runnerStandalone")}


@needs_node
def test_the_palette_runs_the_server_commands_on_the_active_file() -> None:
    from statewright.lsp import running

    spec = {"uri": "file:///w/flow.fsm", "languageId": "statewright", "line": 3}
    seen = harness({"editor": spec, "run": ["statewright.runFileTests", "statewright.compileFile"]})
    assert [(r["method"], r["params"]) for r in seen["requests"]] == [  # type: ignore[index]
        ("workspace/executeCommand", {"command": running.RUN_TESTS_COMMAND, "arguments": [spec["uri"]]}),
        ("workspace/executeCommand", {"command": running.COMPILE_COMMAND, "arguments": [spec["uri"]]})]
    python = {"uri": "file:///w/flow_runner.py", "languageId": "python", "line": 41}
    seen = harness({"editor": python, "run": ["statewright.runFileTests"]})
    assert seen["requests"] == [] and seen["messages"] == [["warning", "statewright: open a .fsm file first"]]


@needs_node
def test_go_to_spec_asks_the_server_for_the_runner_line_and_opens_the_spec_there() -> None:
    from statewright.lsp import running

    python = {"uri": "file:///w/flow_runner.py", "languageId": "python", "line": 41}
    where = {"uri": "file:///w/flow.fsm", "range": {"start": {"line": 12, "character": 8},
                                                    "end": {"line": 12, "character": 8}}}
    seen = harness({"editor": python, "run": ["statewright.goToSpec"],
                    "replies": {running.RUNNER_SOURCE_COMMAND: where}})
    assert [r["params"] for r in seen["requests"]] == [  # type: ignore[index]
        {"command": running.RUNNER_SOURCE_COMMAND, "arguments": [python["uri"], 41]}]
    assert seen["opened"] == [{"parsed": "file:///w/flow.fsm"}]
    [shown] = seen["shown"]
    at = {"line": 12, "character": 8}
    assert shown["options"] == {"selection": {"start": at, "end": at}}  # type: ignore[index]
    seen = harness({"editor": python, "run": ["statewright.goToSpec"]})  # the server found nothing
    assert seen["opened"] == [] and seen["messages"] == [
        ["info", ("statewright: line 42 comes from no one place of the spec (the runtime, an import or a type's "
                  "class)")]]


def test_the_server_commands_the_extension_sends_are_those_the_server_answers() -> None:
    from statewright.lsp import features, running

    client = (EXTENSION / "extension.js").read_text(encoding="utf-8")
    sent = set(re.findall(r'"(statewright\.\w+)"', client))
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    own = {c["command"] for c in manifest["contributes"]["commands"]}
    settings = manifest["contributes"]["configuration"]["properties"]
    sent = {name for name in sent if not any(key.startswith(name + ".") for key in settings)}  # a section
    answered = {features.EXPLAIN_COMMAND, running.RUN_TEST_COMMAND, running.RUN_TESTS_COMMAND,
                running.COMPILE_COMMAND, running.RUNNER_SOURCE_COMMAND}
    assert sent - own == answered - {running.RUN_TEST_COMMAND}  # a test block's lens is the server's own
    assert not own & answered  # the client registers the server's commands itself: a clash would fail


@pytest.mark.slow
@needs_node
def test_the_extension_packages_as_a_vsix(node_modules: Path) -> None:
    import zipfile

    built = EXTENSION / "statewright.vsix"
    built.unlink(missing_ok=True)
    done = subprocess.run(["bash", str(EXTENSION / "scripts" / "package.sh")], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # vsce suggests bundling the JavaScript (the client's node_modules); it must have nothing else to say
    warnings = [line for line in (done.stdout + done.stderr).splitlines() if "WARNING" in line]
    assert all("you should bundle your extension" in line for line in warnings), warnings
    with zipfile.ZipFile(built) as vsix:
        names = set(vsix.namelist())
    assert {"extension/package.json", "extension/extension.js", "extension/language-configuration.json",
            "extension/syntaxes/statewright.tmLanguage.json"} <= names
    assert any(n.startswith("extension/node_modules/vscode-languageclient/") for n in names)
    assert not any(n.startswith("extension/node_modules/@vscode/vsce/") for n in names)
    assert "extension/.gitignore" not in names and not any(n.startswith("extension/scripts/") for n in names)
