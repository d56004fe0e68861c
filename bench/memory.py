"""Benchmark: peak memory of reading a large spec, per byte of source, for every face that reads untrusted text.

Spec files of three shapes are generated at 1, 4 and 16 MB:

    long_strings     four strings of a quarter of the file each (description, field doc, test data)
    many_states      the realistic machine of bench/compile_scaling.py, with as many states as fit
    long_templates   four instructions, each a Jinja template of a quarter of the file (prose with a value
                     read every 150 characters and an `if` block every 450)

and each is read by each face, each in a child process of its own:

    check      `statewright check FILE` (the CLI, in-process in the child)
    fmt        what `statewright fmt` does to the file (api.format_bytes)
    lsp        the language server's analysis of the open document, its symbol index included
    designer   the designer's evaluation of a draft (compile_text as far as loading the machine, without
               keeping the syntax tree, as evaluate_attempt does before it runs the draft's tests)

The child first runs its face on a small file of the same shape (20 kB), so that imports, the grammar
and every cache are loaded, and takes its peak resident set size then as its baseline (VmHWM, Linux); it then runs the face on the
large file. The ratio is (peak - baseline) / bytes of source. The target is at most 20 bytes per byte at
every size. A valid draft's evaluation loads it: the generated module is rendered as the template goes, compressed
as it is written, and compiled a few statements at a time as it is read back (a syntax tree of the whole
module took 250 bytes per byte of spec, and its text is some four times the spec), which the designer
face measures along with the check, the lowering and the code generation before it. The syntax tree is
let go before the module is rendered, and the IR before it runs: the loaded machine (its functions,
pydantic classes, slotted specs and source map, some 8 bytes a byte of many_states) takes their place.

    python bench/memory.py [--sizes 1,4,16] [--shapes ...] [--faces ...] [--designer-mb 16]

The last line is `RESULT {json}`: per face, shape and size the ratio, and the largest ratio of all.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_scaling import generate_machine

MB = 1_000_000  # 16 MB stays under the 16 MiB the compiler reads
RATIO_TARGET = 20.0
WARM_UP_BYTES = 20_000
SHAPES = ("long_strings", "many_states", "long_templates")
FACES = ("check", "fmt", "lsp", "designer")


def long_strings(size: int) -> str:
    """Four strings of a quarter of the file each, in the places a string is data, not a template: the
    machine's description, a field's documentation, a test's scripted reply and its expected result."""
    unit = 'Lorem ipsum dolor sit amet, \\"quoted\\" words\\n '
    text = (unit * (size // 4 // len(unit) + 1))[: size // 4]
    return f"""machine long_strings {{
    description "{text}"
    agent w {{ prompt "You fill in forms." }}
    type Form {{
        body: str "{text}"
    }}
    start state a {{
        agent w
        do "Fill in the form."
        output Form
        -> b
    }}
    final state b {{ result "{{{{ a.output.body }}}}" }}
    test "long" {{
        reply a {{ body "{text}" }}
        expect result "{text}"
    }}
}}
"""


def many_states(size: int) -> str:
    """compile_scaling's machine with as many states as make at most `size` bytes."""
    per_state = len(generate_machine(1000)) / 1000
    n = max(10, int(size / per_state))
    text = generate_machine(n)
    while len(text.encode("utf-8")) > size and n > 10:
        n = int(n * 0.99)
        text = generate_machine(n)
    return text


def long_templates(size: int) -> str:
    """Four agent states, each instruction a template of a quarter of the file: paragraphs of prose, each
    reading three values and holding one `{% if %}` block, as long prompts are written."""
    unit = ("Write a section about {{ topic }} for {{ audience }}. Explain the background first, then the main "
            "idea, then the consequences that matter in practice; give one concrete example and say where it "
            "stops applying. {% if strict %}Check every claim against the sources you were given and say which "
            "one supports it.{% endif %} Keep the tone plain and precise, and use the terms the reader already "
            "knows. The last section said: {{ topic | upper }}.\n")
    body = unit * (size // 4 // len(unit))
    head = ["machine long_templates {", "    input topic: str", '    input audience: str = "engineers"',
            "    input strict: bool = false", '    agent w { prompt "You write." }']
    lines = list(head)
    for i in range(4):
        kind = "start state" if i == 0 else "state"
        previous = "" if i == 0 else f"Earlier: {{{{ s{i - 1}.output }}}}\n"
        lines.append(f'    {kind} s{i} {{\n        agent w\n        do """\n{previous}{body}\n"""\n'
                     f"        -> s{i + 1}\n    }}")
    lines += ["    final state s4", "}"]
    return "\n".join(lines) + "\n"


GENERATORS = {"long_strings": long_strings, "many_states": many_states, "long_templates": long_templates}

# The child: run a face on the small spec, take the peak as the baseline, run it on the large file.
_CHILD = r"""
import contextlib, io, json, os, sys
face, small, large = sys.argv[1], sys.argv[2], sys.argv[3]

def run(path):
    if face == "check":
        from statewright.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return main(["check", path])
    if face == "fmt":
        from statewright import api
        with open(path, "rb") as f:
            return len(api.format_bytes(f.read(), path).diagnostics)
    if face == "lsp":
        from statewright.lsp.analysis import Analysis
        with open(path, encoding="utf-8") as f:
            analysis = Analysis("file://" + os.path.abspath(path), 1, f.read())
        analysis.index
        return len(analysis.compilation.diagnostics)
    if face == "designer":
        from statewright.designer.design import compile_text
        with open(path, encoding="utf-8") as f:
            return len(compile_text(f.read(), path, stop_after="load", keep_syntax=False).diagnostics)
    raise SystemExit(f"unknown face {face}")

def peak():
    # the high-water mark of this process's own memory: VmHWM starts afresh at exec, where ru_maxrss keeps
    # the peak of the parent the child was forked from
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

run(small)
base = peak()
outcome = run(large)
print(json.dumps({"base": base, "peak": peak(), "outcome": outcome}))
"""


def measure(face: str, small: Path, large: Path) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-c", _CHILD, face, str(small), str(large)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{face} on {large.name} failed:\n{done.stderr[-2000:]}")
    found: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16", help="file sizes in MB")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--faces", default=",".join(FACES))
    parser.add_argument("--designer-mb", type=float, default=16.0, help="the largest size the designer face runs at")
    args = parser.parse_args(argv)
    sizes = [float(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    faces = args.faces.split(",")
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="statewright-memory-") as tmp:
        for shape in shapes:
            # the warm-up: the same shape, small (a machine of a few states uses less of the runtime than
            # a large one of the same shape: what it imports on first use is not memory per byte)
            small = Path(tmp) / f"{shape}-small.fsm"
            small.write_text(GENERATORS[shape](WARM_UP_BYTES), encoding="utf-8")
            for size in sizes:
                large = Path(tmp) / f"{shape}-{size:g}mb.fsm"
                large.write_text(GENERATORS[shape](int(size * MB)), encoding="utf-8")
                source_bytes = large.stat().st_size
                for face in faces:
                    if face == "designer" and size > args.designer_mb:
                        continue
                    found = measure(face, small, large)
                    ratio = (found["peak"] - found["base"]) / source_bytes
                    key = f"{face}/{shape}/{size:g}MB"
                    ratios[key] = round(ratio, 2)
                    print(f"{key:<34} {source_bytes / MB:6.2f} MB source  base {found['base'] / MB:6.1f} MB  "
                          f"peak {found['peak'] / MB:7.1f} MB  {ratio:6.2f} bytes/byte  (outcome "
                          f"{found['outcome']})", flush=True)
                large.unlink()
    worst = max(ratios.values(), default=0.0)
    result = {"ratios": ratios, "worst": worst, "target": RATIO_TARGET, "ok": worst <= RATIO_TARGET}
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
