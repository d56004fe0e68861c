"""One machine over many inputs, concurrently: `statewright batch` and a runner's `batch` command.

Cases come from a JSON Lines file, one object per line: `{"inputs": {...}, "id": "...", "expect": ...}`
(`id` and `expect` optional). Each case is one run on the shared event loop, at most `concurrency` at a
time; each finished case is one line of results, written the moment it ends. A line that is not a case is
reported with its line number and skipped; every other case still runs. With a results file, runs are
checkpointed beside it, so `resume` skips every finished case (no model call of theirs is made again) and
continues the interrupted ones from their last checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from .engine import Engine
from .file_names import file_name_for
from .progress import wants_color
from .result import RunResult
from .structured import to_jsonable
from .trace import Trace, printable, redacted_json
from .untrusted import (
    JSON_SPACE,
    MAX_RECORD_CHARS,
    MAX_VALUE_CHARS,
    BorderError,
    read_json,
    read_lines,
    read_record,
)

MATCH_MODES = ("exact", "text", "contains")

class BatchError(Exception):
    """A batch that cannot start: unreadable cases file, an existing results file without `resume`."""


@dataclass(frozen=True)
class BatchCase:
    line: int  # 1-based, in the cases file
    id: str
    inputs: dict[str, Any]
    expect: Any = None
    has_expect: bool = False

    @property
    def run_id(self) -> str:
        """The case's id as a run id and a file name (file_names.py): itself when it is safe as one."""
        return file_name_for(self.id, f"line-{self.line}")


@dataclass(frozen=True)
class BadLine:
    line: int
    message: str


@dataclass(frozen=True)
class RefusedCase:
    """A case line too large or nested too deeply to be read (untrusted.py): the case fails with kind
    `input`, under the id `line-N` (its own id is inside what could not be read), and the batch goes on."""

    line: int
    message: str

    @property
    def id(self) -> str:
        return f"line-{self.line}"


def read_cases(path: str) -> Iterator[BatchCase | BadLine | RefusedCase]:
    """The cases of a JSON Lines file, streamed; each line that is not a case is a BadLine saying why, and
    each that is too large or too deep to read a RefusedCase."""
    seen: dict[str, int] = {}  # each case's id, and its run id (file_names.py), -> its line
    runs: dict[str, int] = {}
    try:
        handle = open(path, encoding="utf-8", errors="surrogateescape")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise BatchError(f"cannot read the cases file {path}: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(read_lines(handle, MAX_VALUE_CHARS), 1):
            if raw is None:
                yield RefusedCase(number, f"line {number} is too large: more than {MAX_VALUE_CHARS:,} characters, "
                                          "and at most that many are read")
                continue
            text = raw.strip(JSON_SPACE)
            if not text:
                continue
            case = _case(number, text)
            if isinstance(case, BatchCase):
                if case.id in seen:
                    case = BadLine(number, f"the id {case.id!r} is also the id of line {seen[case.id]}")
                elif case.run_id in runs:  # an id written as another's run id (`a_b-<hash>`)
                    case = BadLine(number, f"the id {case.id!r} is the run id of line {runs[case.run_id]}: "
                                           "choose another")
                else:
                    seen[case.id] = runs[case.run_id] = number
            yield case


def _case(number: int, text: str) -> BatchCase | BadLine | RefusedCase:
    try:
        data = read_json(text, f"line {number}")
    except BorderError as exc:
        return RefusedCase(number, str(exc))
    except ValueError as exc:
        return BadLine(number, f"not a JSON object: {exc}")
    if not isinstance(data, dict):
        return BadLine(number, f"a case is a JSON object like {{\"inputs\": {{...}}}}, not {type(data).__name__}")
    unknown = sorted(set(data) - {"inputs", "id", "expect"})
    if unknown:
        return BadLine(number, f"unknown key {unknown[0]!r}: a case has \"inputs\" and, optionally, \"id\" and "
                               "\"expect\" (put the machine's inputs under \"inputs\")")
    inputs = data.get("inputs", {})
    if not isinstance(inputs, dict):
        return BadLine(number, f"\"inputs\" must be an object of the machine's inputs, not {type(inputs).__name__}")
    case_id = data.get("id", f"line-{number}")
    if isinstance(case_id, bool) or not isinstance(case_id, (str, int)) or str(case_id) == "":
        return BadLine(number, "\"id\" must be a non-empty string or a number")
    return BatchCase(number, str(case_id), inputs, data.get("expect"), "expect" in data)


# ---- comparing a result with what a case expects ------------------------------------------------------


def result_matches(result: Any, expected: Any, mode: str = "exact") -> bool:
    """Whether a run's result is what a case expects.

    exact: the same JSON value, types included (true is not 1, 1 is not 1.0) — except that a result that
    is text (a final state's `result` template always renders text) matches an expected number or boolean
    written as that text ("90" matches 90). text: both as text, trimmed, spaces collapsed, case ignored.
    contains: the expected text appears in the result's text, case ignored."""
    actual = to_jsonable(result)
    if mode == "exact":
        if _same(actual, expected):
            return True
        return isinstance(actual, str) and isinstance(expected, (bool, int, float)) and (
            actual.strip() == json.dumps(expected))
    left, right = _text(actual), _text(expected)
    if mode == "text":
        return left == right
    if mode == "contains":
        return right in left
    raise ValueError(f"unknown match mode {mode!r}; the modes are {', '.join(MATCH_MODES)}")


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return " ".join(text.split()).casefold()


# ---- running ---------------------------------------------------------------------------------------


@dataclass
class BatchSummary:
    """What a batch did; `lines` are the result lines written (also when they went to stdout)."""

    cases: int = 0
    final: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # failure kind -> cases
    waiting: int = 0  # paused for a person's answer: each resumes on its own (`statewright resume RUN_ID`)
    invalid: int = 0
    skipped: int = 0  # finished in an earlier run of the batch (resume)
    expected: int = 0
    matched: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    latencies: list[float] = field(default_factory=list)
    interrupted: bool = False
    resume_hint: str = "statewright resume RUN_ID --answer '...'"  # how a waiting case is answered

    @property
    def ok(self) -> bool:
        return not self.waiting and self.ok_but_waiting

    @property
    def ok_but_waiting(self) -> bool:
        """No case failed, was invalid or missed its expect, and the batch was not interrupted (cases that
        wait for a person's answer aside)."""
        return not self.failed and not self.invalid and self.matched == self.expected and not self.interrupted

    def count(self, line: Mapping[str, Any]) -> None:
        """Add one result line (of this run of the batch, or of an earlier one being resumed)."""
        status = line.get("status")
        if status == "invalid":
            self.invalid += 1
            return
        self.latencies.append(float(line.get("latency_s") or 0.0))
        self.tokens += int(line.get("tokens") or 0)
        self.cost_usd += float(line.get("cost_usd") or 0.0)
        if status == "final":
            self.final += 1
        elif status == "waiting":
            self.waiting += 1
        else:
            failure = line.get("failure") or {}
            kind = str(failure.get("kind") or "failed") if isinstance(failure, Mapping) else "failed"
            self.failed[kind] = self.failed.get(kind, 0) + 1
        if "expect" in line:
            self.expected += 1
            self.matched += bool(line.get("matched"))

    def percentile(self, share: float) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]

    def table(self) -> str:
        failed = sum(self.failed.values())
        # kinds come from result lines, an earlier run's too (resume): escaped, as every line printed
        kinds = ", ".join(f"{printable(kind)} {count}" for kind, count in sorted(self.failed.items()))
        rows = [
            ("cases", f"{self.cases}" + (f" ({self.skipped} done by an earlier run of the batch)"
                                         if self.skipped else "")),
            ("done", f"{self.final} reached a final state"),
            ("failed", f"{failed}" + (f" ({kinds})" if kinds else "")),
        ]
        if self.waiting:
            waiting = f"{self.waiting} wait for a person's answer (answer each with: {self.resume_hint})"
            rows.append(("waiting", waiting))
        if self.invalid:
            rows.append(("invalid", f"{self.invalid} line(s) skipped"))
        if self.expected:
            share = 100.0 * self.matched / self.expected
            rows.append(("accuracy", f"{share:.1f}% ({self.matched} of {self.expected} cases with an expect)"))
        rows.append(("tokens", f"{self.tokens}"))
        rows.append(("cost", f"${self.cost_usd:.4f}"))
        p50, p95 = self.percentile(0.5), self.percentile(0.95)
        if p50 is not None and p95 is not None:
            rows.append(("latency", f"p50 {p50:.2f} s, p95 {p95:.2f} s"))
        if self.interrupted:
            rows.append(("stopped", "interrupted: cases still running were not finished"))
        return "\n".join(f"{name:<8}  {value}" for name, value in rows)


class _BatchProgress:
    """A progress bar (tqdm) on a terminal; one plain line per finished case when stderr is piped."""

    def __init__(self, total: int | None, quiet: bool, stream: IO[str]) -> None:
        self.stream = stream
        self.quiet = quiet
        self.bar: Any = None
        if not quiet and getattr(stream, "isatty", lambda: False)():
            try:
                from tqdm import tqdm
            except ImportError:  # runners need only pydantic and jinja2 (and litellm, which brings tqdm)
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, unit="case", file=stream, dynamic_ncols=True,
                                ascii=not wants_color(stream))

    def done(self, case: BatchCase, line: dict[str, Any]) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.update(1)
            return
        status = line["status"]
        what = f"final {line['final_state']}" if status == "final" else f"{status}"
        if status == "failed" and line.get("failure"):
            what += f" ({line['failure'].get('kind')})"
        self.stream.write(f"case {printable(case.id)} (line {case.line}): {printable(what)}, "
                          f"{line['latency_s']:.2f} s\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _line(case: BatchCase, result: RunResult, latency: float, match: str) -> dict[str, Any]:
    line: dict[str, Any] = {
        "id": case.id, "line": case.line, "inputs": case.inputs, "status": result.status,
        "final_state": result.final_state, "result": to_jsonable(result.result),
        "failure": result.failure.to_json() if result.failure else None,
        "path_length": len(result.path), "tokens": result.usage.tokens,
        "cost_usd": round(result.usage.cost_usd, 8), "latency_s": round(latency, 3), "run_id": result.run_id,
        **({"waiting": result.waiting.to_json()} if result.waiting is not None else {}),
    }
    if case.has_expect:
        line["expect"] = case.expect
        line["matched"] = result.ok and result_matches(result.result, case.expect, match)
    return line


def _refused_line(case: RefusedCase) -> dict[str, Any]:
    """The result line of a case that could not be read: failed, kind `input`, nothing run."""
    return {"id": case.id, "line": case.line, "inputs": None, "status": "failed", "final_state": None,
            "result": None, "failure": {"kind": "input", "message": case.message}, "path_length": 0, "tokens": 0,
            "cost_usd": 0.0, "latency_s": 0.0, "run_id": None}


def _earlier(out_path: str) -> dict[str, dict[str, Any]]:
    """The result lines a results file already holds, by case key (a crash may cut its last line short)."""
    done: dict[str, dict[str, Any]] = {}
    try:
        with open(out_path, encoding="utf-8", errors="surrogateescape") as handle:
            for raw in read_lines(handle, MAX_RECORD_CHARS):
                try:
                    line = read_record(raw or "", "a result line")
                except ValueError:
                    continue  # cut short by a crash, or not ours: the case runs again
                if not isinstance(line, dict):
                    continue
                if line.get("status") == "invalid":
                    done[f"line-{line.get('line')}"] = line
                elif isinstance(line.get("id"), str):
                    done[line["id"]] = line
    except FileNotFoundError:
        pass
    return done


def default_batch_checkpoint(out_path: str) -> str:
    return out_path + ".checkpoints.sqlite"


async def run_batch(engine: Engine, cases_path: str, *, out_path: str | None = None, concurrency: int = 8,
                    resume: bool = False, match: str = "exact", trace_dir: str | None = None,
                    trace_content: bool = False, quiet: bool = False, stream: IO[str] | None = None,
                    out_stream: IO[str] | None = None, summary: BatchSummary | None = None) -> BatchSummary:
    """Run every case of `cases_path` on `engine`, at most `concurrency` at a time; see the module doc.

    The engine's checkpoint store (if any) keeps each case's run under the case's id, so that a resumed
    batch continues interrupted cases instead of starting them over. `summary`, when given, is filled in
    as cases finish — it still says what was done when the batch is cancelled (Ctrl-C)."""
    if concurrency < 1:
        raise BatchError(f"concurrency must be at least 1, not {concurrency}")
    if match not in MATCH_MODES:
        raise BatchError(f"unknown match mode {match!r}; the modes are {', '.join(MATCH_MODES)}")
    finished = _finished_before(out_path, resume)
    store = engine.checkpoint
    if store is not None and not resume:
        _refuse_earlier_runs(store, cases_path)
    summary = summary if summary is not None else BatchSummary()
    progress = _BatchProgress(_count_lines(cases_path), quiet, stream or sys.stderr)
    # a local file written a line at a time: blocking the loop for it is quicker than handing it off
    out = open(out_path, "a", encoding="utf-8") if out_path is not None else None  # noqa: SIM115, ASYNC230
    sink = out if out is not None else (out_stream or sys.stdout)
    work = _BatchWork(engine, summary, progress, sink, match=match, trace_dir=trace_dir,
                      trace_content=trace_content, resume=resume, quiet=quiet)
    try:
        await work.run(cases_path, finished, concurrency)
    finally:
        progress.close()
        if out is not None:
            out.close()
    return summary


def _finished_before(out_path: str | None, resume: bool) -> dict[str, dict[str, Any]]:
    """The result lines of the cases a resumed batch finished before, by case id (none for a new batch,
    whose results file must not exist yet)."""
    if out_path is None:
        if resume:
            raise BatchError("resuming a batch needs --out FILE: the results file of the run to continue")
        return {}
    if not resume:
        if os.path.exists(out_path):
            raise BatchError(f"the results file {out_path} exists; continue the batch with --resume, or remove it")
        return {}
    return _earlier(out_path)


@dataclass
class _BatchWork:
    """One batch under way: a reader that queues the cases and settles the lines that run none, workers
    that run the queued cases, and one writer of result lines for both."""

    engine: Engine
    summary: BatchSummary
    progress: _BatchProgress
    sink: IO[str]
    match: str
    trace_dir: str | None
    trace_content: bool
    resume: bool
    quiet: bool

    async def run(self, cases_path: str, finished: Mapping[str, dict[str, Any]], concurrency: int) -> None:
        queue: asyncio.Queue[BatchCase | None] = asyncio.Queue(maxsize=concurrency * 2)
        # the reader and the workers end together: one that fails (or a Ctrl-C) cancels the others, so a
        # reader never waits on a full queue that no worker takes from any more
        tasks = [asyncio.ensure_future(self.feed(cases_path, finished, queue, concurrency)),
                 *(asyncio.ensure_future(self.work(queue)) for _ in range(concurrency))]
        try:
            await asyncio.gather(*tasks)
        except BaseException as exc:
            self.summary.interrupted = isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt))
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    def write(self, line: dict[str, Any]) -> None:
        # ASCII: any string, any sink, never fails, and nothing a terminal would obey; keys redacted
        self.sink.write(redacted_json(line, ascii=True) + "\n")
        self.sink.flush()
        self.summary.count(line)

    async def work(self, queue: asyncio.Queue[BatchCase | None]) -> None:
        while True:
            case = await queue.get()
            if case is None:
                return
            started = time.monotonic()
            result = await _run(self.engine, case, self.trace_dir, self.trace_content, self.resume)
            line = _line(case, result, time.monotonic() - started, self.match)
            self.write(line)
            self.progress.done(case, line)

    def settle(self, case: BadLine | RefusedCase) -> None:
        """A line that runs no case: invalid (skipped), or a case that fails with kind `input` at once."""
        if isinstance(case, BadLine):
            line = {"id": None, "line": case.line, "status": "invalid", "error": case.message}
            self.progress.note(f"line {case.line}: skipped: {printable(case.message)}")
        else:
            line = _refused_line(case)
            self.progress.note(f"case {case.id} (line {case.line}): failed (input): "  # id: line-N
                               f"{printable(case.message)}")
        self.write(line)

    async def feed(self, cases_path: str, finished: Mapping[str, dict[str, Any]],
                   queue: asyncio.Queue[BatchCase | None], concurrency: int) -> None:
        summary = self.summary
        for case in read_cases(cases_path):
            summary.cases += 1
            key = case.id if not isinstance(case, BadLine) else f"line-{case.line}"
            if key in finished:
                summary.skipped += 1
                summary.count(finished[key])
                if not self.quiet:
                    self.progress.note(f"case {printable(key)} (line {case.line}): finished before, skipped")
            elif isinstance(case, BatchCase):
                await queue.put(case)
            else:
                self.settle(case)
        for _ in range(concurrency):
            await queue.put(None)


def _refuse_earlier_runs(store: Any, cases_path: str) -> None:
    """A new batch (no --resume) never takes up runs an earlier batch left in its checkpoint database:
    a case whose id names a stored run would silently continue it (or return its old result)."""
    stored = {str(run["run_id"]) for run in store.list_runs()}
    if not stored:
        return
    clashes = [case.run_id for case in read_cases(cases_path) if isinstance(case, BatchCase) and case.run_id in stored]
    if clashes:
        shown = ", ".join(repr(c) for c in clashes[:3]) + (f" and {len(clashes) - 3} more" if len(clashes) > 3 else "")
        raise BatchError(f"the checkpoint database {store.path} already holds runs of cases {shown} from an earlier "
                         "batch; continue that batch with --resume (and its --out file), or remove the database "
                         "to start again")


async def _run(engine: Engine, case: BatchCase, trace_dir: str | None, trace_content: bool,
               resume: bool) -> RunResult:
    trace = Trace(os.path.join(trace_dir, case.run_id + ".jsonl"), content=trace_content) if trace_dir else None
    try:
        store = engine.checkpoint
        # a new batch holds no earlier run of its cases (refused at its start): only a resumed one looks
        if resume and store is not None and store.exists(case.run_id):
            return await engine.arun(None, run_id=case.run_id, resume=True, trace=trace)
        return await engine.arun(case.inputs, run_id=case.run_id, trace=trace)
    finally:
        if trace is not None:
            trace.close()


def _count_lines(path: str) -> int | None:
    """How many case lines `read_cases` will read (the lines with text, as it splits and strips them)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return sum(1 for raw in read_lines(handle, MAX_VALUE_CHARS) if raw is None or raw.strip(JSON_SPACE))
    except OSError:
        return None


def summary_json(summary: BatchSummary) -> dict[str, Any]:
    return {"cases": summary.cases, "final": summary.final, "failed": dict(summary.failed), "waiting": summary.waiting,
            "invalid": summary.invalid, "skipped": summary.skipped, "expected": summary.expected,
            "matched": summary.matched, "tokens": summary.tokens, "cost_usd": round(summary.cost_usd, 8),
            "p50_s": summary.percentile(0.5), "p95_s": summary.percentile(0.95),
            "interrupted": summary.interrupted}

