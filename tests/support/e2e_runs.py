"""What the end-to-end tests share: running the CLI and generated runners as users do, and reading traces."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# the bundled examples: a machine in a file of its own, or a project in a folder of its own (examples/NAME/,
# its entry machine in NAME.fsm); the side-by-side ports (examples/langgraph/, crewai/) are tests/test_ports.py's
EXAMPLES = sorted([*(ROOT / "examples").glob("*.fsm"),
                   *(d / f"{d.name}.fsm" for d in (ROOT / "examples").iterdir() if (d / f"{d.name}.fsm").is_file())])
EXAMPLE_IDS = [p.stem for p in EXAMPLES]

# Trace fields that differ between two runs doing the same thing: clock readings, durations, the random
# run id, and the per-run workspace directory (a temporary one under test blocks). Every other field —
# seq, states, models, tokens, messages, replies, guards, verdicts, transitions — must match exactly.
VOLATILE_TRACE_FIELDS = frozenset({"time", "run_id", "seconds", "workspace"})


def normalized_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """An event without its volatile fields: those in VOLATILE_TRACE_FIELDS and every `*_ms` duration
    (latency_ms of calls and tools), at the top level and inside nested `events` lists."""
    kept: dict[str, Any] = {}
    for key, value in event.items():
        if key in VOLATILE_TRACE_FIELDS or key.endswith("_ms"):
            continue
        if key == "events" and isinstance(value, list):
            value = [normalized_event(v) if isinstance(v, Mapping) else v for v in value]
        kept[key] = value
    return kept


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def normalized_trace(path: Path) -> list[dict[str, Any]]:
    return [normalized_event(e) for e in read_events(path)]


def cli(*args: str, cwd: Path | None = None, env: Mapping[str, str | None] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`statewright ARGS...` in a fresh process."""
    return subprocess.run([sys.executable, "-m", "statewright", *args], capture_output=True, text=True,
                          check=False, cwd=cwd, env=_environment(env), timeout=timeout)


def compile_runner(spec: Path, output: Path, *extra: str) -> Path:
    """`statewright compile SPEC -o OUTPUT [EXTRA...]`; the generated runner's path (beside it, unless
    EXTRA says --standalone, the runtime package statewright_runtime/)."""
    done = cli("compile", str(spec), "-o", str(output), *extra)
    assert done.returncode == 0, done.stderr
    return output


def runner_process(python: str | Path, runner: Path, *args: str, cwd: Path | None = None,
                   env: Mapping[str, str | None] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), str(runner), *args], capture_output=True, text=True, check=False,
                          cwd=cwd, env=_environment(env), timeout=timeout)


def import_runner(path: Path, name: str) -> ModuleType:
    """A generated runner imported from its file, as a module of its own. Its directory is on sys.path while
    it is imported, as it is for a script, so that a runner finds the runtime package beside it (the
    package stays imported: runners of one runtime share it, wherever each was written)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves the module's annotations through sys.modules
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def runtime_module_of(runner: ModuleType, name: str) -> ModuleType:
    """The module `name` of the runtime a generated runner runs on: of the package beside it, or of the
    one a one-file runner carries."""
    package = runner.MachineSpec.__module__.rpartition(".")[0]
    return importlib.import_module(f"{package}.{name}")


def wait_for(condition: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    """Poll until `condition()` holds; fails the test (naming `what`) if it never does."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def files_containing(roots: Sequence[Path], needle: bytes) -> list[str]:
    """Every file under `roots` whose bytes contain `needle`."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and needle in path.read_bytes():
                found.append(str(path))
    return found


def _environment(extra: Mapping[str, str | None] | None) -> dict[str, str]:
    """This process's environment, with `extra`'s variables set (or, where one is None, unset)."""
    env = dict(os.environ)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.pop("STATEWRIGHT_SCRIPT_LOG", None)
    for name, value in (extra or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env
