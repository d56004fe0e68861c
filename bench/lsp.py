"""Benchmark: how long a 1,000-state file waits for its diagnostics in `statewright lsp`, against `check`.

Starts `statewright lsp` with a real LSP client (pygls's, over stdio), opens a generated machine of
1,000 working states (bench/compile_scaling.py's shape) and times didOpen -> publishDiagnostics, then an
edit -> the diagnostics of the edited version. The same file is timed with `statewright check FILE` (the
command, start-up included) and with `api.check_text` in process. The target: the server's diagnostics
within 2x of `statewright check`.

    python bench/lsp.py [--states N] [--repeat N]

The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from compile_scaling import generate_machine
from support.lsp_session import start, stop

from statewright import api

TARGET = 2.0


async def time_server(path: Path, text: str, repeat: int) -> tuple[list[float], list[float]]:
    session = await start()
    try:
        warm = path.with_name("warm.fsm").as_uri()  # the server's first compile imports the checks
        session.open(warm, generate_machine(10))
        await session.diagnostics(warm)
        opens, edits = [], []
        for i in range(repeat):
            uri = path.with_name(f"open{i}.fsm").as_uri()
            started = time.perf_counter()
            session.open(uri, text)
            found = await session.diagnostics(uri)
            opens.append(time.perf_counter() - started)
            assert not found, [d.message for d in found[:3]]
            started = time.perf_counter()
            session.replace(uri, text.replace("input threshold: int = 80", f"input threshold: int = {81 + i}"))
            await session.diagnostics(uri)
            edits.append(time.perf_counter() - started)
        return opens, edits
    finally:
        await stop(session)


def time_check_command(path: Path, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "statewright", "check", str(path)], check=True,
                       capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def time_check_api(text: str, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        api.check_text(text, "bench.fsm")
        times.append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each (the median is reported)")
    args = parser.parse_args(argv)
    text = generate_machine(args.states)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.fsm"
        path.write_text(text, encoding="utf-8")
        command = statistics.median(time_check_command(path, args.repeat))
        in_process = statistics.median(time_check_api(text, args.repeat))
        opens, edits = asyncio.run(time_server(path, text, args.repeat))
    opened, edited = statistics.median(opens), statistics.median(edits)
    result = {
        "states": args.states,
        "chars": len(text),
        "check_command_seconds": round(command, 4),
        "check_api_seconds": round(in_process, 4),
        "lsp_open_seconds": round(opened, 4),
        "lsp_edit_seconds": round(edited, 4),
        "open_vs_check": round(opened / command, 3),
        "edit_vs_check": round(edited / command, 3),
        "open_vs_check_in_process": round(opened / in_process, 3),
        "target": TARGET,
        "ok": max(opened, edited) <= TARGET * command,
    }
    print(f"{args.states} states, {len(text):,} chars: statewright check {command:.3f} s "
          f"(in process {in_process:.3f} s); lsp open -> diagnostics {opened:.3f} s, edit -> diagnostics "
          f"{edited:.3f} s ({opened / command:.2f}x and {edited / command:.2f}x check; target <= {TARGET}x)")
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
