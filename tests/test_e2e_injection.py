"""Awkward text everywhere a spec holds text — quotes, triple quotes, backslashes, template markup, unicode,
code-like fragments — compiles to a lint-clean runner, and reaches the model verbatim: what the scripted
provider receives is exactly what the spec says (templates rendered once, values never re-rendered)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import import_runner, runtime_module_of
from support.echo_server import echo_server

from statewright import api
from statewright.runtime.runner_cli import run_machine as run
from statewright.runtime.scripted import Script, ScriptedClient
from statewright.runtime.trace import printable

ROOT = Path(__file__).resolve().parents[1]

AWKWARD = (
    'a "quoted" word, \'single\' ones, triple """ and \'\'\' quotes; back\\slash, \\n, \\\\ and \\u0041; '
    "{{ braces }} {% if x %}tag{% endif %} {# note #}; \"); import os; os.system(\"x; '''); raise SystemExit('x; "
    "unicode é ß 漢字 🙂 \u200f rtl \u2028 separator; tab\there\nand a second line"
)
CONDITION = "the review agrees: " + AWKWARD
TOPIC = "topic: " + AWKWARD


def fsm(text: str) -> str:
    """`text` as a double-quoted string literal of the language."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return '"' + "".join(c if c.isprintable() or c == " " else f"\\u{ord(c):04x}" for c in escaped) + '"'


def literal_template(text: str) -> str:
    """A template (prompt, instruction) that renders to `text` itself."""
    return "{% raw %}" + text + "{% endraw %}"


# a triple-quoted prompt: literal, so it may hold quotes and backslashes unescaped — but not three quotes
CRITIC_PROMPT = ('"""\n            A critic\'s prompt, "quoted" and back\\slashed: '
                 + literal_template(AWKWARD.replace('"""', "").replace("\n", " ")) + '\n        """')

SPEC = f"""\
machine awkward {{
    description {fsm(AWKWARD)}
    input topic: str
    input note: str = {fsm(AWKWARD)}
    model "openai/gpt-4o-mini"

    type Finding {{
        text: str {fsm(AWKWARD)}
        level: {fsm(AWKWARD)} | "plain"
    }}

    agent writer {{
        prompt {fsm("Prompt. " + literal_template(AWKWARD))}
    }}

    agent critic {{
        prompt {CRITIC_PROMPT}
    }}

    start state write {{
        agent writer
        do {fsm(literal_template(AWKWARD) + " | {{ topic }} | {{ note }}")}
        -> judge
    }}

    state judge {{
        agent critic
        do {fsm("Judge it. " + literal_template(AWKWARD))}
        output Finding
        when output.level == {fsm(AWKWARD)} and output.text == {fsm(AWKWARD)} -> review
        otherwise -> rejected
    }}

    state review {{
        agent critic
        do "Review it."
        when {fsm(CONDITION)} -> done
        otherwise -> rejected
    }}

    final state done {{
        result "{{{{ write.output }}}}"
    }}

    final state rejected

    test {fsm("awkward: " + AWKWARD)} {{
        input {{
            topic {fsm(TOPIC)}
        }}
        reply write {fsm(AWKWARD)}
        reply judge {{
            text {fsm(AWKWARD)}
            level {fsm(AWKWARD)}
        }}
        reply review {fsm(AWKWARD)}
        verdict review {fsm(CONDITION)}
        expect path [write, judge, review, done]
        expect result {fsm(AWKWARD)}
        expect output write {fsm(AWKWARD)}
        expect output judge {{
            level {fsm(AWKWARD)}
        }}
        expect output review visit 1 contains {fsm(AWKWARD[10:60])}
        expect instruction write {fsm(f"{AWKWARD} | {TOPIC} | {AWKWARD}")}
        expect instruction judge contains {fsm(AWKWARD)}
    }}
}}
"""


@pytest.fixture(scope="module")
def compiled() -> Any:
    comp = api.check_text(SPEC, "awkward.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics]
    return comp


@pytest.fixture(scope="module", params=["package", "standalone"])
def runner(request: pytest.FixtureRequest, compiled: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runner in each form: beside the runtime package (written through the Python API), and alone."""
    path = tmp_path_factory.mktemp("awkward") / "awkward_runner.py"
    return api.Machine(compiled).compile(path, standalone=request.param == "standalone")


def test_the_runner_for_awkward_text_is_ruff_clean(runner: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), str(runner)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-4000:]


def test_awkward_text_is_canonical_after_formatting_and_formats_the_same_again() -> None:
    for source in (SPEC, SECRETS_SPEC):
        once = api.format_text(source, "awkward.fsm")
        assert once.text is not None, once.diagnostics
        again = api.format_text(once.text, "awkward.fsm")
        assert again.text == once.text
        assert api.check_text(once.text, "awkward.fsm").ir == api.check_text(source, "awkward.fsm").ir


def test_the_runner_passes_its_test_block_and_keeps_every_text(runner: Path) -> None:
    done = subprocess.run([sys.executable, str(runner), "--selftest"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # the name as a terminal shows it: line breaks and bidirectional controls escaped, every other character kept
    assert done.stdout.strip() == printable(f"PASS  awkward: {AWKWARD}").replace("\n", "\\n")
    assert "\\u200f" in done.stdout and "\\u2028" in done.stdout and "漢字 🙂" in done.stdout


def received_messages(machine: Any, script: Script, tmp_path: Path) -> list[dict[str, Any]]:
    client = ScriptedClient(script)
    result = run(machine, {"topic": TOPIC}, client=client, workspace=str(tmp_path))
    assert result.ok and result.result == AWKWARD, result.failure
    return client.received


def test_the_model_receives_every_text_verbatim(compiled: Any, runner: Path, tmp_path: Path) -> None:
    module = import_runner(runner, "awkward_runner")
    try:
        assert module.MACHINE.description == AWKWARD
        generated_script = module.Script.from_test(module.MACHINE, module.MACHINE.tests[0])
        generated_client = runtime_module_of(module, "scripted").ScriptedClient(generated_script)
        result = module.run({"topic": TOPIC}, client=generated_client, workspace=str(tmp_path / "generated"))
        assert result.ok and result.result == AWKWARD, result.failure
        generated = generated_client.received
    finally:
        sys.modules.pop("awkward_runner", None)

    machine: Any = api.runtime_machine(compiled)
    interpreted = received_messages(machine, Script.from_test(machine, machine.tests[0]), tmp_path / "interpreted")
    assert generated == interpreted  # both faces send the same requests, byte for byte

    calls = {(c["role"], c["state"]): c for c in interpreted}
    write = calls["agent", "write"]["messages"]
    assert write[0] == {"role": "system", "content": "Prompt. " + AWKWARD}
    assert write[-1] == {"role": "user", "content": f"{AWKWARD} | {TOPIC} | {AWKWARD}"}

    judge = calls["agent", "judge"]
    assert judge["messages"][0]["content"].startswith('A critic\'s prompt, "quoted" and back\\slashed: ')
    assert judge["messages"][-1]["content"] == "Judge it. " + AWKWARD
    schema = judge["options"]["response_schema"]
    assert schema["properties"]["text"]["description"] == AWKWARD
    assert schema["properties"]["level"]["enum"] == [AWKWARD, "plain"]

    verifier = "\n".join(m["content"] for m in calls["verifier", "review"]["messages"])
    assert CONDITION in verifier  # the condition, as written, for the verifier alone
    assert AWKWARD in verifier  # and the state's output it judges
    assert all(CONDITION not in m["content"] for c in interpreted if c["role"] == "agent" for m in c["messages"])


# ---- tool secrets: header and query text, and `${...}` in every form ------------------------------------

# Header values are printable ASCII (SW2042), so they get every awkward ASCII piece; query parameters are
# percent-encoded, so they get everything. `$${` is the text `${`; `${KEY}` is the secret.
ASCII_AWKWARD = "".join(c for c in AWKWARD if " " <= c <= "~")
HEADER_TEXT = ASCII_AWKWARD + " $${KEY} $$ $ ${}x"
QUERY_NAME = "q " + AWKWARD
QUERY_TEXT = AWKWARD + " $${KEY} and the key ${KEY}"
SECRET_VALUE = "v4lue-" + "x" * 12

SECRETS_SPEC = f"""\
machine awkward_secrets {{
    input url: str

    tool std.http_get {{
        allow ["127.0.0.1"]
        secrets [KEY]
        headers {{
            "X-Awkward" {fsm(HEADER_TEXT.replace("${}", "$${}"))}
            Authorization {fsm("Bearer ${KEY}")}
        }}
        query {{
            {fsm(QUERY_NAME)} {fsm(QUERY_TEXT)}
        }}
    }}

    start state fetch {{
        call std.http_get(url = url)
        -> done
    }}

    final state done
}}
"""


def test_awkward_headers_and_query_compile_to_a_clean_deterministic_runner(tmp_path: Path) -> None:
    compiled = api.check_text(SECRETS_SPEC, "awkward_secrets.fsm")
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    runner = tmp_path / "awkward_secrets_runner.py"
    runner.write_text(api.generate_runner(compiled, standalone=True), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), str(runner)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-4000:]
    code = ("import hashlib, sys; from statewright.api import check_text, generate_runner; "
            "comp = check_text(sys.stdin.read(), 'awkward_secrets.fsm'); "
            "print([hashlib.sha256(generate_runner(comp, standalone=s).encode()).hexdigest() for s in (0, 1)])")
    digests = {subprocess.run([sys.executable, "-c", code], input=SECRETS_SPEC, capture_output=True, text=True,
                              check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("0", "7", "99")}
    assert len(digests) == 1

    module = import_runner(runner, "awkward_secrets_runner")
    try:
        tool = module.MACHINE.tools["std.http_get"]
        assert tool.secrets == ("KEY",)
        assert tool.headers == (("X-Awkward", HEADER_TEXT.replace("${}", "$${}")), ("Authorization", "Bearer ${KEY}"))
        assert tool.query == ((QUERY_NAME, QUERY_TEXT),)
    finally:
        sys.modules.pop("awkward_secrets_runner", None)


def test_awkward_headers_and_query_reach_the_server_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEY", SECRET_VALUE)
    for variable in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(variable, raising=False)
    machine = api.load_text(SECRETS_SPEC, "awkward_secrets.fsm")
    with echo_server() as server:
        result = machine.run({"url": f"{server.url}/echo"}, workspace=str(tmp_path))
        assert result.ok, result.failure
        [request] = server.requests
    assert request["headers"]["x-awkward"] == HEADER_TEXT.replace("$${", "${").replace("$${}", "${}")
    assert request["headers"]["authorization"] == f"Bearer {SECRET_VALUE}"
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(request["path"]).query)
    assert query == {QUERY_NAME: [AWKWARD + " ${KEY} and the key " + SECRET_VALUE]}
    assert SECRET_VALUE not in json.dumps(result.to_json())


# ---- patterns: a regex is text the spec hands to three engines and to generated code ---------------

# A pattern every engine reads alike, full of what breaks naive quoting: quotes of both kinds (three in a
# row too), backslashes, template braces, unicode, a tab.
PATTERN = r'^"{3}[\\' + "'" + r'"]*\{\{ x \}\} ' + "é漢🙂\t" + r'(a|"""|\\n|\{% raw %\})+$'
MATCHING = '"""' + "\\'\"" + "{{ x }} é漢🙂\t" + 'a"""\\n{% raw %}'

PATTERN_SPEC = f"""\
machine patterns {{
    input code: str matches {fsm(PATTERN)} = {fsm(MATCHING)}

    type Coded {{
        code: str len 1..200 matches {fsm(PATTERN)} {fsm(AWKWARD)}
    }}

    agent coder {{
        prompt "You write codes."
    }}

    start state write {{
        agent coder
        do "Write a code like {{{{ code }}}}."
        output Coded
        -> done
    }}

    final state done {{
        result "{{{{ write.output.code }}}}"
    }}

    test "a matching code" {{
        reply write {{
            code {fsm(MATCHING)}
        }}
        expect result {fsm(MATCHING)}
    }}
}}
"""


@pytest.fixture(scope="module")
def pattern_runner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    comp = api.check_text(PATTERN_SPEC, "patterns.fsm")
    assert comp.ok and not comp.diagnostics, [(d.code, d.message) for d in comp.diagnostics]
    path = tmp_path_factory.mktemp("patterns") / "patterns_runner.py"
    path.write_text(api.generate_runner(comp, standalone=True), encoding="utf-8")
    return path


def test_a_hostile_pattern_is_read_alike_and_matches_what_it_should() -> None:
    import re

    assert re.search(PATTERN, MATCHING)
    assert not re.search(PATTERN, MATCHING.replace("{{ x }}", "{{ y }}"))


def test_a_runner_with_hostile_patterns_is_ruff_clean_and_passes_its_test(pattern_runner: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), str(pattern_runner)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout[-4000:]
    done = subprocess.run([sys.executable, str(pattern_runner), "--selftest"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0 and "PASS  a matching code" in done.stdout, done.stdout + done.stderr


def test_the_model_gets_the_pattern_verbatim_and_replies_are_held_to_it(pattern_runner: Path) -> None:
    module = import_runner(pattern_runner, "patterns_runner")
    try:
        schema = module.MACHINE.states["write"].output.model_json_schema()
        assert schema["properties"]["code"]["pattern"] == PATTERN
        assert schema["properties"]["code"]["description"] == AWKWARD
        ok = module.run({}, script={"agent": {"write": [{"code": MATCHING}]}})
        assert ok.ok and ok.result == MATCHING
        bad = module.run({}, script={"agent": {"write": [{"code": "{{ x }}"}] * 3}})
        assert bad.status == "failed" and bad.failure.kind == "output" and "pattern" in bad.failure.message
        wrong_input = module.run({"code": "plain"}, script={"agent": {"write": [{"code": MATCHING}]}})
        assert wrong_input.status == "failed" and wrong_input.failure.kind == "input"
    finally:
        sys.modules.pop("patterns_runner", None)


def test_a_pattern_is_generated_the_same_whatever_the_hash_seed(tmp_path: Path) -> None:
    spec = tmp_path / "patterns.fsm"
    spec.write_text(PATTERN_SPEC, encoding="utf-8")
    outputs = []
    for seed in ("0", "7"):
        for form in ([], ["--standalone"]):
            out = tmp_path / seed / "runner.py"
            out.parent.mkdir(exist_ok=True)
            done = subprocess.run([sys.executable, "-m", "statewright", "compile", str(spec), "-o", str(out), *form],
                                  capture_output=True, text=True, check=False,
                                  env={**__import__("os").environ, "PYTHONHASHSEED": seed})
            assert done.returncode == 0, done.stderr
            outputs.append(out.read_bytes())
    assert outputs[:2] == outputs[2:] and outputs[0] != outputs[1]
