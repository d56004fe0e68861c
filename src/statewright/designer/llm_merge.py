"""LLM-judged state merging: accepted merges rewrite the source and come back as a diff for review.

A model judges whether two states' work overlaps; accepted merges rewrite the source and come back as a
unified diff for review.

Asking about every pair costs n(n-1)/2 calls. Only O(n) candidate pairs are considered:
  - adjacent states joined by a single unconditional edge (at most one pair per state),
  - states that share an agent, consecutive in source order (at most one pair per state),
  - each state's most similar instruction by word-set similarity (at most `k` pairs per state),
so at most (2 + k) * n pairs, and 3n with the default k = 1.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compiler import ir
from ..runtime.untrusted import read_json
from .design import compile_text
from .source_edit import SourceEditError, merge_state_into

MERGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"merge": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["merge", "reason"],
}


@dataclass(frozen=True)
class Candidate:
    first: str  # the state that is kept (earlier in source order, or the start state)
    second: str
    why: str  # "adjacent" | "same agent" | "similar instruction"


@dataclass
class MergeReport:
    ok: bool
    candidates: list[Candidate]
    accepted: list[tuple[Candidate, str]] = field(default_factory=list)
    rejected: list[tuple[Candidate, str]] = field(default_factory=list)
    diff: str = ""
    source: str = ""
    log: list[str] = field(default_factory=list)
    calls: int = 0  # questions asked: one per candidate, less those a merge made moot
    failing_tests: list[str] = field(default_factory=list)  # test blocks that fail after the merges


def candidate_pairs(machine: ir.Machine, *, k: int = 1) -> list[Candidate]:
    """At most (2 + k) pairs per state; never a final state, and never the start state as the one dropped."""
    order = {s.name: i for i, s in enumerate(machine.states)}
    by_name = {s.name: s for s in machine.states}
    seen: set[tuple[str, str]] = set()
    out: list[Candidate] = []

    def add(a: str, b: str, why: str) -> None:
        if a == b or a not in by_name or b not in by_name:
            return
        first, second = _keep_first(machine, order, a, b)
        if by_name[first].final or by_name[second].final:
            return
        if any(s.parallel is not None or s.each is not None or s.branch is not None
               for s in (by_name[first], by_name[second])):
            return  # a fan-out's shape is its own: its states are not merged by a model's judgement
        pair = (first, second)
        if pair not in seen:
            seen.add(pair)
            out.append(Candidate(first, second, why))

    for s in machine.states:
        if len(s.transitions) == 1 and s.transitions[0].kind == "always":
            add(s.name, s.transitions[0].target, "adjacent")

    by_agent: dict[str, list[str]] = defaultdict(list)
    for s in machine.states:
        if s.agent:
            by_agent[s.agent].append(s.name)
    for names in by_agent.values():
        for a, b in itertools.pairwise(names):
            add(a, b, "same agent")

    for a, b in _most_similar_instructions(machine, k):
        add(a, b, "similar instruction")
    return out


def _keep_first(machine: ir.Machine, order: dict[str, int], a: str, b: str) -> tuple[str, str]:
    """The pair in merge order: the start state is always kept, otherwise the earlier state in the source."""
    first, second = sorted((a, b), key=lambda n: (n != machine.start, order.get(n, len(order))))
    return first, second


_WORDS = re.compile(r"[a-z0-9]+")


def _most_similar_instructions(machine: ir.Machine, k: int) -> list[tuple[str, str]]:
    """For each state, its k most similar other states by Jaccard similarity of instruction words.

    An inverted index visits only states that share a word; words shared by more than √n states carry
    little signal and are skipped, which keeps the work near-linear.
    """
    words = {s.name: set(_WORDS.findall(s.instruction.lower())) for s in machine.states if s.instruction}
    index: dict[str, list[str]] = defaultdict(list)
    for name, ws in words.items():
        for w in sorted(ws):
            index[w].append(name)
    cap = max(4, int(len(words) ** 0.5))
    pairs: list[tuple[str, str]] = []
    for name, ws in words.items():
        shared: dict[str, int] = defaultdict(int)
        for w in ws:
            postings = index[w]
            if len(postings) > cap:
                continue
            for other in postings:
                if other != name:
                    shared[other] += 1
        scored = sorted(
            ((n / len(ws | words[other]), other) for other, n in shared.items()), key=lambda x: (-x[0], x[1])
        )
        pairs.extend((name, other) for score, other in scored[:k] if score >= 0.3)
    return pairs


def judge_and_merge(
    text: str,
    path: str,
    *,
    model: str,
    client: Any = None,
    trace: Any = None,
    k: int = 1,
) -> MergeReport:
    """Ask the model about each candidate pair; apply accepted merges to the source, re-checking each.

    A merge is kept only when the merged source checks without errors (so every cycle is still bounded and
    no transition is left that could never fire). With no merge accepted the source comes back byte for
    byte. A model that fails makes the report not ok and changes nothing.
    """
    from ..runtime.client import ModelError

    machine = compile_text(text, path).ir
    if machine is None:
        return MergeReport(False, [], source=text, log=["the machine has errors; fix them before optimizing"])
    candidates = candidate_pairs(machine, k=k)
    n = len(machine.states)
    report = MergeReport(True, candidates, source=text)
    report.log.append(f"{len(candidates)} candidate pair(s) for {n} states "
                      f"(all pairs would be {n * (n - 1) // 2})")
    if client is None:
        from ..runtime.model_client import default_model_client

        client = default_model_client()
    judge = _Judge(client, model, trace, path)
    order = {s.name: i for i, s in enumerate(machine.states)}
    merged_into: dict[str, str] = {}
    current = text
    skipped = 0
    for cand in candidates:
        first, second = _resolve(merged_into, cand.first), _resolve(merged_into, cand.second)
        if first == second:
            skipped += 1  # an earlier merge already made them one state
            continue
        first, second = _keep_first(machine, order, first, second)
        decided = Candidate(first, second, cand.why)
        report.calls += 1
        try:
            verdict, reason = judge.ask(current, first, second, seq=report.calls - 1)
        except ModelError as e:
            report.ok = False
            report.source, report.accepted = text, []
            report.log.append(f"error: the model failed, nothing was changed: {e}")
            return report
        if not verdict:
            report.rejected.append((decided, reason or "the model said no"))
            continue
        merged_text = _checked_merge(current, path, decided, report)
        if merged_text is not None:
            current = merged_text
            merged_into[second] = first
            report.accepted.append((decided, reason))
            report.log.append(f"merged {second!r} into {first!r} ({cand.why}): {reason}")
    _finish(report, text, current, path, skipped)
    return report


@dataclass
class _Judge:
    """Puts the question about one pair of states to the model, recording the call in the trace."""

    client: Any
    model: str
    trace: Any
    path: str

    def ask(self, current: str, first: str, second: str, *, seq: int) -> tuple[bool, str]:
        """The model's verdict on merging `second` into `first` in the source `current`, and its reason.
        Raises ModelError when the model fails."""
        from ..runtime.client import ModelError, ModelRequest

        model, trace = self.model, self.trace
        request = ModelRequest(
            role="designer", state="merge", model=model,
            messages=[{"role": "system", "content": _MERGE_SYSTEM},
                      {"role": "user", "content": _merge_question(current, self.path, first, second)}],
            response_schema=MERGE_SCHEMA, schema_name="merge_decision",
            metadata={"statewright": {"run_id": "optimize", "state": "merge", "role": "designer",
                                      "seq": seq}},
        )
        if trace is not None:
            trace.emit("llm_request", role="designer", state="merge", model=model)
        try:
            response = self.client.complete(request)
        except ModelError as e:
            if trace is not None:
                trace.emit("llm_call", role="designer", state="merge", model=model, error=str(e))
            raise
        if trace is not None:
            trace.emit("llm_call", role="designer", state="merge", model=response.model or model,
                       prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
                       cost_usd=response.cost_usd, latency_ms=response.latency_ms, attempts=response.attempts)
        return _parse_decision(response.content)


def _checked_merge(current: str, path: str, decided: Candidate, report: MergeReport) -> str | None:
    """The source with `decided.second` merged into `decided.first`, or None (the pair rejected in
    `report`, with why) when the merge is not possible or the merged machine does not check."""
    first, second = decided.first, decided.second
    try:
        merged_text = merge_state_into(current, first, second, path)
    except SourceEditError as e:
        report.rejected.append((decided, f"cannot merge: {e}"))
        report.log.append(f"not merging {second!r} into {first!r}: {e}")
        return None
    merged = compile_text(merged_text, path)
    if merged.ir is None:
        codes = ", ".join(sorted({d.code for d in merged.diagnostics if d.severity.value == "error"}))
        report.rejected.append((decided, f"the merged machine does not check ({codes})"))
        report.log.append(f"not merging {second!r} into {first!r}: the result does not check ({codes})")
        return None
    return merged_text


def _finish(report: MergeReport, text: str, current: str, path: str, skipped: int) -> None:
    """The merged source formatted, its diff from `text`, the tests it fails and the closing lines of the
    log, into `report`."""
    if current != text:
        from ..compiler.views.formatter import format_text

        formatted = format_text(current, path)
        current = formatted.text if formatted.text is not None else current
        report.failing_tests = _failing_tests(current, path)
    report.source = current
    report.diff = "".join(difflib.unified_diff(
        text.splitlines(keepends=True), current.splitlines(keepends=True),
        fromfile=f"a/{Path(path).name}", tofile=f"b/{Path(path).name}"))
    if skipped:
        report.log.append(f"{skipped} candidate pair(s) needed no question: an earlier merge joined them")
    report.log.append(f"asked the model {report.calls} time(s): {len(report.accepted)} merge(s) accepted, "
                      f"{len(report.rejected)} rejected")
    for name in report.failing_tests:
        report.log.append(f"note: test {name!r} no longer passes after the merges; update it when you review "
                          "the diff")


def _failing_tests(text: str, path: str) -> list[str]:
    from .design import run_test_blocks

    compilation = compile_text(text, path, stop_after="load", keep_syntax=False)
    if not compilation.ok:
        return []
    try:
        outcomes = run_test_blocks(compilation)
    except Exception as e:  # noqa: BLE001 - reported, never raised: the merges themselves are done
        return [f"(the test blocks could not run: {type(e).__name__}: {e})"]
    return [o.name for o in outcomes if not o.passed]


def _resolve(merged_into: dict[str, str], name: str) -> str:
    while name in merged_into:
        name = merged_into[name]
    return name


_MERGE_SYSTEM = (
    "You review finite-state machines of LLM agents. Two states should be merged only when one state can "
    "do both states' work without losing anything: the same kind of work for the same purpose. Answer with "
    'JSON only: {"merge": true or false, "reason": "one sentence"}.'
)


def _merge_question(text: str, path: str, first: str, second: str) -> str:
    from ..grammar import ast

    machine = compile_text(text, path, stop_after="parse").ast
    assert machine is not None
    decls = {s.name.value: text[s.span.start : s.span.end] for s in machine.of(ast.StateDecl)}
    return (f"State {first!r}:\n```\n{decls.get(first, '')}\n```\n\n"
            f"State {second!r}:\n```\n{decls.get(second, '')}\n```\n\n"
            f"Should {second!r} be merged into {first!r}?")


def _parse_decision(content: str) -> tuple[bool, str]:
    from .design import extract_json_object

    try:
        data = read_json(extract_json_object(content), "the answer")  # a model's: depth and size checked
        return bool(data.get("merge") is True), str(data.get("reason", ""))
    except (ValueError, AttributeError):
        return False, "unreadable answer: " + content[:80]
