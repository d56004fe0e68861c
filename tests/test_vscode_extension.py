"""The VS Code extension: its TextMate grammar scopes every keyword, string, template and comment of the
bundled examples (tokenized as VS Code does, with vscode-textmate and vscode-oniguruma under node), its
manifest and language configuration hold together, and it packages as a .vsix with @vscode/vsce.

The npm packages are installed once into editors/vscode/node_modules (gitignored) and kept there; the
tests skip when node or npm is not installed."""

from __future__ import annotations

import json
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
# the valid golden cases use every construct of the language, the examples only some
SPECS = EXAMPLES + sorted((ROOT / "tests" / "cases" / "valid").glob("*/input.fsm"))

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
                 for m in re.finditer(r"\{\{.*?\}\}|\{%.*?%\}", text[start:end], re.DOTALL)]
    return {
        "comment": [(c.span.start, c.span.end) for c in parsed.comments],
        "string": strings,
        "keyword": list(_keywords(text)),
        "meta.embedded.inline.jinja": templates,
    }


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


@pytest.mark.slow
@needs_node
def test_the_extension_packages_as_a_vsix(node_modules: Path) -> None:
    import zipfile

    built = EXTENSION / "statewright.vsix"
    built.unlink(missing_ok=True)
    done = subprocess.run(["bash", str(EXTENSION / "scripts" / "package.sh")], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with zipfile.ZipFile(built) as vsix:
        names = set(vsix.namelist())
    assert {"extension/package.json", "extension/extension.js", "extension/language-configuration.json",
            "extension/syntaxes/statewright.tmLanguage.json"} <= names
    assert any(n.startswith("extension/node_modules/vscode-languageclient/") for n in names)
    assert not any(n.startswith("extension/node_modules/@vscode/vsce/") for n in names)
