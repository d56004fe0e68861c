"""One machine, every face: the differential harness.

Every test block of every example and golden case, the held-out-style machines of tests/cases/faces/, and
random machines with recorded test blocks (tests/support/face_machines.py) run on every face a user has:

  interpreter -O1   `statewright test` (the machine compiled in memory, the installed runtime)
  interpreter -O0   the same, as written (no optimization pass)
  runner            `statewright compile` (the runtime package statewright_runtime/ beside it), `--selftest`
  standalone runner `statewright compile --standalone` (one file, the runtime in it), its own `--selftest`
  temporal          `statewright test --temporal` against one `temporal server start-dev`, with a
                    `statewright worker` serving the corpus (every machine but a fixed sample of the random
                    ones, as CI time allows)
  temporal segment  the same with `--durability segment` (a run's calls made in segment activities, each
                    recorded by the activity's heartbeat)

For each test block the harness compares what the faces report (pass or fail, and every message) and the
run's trace written with content — its path, status, result and failure (kind, state, origin), every model
request (messages, schema, model), every transition with its cause, every guard, verdict, tool call and
person's answer — with times, latencies, ids and workspace paths taken out, and the order in which a
`join all`'s branches finished left free (on Temporal their calls complete as they will), and on the
Temporal faces the machines with a `join first` left out of the comparison (which branch finishes first is
a race there when scripted replies answer at once). It prints a table of every divergence; the target is
none.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import EXAMPLES, ROOT
from support.face_machines import random_machine, with_recorded_tests

from statewright import api
from statewright.runtime.testing import format_outcome, trace_file_names

pytestmark = pytest.mark.slow

RANDOM_MACHINES = int(os.environ.get("STATEWRIGHT_FACES_RANDOM", "200"))
# a few cases of the corpus only, by their names (fnmatch patterns, comma-separated: `faces_*,example_support*`),
# to check new machines on every face without running all of it
ONLY = [p for p in os.environ.get("STATEWRIGHT_FACES_ONLY", "").split(",") if p.strip()]
TEMPORAL_EVERY = 5  # the Temporal face runs every 5th random machine, and all the others (CI time)
# what differs between two runs of the same test on any face: when, how long, which run, where
VOLATILE = frozenset({"time", "seq", "latency_ms", "run_id", "workspace", "seconds", "elapsed", "arrived"})
TEMP_PATH = re.compile(r"/[^\s\"']*statewright-test-[^/\s\"']+")


@dataclass
class Case:
    name: str  # a Python identifier: runner modules are named after it
    path: Path
    tests: list[str]


# ---- the corpus -------------------------------------------------------------------------------------------


def _checked_with_tests(path: Path) -> bool:
    comp = api.check_path(str(path))
    return comp.ok and bool(api.runtime_machine(comp).tests)


def build_corpus(directory: Path) -> list[Case]:
    directory.mkdir(parents=True, exist_ok=True)
    sources: list[tuple[str, Path]] = []
    for example in EXAMPLES:  # a project in a folder: every file of it, each with its own tests
        files = sorted(example.parent.rglob("*.fsm")) if example.parent.name == example.stem else [example]
        sources += [(f"example_{p.stem}", p) for p in files]
    sources += [(f"faces_{p.stem}", p) for p in sorted((ROOT / "tests" / "cases" / "faces").glob("*.fsm"))]
    for path in sorted((ROOT / "tests" / "cases").rglob("*.fsm")):
        if "faces" not in path.parts and _checked_with_tests(path):
            where = path.relative_to(ROOT / "tests" / "cases").with_suffix("").as_posix()  # unique, as names must be
            sources.append((f"golden_{re.sub(r'[^A-Za-z0-9]+', '_', where)}", path))
    for seed in range(RANDOM_MACHINES):
        path = directory / f"random_{seed}.fsm"
        path.write_text(with_recorded_tests(random_machine(seed), [seed * 7 + 1, seed * 7 + 2]), encoding="utf-8")
        sources.append((f"random_{seed}", path))
    if ONLY:
        sources = [(name, path) for name, path in sources if any(fnmatch.fnmatchcase(name, p.strip()) for p in ONLY)]
        assert sources, f"no machine of the corpus matches STATEWRIGHT_FACES_ONLY={','.join(ONLY)} (patterns, as 'golden_*')"
    assert len({name for name, _ in sources}) == len(sources), "two machines of the corpus share a name"
    cases = []
    for name, path in sources:
        comp = api.check_path(str(path))
        assert comp.ok, (path, [d.message for d in comp.diagnostics if d.severity == "error"])
        cases.append(Case(name, path, [t.name for t in api.runtime_machine(comp).tests]))
    return cases


# ---- what a face did ---------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str):
        return TEMP_PATH.sub("<workspace>", value)
    return value


def _free_order(event: Any) -> Any:
    """An event with what real concurrency leaves free put in one order: the order in which the branches of
    a `join all` finished (every branch is joined whatever the order: their outputs, paths and events are in
    written order on every face, but on Temporal their calls are activities that complete as they will)."""
    if isinstance(event, dict) and event.get("event") == "join" and event.get("join") == "all" \
            and sorted(event.get("finished", [])) == sorted(event.get("joined", [])):
        return {**event, "finished": list(event["joined"])}
    return event


def read_trace(path: Path) -> list[Any]:
    if not path.exists():
        return ["<no trace>"]
    return [_free_order(_clean(json.loads(line)))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def outcome_blocks(text: str) -> dict[str, str]:
    """A self-test's printed outcomes, by test name (a PASS line, or a FAIL line with what follows it)."""
    blocks: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        head = re.match(r"(PASS|FAIL)  (.*?)(  \(.*\))?$", line)
        if head:
            current = head.group(2)
            blocks[current] = TEMP_PATH.sub("<workspace>", line)
        elif current is not None:
            blocks[current] += "\n" + TEMP_PATH.sub("<workspace>", line)
    return blocks


Observed = dict[tuple[str, str], tuple[str, list[Any]]]  # (case, test) -> (outcome text, trace)


def observe(cases: list[Case], outcomes: dict[str, str], traces: Path) -> Observed:
    seen: Observed = {}
    for case in cases:
        blocks = outcome_blocks(outcomes.get(case.name, ""))
        files = trace_file_names(case.tests)
        for test in case.tests:
            trace = read_trace(traces / case.name / files[test])
            seen[(case.name, test)] = (blocks.get(test, "<no outcome>"), trace)
    return seen


def interpreter_face(cases: list[Case], level: int, traces: Path) -> Observed:
    outcomes = {}
    for case in cases:
        comp = api.check_path(str(case.path))
        ran = api.run_tests(comp, level=level, trace_dir=str(traces / case.name), trace_content=True)
        outcomes[case.name] = "\n".join(format_outcome(o) for o in ran)
    return observe(cases, outcomes, traces)


def runner_face(cases: list[Case], form: str, directory: Path) -> Observed:
    runners, traces = directory / "runners", directory / "traces"
    runners.mkdir(parents=True)
    for case in cases:
        comp = api.check_path(str(case.path))
        (runners / f"{case.name}_runner.py").write_text(api.generate_runner(comp, standalone=form == "standalone"),
                                                       encoding="utf-8")
    if form == "package":
        api.write_runtime_package(runners / api.RUNTIME_DIR)
    report = directory / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    done = subprocess.run([sys.executable, "-m", "support.faces_driver", str(runners), str(traces), str(report)],
                          cwd=directory, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(report.read_text(encoding="utf-8"))
    seen: Observed = {}
    for case in cases:
        printed = results.get(f"{case.name}_runner", {"stdout": "", "stderr": "not run", "status": -1})
        blocks = outcome_blocks(printed["stdout"] + (printed["stderr"] if printed["status"] == -1 else ""))
        files = trace_file_names(case.tests)
        for test in case.tests:
            trace = read_trace(traces / f"{case.name}_runner" / files[test])
            seen[(case.name, test)] = (blocks.get(test, "<no outcome>: " + printed["stderr"][-300:]), trace)
    return seen


@pytest.fixture(scope="module")
def temporal_server() -> Iterator[Any]:
    from support.temporal_server import DevServer, temporal_cli

    if temporal_cli() is None:
        pytest.skip("no `temporal` program (statewright[temporal])")
    with DevServer() as running:
        yield running


def temporal_face(cases: list[Case], server: Any, directory: Path, durability: str = "call") -> Observed:
    """The cases' test blocks run on the cluster by one `statewright worker` serving them all, each call
    recorded as `durability` says."""
    from statewright.runtime.temporal import TemporalRunner, temporal_arun_tests

    # a worker reads the secrets its machines' tools name before it serves them (test blocks script those tools)
    secrets = {name: "faces-harness-secret" for case in cases
               for tool in api.runtime_machine(api.check_path(str(case.path))).tools.values() for name in tool.secrets}
    directory.mkdir(parents=True)
    paths = sorted({str(case.path) for case in cases})  # where they are: user tools import from beside them
    queue = f"faces-{durability}"
    worker = subprocess.Popen([sys.executable, "-m", "statewright", "worker", *paths, "--task-queue", queue,
                               "--temporal", server.address], cwd=directory, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env={**os.environ, **secrets})
    try:
        assert worker.stdout is not None
        deadline = time.monotonic() + 600
        said = []
        while time.monotonic() < deadline:
            line = worker.stdout.readline()
            said.append(line)
            if "serving" in line:
                break
            assert line or worker.poll() is None, "the worker exited: " + "".join(said)
        outcomes: dict[str, str] = {}

        async def run_all() -> None:
            gate = asyncio.Semaphore(8)

            async def one(case: Case) -> None:
                async with gate:
                    machine = api.runtime_machine(api.check_path(str(case.path)))
                    runner = TemporalRunner(machine, server.address, task_queue=queue, durability=durability)
                    ran = await temporal_arun_tests(machine, runner, trace_dir=str(directory / "traces" / case.name),
                                                    trace_content=True)
                    outcomes[case.name] = "\n".join(format_outcome(o) for o in ran)

            await asyncio.gather(*(one(case) for case in cases))

        asyncio.run(run_all())
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
    return observe(cases, outcomes, directory / "traces")


# ---- comparing ---------------------------------------------------------------------------------------------


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    if type(a) is not type(b):
        return f"{where or 'value'}: {json.dumps(a)[:160]} vs {json.dumps(b)[:160]}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}.{key}: only on {'the reference' if key in a else 'this face'}"
            found = first_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for index, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{where}[{index}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{where}: {len(a)} items vs {len(b)}"
        return None
    return None if a == b else f"{where or 'value'}: {json.dumps(a)[:160]} vs {json.dumps(b)[:160]}"


_JOIN_FIRST = re.compile(r"^\s*join\s+first\b", re.MULTILINE)


def divergences(reference: Observed, face: str, other: Observed, skip: frozenset[str] | set[str] = frozenset()
                ) -> list[tuple[str, str, str, str]]:
    """What `other` reports differently from the reference, test block by test block (but the machines in
    `skip`)."""
    rows = []
    for key, (outcome, trace) in reference.items():
        if key not in other or key[0] in skip:
            continue
        their_outcome, their_trace = other[key]
        if their_outcome != outcome:
            rows.append((*key, face, f"outcome: {outcome!r} vs {their_outcome!r}"[:300]))
            continue
        found = first_difference(trace, their_trace, "trace")
        if found:
            rows.append((*key, face, found))
    return rows


def table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = [f"{'machine':<32} {'test':<28} {'face':<16} first difference", "-" * 120]
    lines += [f"{m[:32]:<32} {t[:28]:<28} {f:<16} {d}" for m, t, f, d in rows]
    return "\n".join(lines)


# ---- the harness -------------------------------------------------------------------------------------------


def test_every_face_runs_every_machine_the_same_way(tmp_path: Path, temporal_server: Any) -> None:
    cases = build_corpus(tmp_path / "corpus")
    assert ONLY or len([c for c in cases if c.name.startswith("random_")]) >= min(RANDOM_MACHINES, 200)
    reference = interpreter_face(cases, 1, tmp_path / "o1")
    assert all(outcome != "<no outcome>" for outcome, _ in reference.values())
    rows: list[tuple[str, str, str, str]] = []
    rows += divergences(reference, "interpreter -O0", interpreter_face(cases, 0, tmp_path / "o0"))
    rows += divergences(reference, "runner", runner_face(cases, "package", tmp_path / "package"))
    rows += divergences(reference, "standalone runner", runner_face(cases, "standalone", tmp_path / "standalone"))
    sample = [c for c in cases if not c.name.startswith("random_") or int(c.name.split("_")[1]) % TEMPORAL_EVERY == 0]
    # On Temporal a `join first` takes the branches whose calls complete first, as they complete: with scripted
    # replies that answer at once that is a race (locally the first started wins among those answered at
    # once; docs/temporal.md). Their test blocks still run there; their outcomes are not compared.
    racing = {c.name for c in sample if _JOIN_FIRST.search(c.path.read_text(encoding="utf-8"))}
    rows += divergences(reference, "temporal", temporal_face(sample, temporal_server, tmp_path / "temporal"),
                        skip=racing)
    rows += divergences(reference, "temporal segment",
                        temporal_face(sample, temporal_server, tmp_path / "temporal-segment", "segment"), skip=racing)
    tests = len(reference)
    print(f"\n{len(cases)} machines, {tests} test blocks, 6 faces ({len(sample)} machines on Temporal, "
          f"{len(racing)} with a join first not compared there): "
          f"{len(rows)} divergences")
    if rows:
        print(table(rows))
    assert not rows, f"{len(rows)} divergences between faces:\n{table(rows)}"


def test_the_harness_finds_a_face_that_drifts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A face whose template set lacks the variant tests (the Temporal face's bug before it built its run
    from the one MachinePlan) is a divergence the harness reports: the harness can fail."""
    case_path = ROOT / "tests" / "cases" / "valid" / "variant-outputs" / "input.fsm"
    cases = [Case("variants", case_path, [t.name for t in api.runtime_machine(api.check_path(str(case_path))).tests])]
    reference = interpreter_face(cases, 1, tmp_path / "good")
    from statewright.runtime import plan

    monkeypatch.setattr(plan, "variant_tests", lambda types: {})
    broken = interpreter_face(cases, 1, tmp_path / "broken")
    rows = divergences(reference, "broken", broken)
    assert rows and all(face == "broken" for _, _, face, _ in rows)
    assert all(re.search(r"^outcome: .PASS .* vs .FAIL ", detail) for *_, detail in rows), table(rows)
