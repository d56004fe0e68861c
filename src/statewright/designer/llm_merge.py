"""LLM-judged state merging: a model judges whether two states' work overlaps; accepted merges rewrite the
source and come back as a unified diff for review.

Asking about every pair costs n(n-1)/2 calls. Only O(n) candidate pairs are considered:
  - adjacent states joined by a single unconditional edge (at most one pair per state),
  - states that share an agent, consecutive in source order (at most one pair per state),
  - each state's most similar instruction by word-set similarity (at most `k` pairs per state),
so at most (2 + k) * n pairs, and 3n with the default k = 1.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compiler import ir
from ..compiler.source_edit import SourceEditError, merge_state_into

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


def candidate_pairs(machine: ir.Machine, *, k: int = 1) -> list[Candidate]:
    order = {s.name: i for i, s in enumerate(machine.states)}
    by_name = {s.name: s for s in machine.states}
    seen: set[tuple[str, str]] = set()
    out: list[Candidate] = []

    def add(a: str, b: str, why: str) -> None:
        if a == b or a not in by_name or b not in by_name:
            return
        first, second = sorted((a, b), key=lambda n: (n != machine.start, order[n]))
        sa, sb = by_name[first], by_name[second]
        if sa.kind == "final" or sb.kind == "final" or second == machine.start:
            return
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
        for a, b in zip(names, names[1:]):
            add(a, b, "same agent")

    for a, b in _most_similar_instructions(machine, k):
        add(a, b, "similar instruction")
    return out


_WORDS = re.compile(r"[a-z0-9]+")


def _most_similar_instructions(machine: ir.Machine, k: int) -> list[tuple[str, str]]:
    """For each state, its k most similar other states by Jaccard similarity of instruction words.

    An inverted index visits only states that share a word; words shared by more than √n states carry
    little signal and are skipped, which keeps the work near-linear.
    """
    words = {s.name: set(_WORDS.findall((s.instruction or "").lower())) for s in machine.states if s.instruction}
    index: dict[str, list[str]] = defaultdict(list)
    for name, ws in words.items():
        for w in ws:
            index[w].append(name)
    cap = max(4, int(len(words) ** 0.5))
    pairs = []
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
    """Ask the model about each candidate pair; apply accepted merges to the source, re-checking each."""
    from .. import api
    from ..runtime.client import ModelRequest

    comp = api.check_text(text, path)
    if not comp.ok:
        return MergeReport(False, [], log=["the machine has errors; fix them before optimizing"])
    machine = comp.ir
    candidates = candidate_pairs(machine, k=k)  # type: ignore[arg-type]
    n = len(machine.states)  # type: ignore[union-attr]
    report = MergeReport(True, candidates, source=text)
    report.log.append(f"{len(candidates)} candidate pair(s) for {n} states "
                      f"(all pairs would be {n * (n - 1) // 2})")
    if client is None:
        from ..runtime.litellm_client import LiteLLMClient

        client = LiteLLMClient()
    merged_into: dict[str, str] = {}
    current = text
    for seq, cand in enumerate(candidates):
        first, second = _resolve(merged_into, cand.first), _resolve(merged_into, cand.second)
        if first == second:
            continue
        request = ModelRequest(
            role="designer", state="merge", model=model,
            messages=[{"role": "system", "content": _MERGE_SYSTEM},
                      {"role": "user", "content": _merge_question(current, path, first, second)}],
            response_schema=MERGE_SCHEMA, schema_name="merge_decision",
            metadata={"statewright": {"run_id": "optimize", "state": "merge", "role": "designer", "seq": seq}},
        )
        response = client.complete(request)
        if trace is not None:
            trace.emit("llm_call", role="designer", state="merge", model=response.model,
                       prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
                       cost_usd=response.cost_usd, latency_ms=response.latency_ms, attempts=response.attempts)
        verdict, reason = _parse_decision(response.content)
        if not verdict:
            report.rejected.append((cand, reason or "the model said no"))
            continue
        try:
            candidate_text = merge_state_into(current, first, second, path)
        except SourceEditError as e:
            report.rejected.append((cand, f"cannot merge: {e}"))
            continue
        if not api.check_text(candidate_text, path).ok:
            report.rejected.append((cand, "the merged machine does not check"))
            continue
        current = candidate_text
        merged_into[second] = first
        report.accepted.append((cand, reason))
        report.log.append(f"merged {second!r} into {first!r}: {reason}")
    if current != text:
        formatted = api.format_text(current, path)
        current = formatted.text if formatted.text is not None else current
    report.source = current
    report.diff = "".join(difflib.unified_diff(
        text.splitlines(keepends=True), current.splitlines(keepends=True),
        fromfile=f"a/{Path(path).name}", tofile=f"b/{Path(path).name}"))
    report.log.append(f"{len(report.accepted)} merge(s) accepted, {len(report.rejected)} rejected")
    return report


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
    from ..grammar import ast, parse_text

    machine = parse_text(text, path).machine
    assert machine is not None
    decls = {s.name.value: text[s.span.start : s.span.end] for s in machine.of(ast.StateDecl)}
    return (f"State {first!r}:\n```\n{decls.get(first, '')}\n```\n\nState {second!r}:\n```\n{decls.get(second, '')}"
            f"\n```\n\nShould {second!r} be merged into {first!r}?")


def _parse_decision(content: str) -> tuple[bool, str]:
    import json

    from .design import extract_json_object

    try:
        data = json.loads(extract_json_object(content))
        return bool(data.get("merge") is True), str(data.get("reason", ""))
    except (ValueError, AttributeError):
        return False, "unreadable answer: " + content[:80]
