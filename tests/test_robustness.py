"""No input makes any command print a Python traceback: every bad file gets positioned diagnostics."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statewright.cli import main

ROOT = Path(__file__).parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.fsm"))
COMMANDS = (["check"], ["check", "--format", "json"], ["fmt", "--check"], ["graph"], ["dump", "--stage", "ast"],
            ["compile", "--standalone"])

NASTY: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b"   \n\t\n",
    "binary-garbage": bytes(random.Random(7).randrange(256) for _ in range(4096)),
    "invalid-utf8": b'machine m {\n    description "caf\xe9"\n}\n',
    "nul-bytes": b"machine m {\x00\x00}\n",
    "crlf": EXAMPLES[0].read_bytes().replace(b"\n", b"\r\n") if EXAMPLES else b"",
    "tabs": EXAMPLES[0].read_bytes().replace(b"    ", b"\t") if EXAMPLES else b"",
    "deep-parentheses": (b"machine m {\n    start state a {\n        when " + b"(" * 10_000 + b"true"
                         + b")" * 10_000 + b" -> b\n    }\n    final state b\n}\n"),
    "deep-not": (b"machine m {\n    start state a {\n        when " + b"not " * 10_000 + b"true -> b\n    }\n"
                 b"    final state b\n}\n"),
    "deep-minus": (b"machine m {\n    start state a {\n        when " + b"-" * 10_000 + b"1 > 0 -> b\n    }\n"
                   b"    final state b\n}\n"),
    "deep-list": (b"machine m {\n    input x: str = " + b"[" * 5_000 + b"]" * 5_000 + b"\n}\n"),
    "unterminated-string": b'machine m {\n    description "never closed\n}\n',
    "unterminated-triple": b'machine m {\n    description """never closed\n}\n',
    "only-comment": b"# nothing here\n",
    "bom": b"\xef\xbb\xbf" + (EXAMPLES[0].read_bytes() if EXAMPLES else b""),
    "lone-surrogate-escape": b'machine m {\n    description "\\ud800"\n}\n',
    "huge-number": b"machine m {\n    limits { steps 99999999999999999999999999999999999 }\n}\n",
}


def _assert_clean_exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(argv)
    captured = capsys.readouterr()
    assert rc in (0, 1), f"exit {rc} for {argv}: {captured.err[-2000:]}"
    assert "Traceback" not in captured.err and "Traceback" not in captured.out
    assert "internal error" not in captured.err
    return captured.out + captured.err


@pytest.mark.parametrize("name", sorted(NASTY))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_nasty_inputs_get_diagnostics_not_tracebacks(name: str, command: list[str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{name}.fsm"
    path.write_bytes(NASTY[name])
    out = _assert_clean_exit([*command, str(path)], capsys)
    if name in ("empty", "binary-garbage", "invalid-utf8", "unterminated-string", "deep-not"):
        assert "error[SW" in out or '"code": "SW' in out


def test_errors_have_positions_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, data in NASTY.items():
        path = tmp_path / f"{name}.fsm"
        path.write_bytes(data)
        main(["check", "--format", "json", str(path)])
        doc = json.loads(capsys.readouterr().out)
        for d in doc["diagnostics"]:
            assert d["range"] is not None, (name, d)
            assert d["range"]["start"]["line"] >= 1 and d["range"]["start"]["column"] >= 1


def test_a_ten_megabyte_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "big.fsm"
    comment = b"# " + b"x" * 1000 + b"\n"
    path.write_bytes(comment * 10_000 + b"machine m {\n    start state a\n}\n")
    assert path.stat().st_size > 10_000_000
    out = _assert_clean_exit(["check", str(path)], capsys)
    assert "SW3003" in out  # parsed to the end: a start state but no final state


def test_a_file_of_comments_with_a_syntax_error_is_reported_at_once() -> None:
    # many comment lines (headings, words) and no machine: reading them must not backtrack exponentially
    from statewright.grammar import parse_text

    text = "\n".join(f"### {n}. Outputs: a b c\n" for n in range(400)) + "\nmach"
    started = time.perf_counter()
    assert [d.code for d in parse_text(text).diagnostics] == ["SW1002"]  # `mach` where `machine` is due
    assert time.perf_counter() - started < 5


def _mutations(text: str, rng: random.Random) -> list[str]:
    lines = text.splitlines(keepends=True)
    out = []
    for _ in range(6):
        i = rng.randrange(len(lines))
        out.append("".join(lines[:i] + lines[i + 1:]))  # a deleted line
        out.append("".join(lines[:i] + [lines[i]] + lines[i:]))  # a duplicated line
        cut = rng.randrange(len(text))
        out.append(text[:cut])  # a cut file
        pos = rng.randrange(len(text))
        out.append(text[:pos] + rng.choice(["{", "}", '"', "->", "@", "\x01", "(", "]", "#", "\\"]) + text[pos:])
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_fuzzed_examples(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(path.name)
    for i, text in enumerate(_mutations(path.read_text(), rng)):
        target = tmp_path / f"m{i}.fsm"
        target.write_text(text)
        for command in (["check"], ["fmt", "--check"], ["graph"]):
            _assert_clean_exit([*command, str(target)], capsys)


def test_a_subprocess_never_prints_a_traceback(tmp_path: Path) -> None:
    """The same through the installed entry point, as a user runs it."""
    path = tmp_path / "garbage.fsm"
    path.write_bytes(NASTY["binary-garbage"])
    proc = subprocess.run([sys.executable, "-m", "statewright", "check", str(path)], check=False,
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "error[SW" in proc.stdout
