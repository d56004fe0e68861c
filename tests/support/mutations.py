"""Mutations of the bundled examples for the checker's fuzz test: tokens deleted, duplicated and swapped,
hostile text inserted (template delimiters, quotes, escapes, huge numbers, deep nesting)."""

from __future__ import annotations

import random
import re
from pathlib import Path

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.fsm"))

_TOKEN = re.compile(r'"""(?:[^"]|"(?!""))*"""|"(?:[^"\\\n]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|[0-9.]+|\s+|.', re.DOTALL)

HOSTILE = [
    "}}", "{{", "{%", "%}", "{#", "#}", "{{ }}", "{% endif %}", "{% for x in y %}", '"', '"""', "\\", "\\u",
    "\\ud800", "\x00", "\u202e", "\u200b", "\ufeff", "🙂", "\r", "\t", "\r\n", "#", "->", "=>", "max 0",
    "visits 0", "retries 1000000", "otherwise stay", "none", "None", "self", "loop", "range", "output",
    "9" * 120, "1e999", "-0", "0.0000000001",
    "{{ 10**5000 }}", "{{ 10**(10**10) }}", '{{ "a" * 100000000 }}', "{{ [1] * 10**9 }}",
    "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "{{ " + "[" * 3000 + "]" * 3000 + " }}",
    "{% if 1 %}" * 300, "{{ " + "not " * 3000 + "1 }}", "{{ x" + "|upper" * 500 + " }}",
    "(" * 3000, "[" * 3000, "{" * 3000, "not " * 3000, "- " * 3000, "a." * 2000 + "b",
    "when " + "(" * 500 + "output" + ")" * 500 + " -> done", "{{ " + "1" * 5000 + " }}",
    "{% include 'x' %}", "{{ self }}", "{{ loop.index }}", "{{ x.output.y }}", "{{ x.visits }}",
    '"{{ "}}" }}"', "state", "final", "start", "machine", "agent", "type", "test", "reply", "expect",
]


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def mutate(text: str, rng: random.Random) -> str:
    """`text` with one to four random mutations."""
    toks = tokens(text)
    for _ in range(rng.randint(1, 4)):
        if not toks:
            toks = [rng.choice(HOSTILE)]
        i = rng.randrange(len(toks))
        op = rng.random()
        if op < 0.25:
            del toks[i]
        elif op < 0.4:
            toks.insert(i, toks[i])
        elif op < 0.55 and len(toks) > 1:
            j = min(len(toks) - 1, i + rng.randint(1, 3))
            toks[i], toks[j] = toks[j], toks[i]
        elif op < 0.7:
            toks[i] = rng.choice(toks)
        else:
            hostile = rng.choice(HOSTILE)
            # inside a string literal half the time: templates are where most of the hostile text matters
            if toks[i].startswith('"') and len(toks[i]) > 2 and rng.random() < 0.5:
                cut = rng.randint(1, len(toks[i]) - 1)
                toks[i] = toks[i][:cut] + hostile + toks[i][cut:]
            else:
                toks.insert(i, hostile)
    return "".join(toks)


def mutants(count: int, seed: int) -> list[tuple[str, str]]:
    """(name, text) for `count` mutants of the examples, the same for the same seed."""
    rng = random.Random(seed)
    sources = [(p.stem, p.read_text(encoding="utf-8")) for p in EXAMPLES]
    out = []
    for n in range(count):
        name, text = sources[n % len(sources)]
        out.append((f"{name}-{n}", mutate(text, rng)))
    return out
