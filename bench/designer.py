"""Benchmark: first drafts of the designer with and without the grammar constraint, on a real small model.

For 10 fixed task descriptions the designer drafts a machine twice against SmolLM2-135M served by llama.cpp
(the server `.ci/start-model-server` starts): once with `--constrain grammar` (the GBNF goes in the request's
`grammar` field) and once with `--constrain none`, both at `--max-repairs 0`. For each mode it reports the
share of drafts that parse, the share that pass `check` (no errors; test blocks are not run), the mean
completion tokens of a draft, and how many constrained drafts the token limit cut off and the designer
finished. A 135M model cannot design machines; what the numbers show is that under the grammar every draft
parses, and what fails is meaning.

Every reply is capped at `--max-tokens` (SmolLM2 writes about 100 tokens a second on two cores), the
designer reads the compact reference (stdlib.reference.compact_designer_system_prompt: the server's context
is 4,096 tokens, the full reference is 11,000) and decoding is greedy (temperature 0), so a run is
repeatable. A constrained draft that hits the cap is finished with the shortest text the grammar allows.

    python bench/designer.py [--url http://127.0.0.1:PORT/v1] [--max-tokens 256] [--tasks 10]

The server's URL defaults to $STATEWRIGHT_LLAMA_URL. The last line is `RESULT {json}`; the exit status is 1
when a constrained draft did not parse (the constraint promises that they all do).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from statewright import api
from statewright.grammar import parse_text
from statewright.runtime.client import ModelRequest, ModelResponse
from statewright.stdlib.reference import compact_designer_system_prompt

MODEL = "openai/smollm2-135m"
MODES = ("grammar", "none")
TASKS = (
    "Summarise a long customer email into three bullet points, then check the summary against the email.",
    "Translate a product description into French and have a second agent review the translation.",
    "Write a Python function from a specification, run its tests, and fix it until they pass.",
    "Classify a support ticket as billing, bug or question, and draft a reply for each kind.",
    "Plan a three-day trip to a city, then check that the budget is respected.",
    "Review a pull request description and list the risks, then rate the change from 1 to 10.",
    "Write a short story for children, have it critiqued, and revise it at most twice.",
    "Extract the dates and amounts from an invoice and validate that the totals add up.",
    "Answer a trivia question, then have a fact checker confirm the answer or send it back.",
    "Turn meeting notes into action items with owners, and ask for clarification when an owner is missing.",
)


@dataclass
class Draft:
    mode: str
    task: int
    parses: bool
    checks: bool
    tokens: int
    completed: bool
    seconds: float
    codes: list[str] = field(default_factory=list)


class GreedyClient:
    """The real model client, with temperature 0 on every call and the machine drafts' tokens recorded."""

    def __init__(self, url: str) -> None:
        from statewright.runtime.litellm_client import LiteLLMClient, RetryPolicy

        self.inner = LiteLLMClient(retry=RetryPolicy(max_retries=1, timeout=240.0), api_base=url,
                                   api_key="sk-local-bench")
        self.draft_tokens: list[int] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self.inner.complete(replace(request, temperature=0.0))
        if request.state in ("machine", "repair"):
            self.draft_tokens.append(response.completion_tokens)
        return response


def draft(task: str, number: int, mode: str, url: str, max_tokens: int, folder: Path) -> Draft:
    client = GreedyClient(url)
    started = time.perf_counter()
    outcome = api.design(task, output=str(folder / f"{mode}-{number}.fsm"), model=MODEL, max_repairs=0,
                         constrain=mode, max_tokens=max_tokens, client=client,
                         system_prompt=compact_designer_system_prompt())
    seconds = time.perf_counter() - started
    if not outcome.attempts:
        raise SystemExit(f"task {number} ({mode}): no draft: {' / '.join(outcome.log)}")
    source = outcome.attempts[0].source
    parsed = parse_text(source)
    errors = outcome.attempts[0].errors
    return Draft(mode, number, parses=parsed.machine is not None, checks=parsed.machine is not None and not errors,
                 tokens=sum(client.draft_tokens), completed=any("finished it with" in line for line in outcome.log),
                 seconds=seconds, codes=sorted({e["code"] for e in errors}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("STATEWRIGHT_LLAMA_URL"),
                        help="the llama.cpp server's OpenAI-compatible base URL (default $STATEWRIGHT_LLAMA_URL)")
    parser.add_argument("--max-tokens", type=int, default=256, help="cap on each designer reply (default 256)")
    parser.add_argument("--tasks", type=int, default=len(TASKS), help=f"how many of the {len(TASKS)} tasks")
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm is imported on the first call
    if not args.url:
        print("no model server: pass --url or set STATEWRIGHT_LLAMA_URL (bash .ci/start-model-server starts one)")
        return 2
    drafts: list[Draft] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for number, task in enumerate(TASKS[: args.tasks], 1):
            for mode in MODES:
                result = draft(task, number, mode, args.url, args.max_tokens, Path(folder))
                drafts.append(result)
                print(f"task {number:>2} {mode:>7}: {'parses' if result.parses else 'syntax error':>12}, "
                      f"{'checks' if result.checks else 'check fails':>11}  {result.tokens:>4} tokens"
                      f"{'  (cut off, finished)' if result.completed else ''}  {result.seconds:5.1f} s  "
                      f"{' '.join(result.codes)}")
    summary: dict[str, Any] = {"tasks": args.tasks, "max_tokens": args.max_tokens,
                               "seconds": round(time.perf_counter() - started, 1)}
    for mode in MODES:
        mine = [d for d in drafts if d.mode == mode]
        summary[f"parse_rate_{mode}"] = round(sum(d.parses for d in mine) / len(mine), 3)
        summary[f"check_rate_{mode}"] = round(sum(d.checks for d in mine) / len(mine), 3)
        summary[f"mean_tokens_{mode}"] = round(statistics.mean(d.tokens for d in mine), 1)
        summary[f"mean_seconds_{mode}"] = round(statistics.mean(d.seconds for d in mine), 1)
        summary[f"completed_{mode}"] = sum(d.completed for d in mine)
        syntax = sorted({c for d in mine for c in d.codes if c.startswith("SW1")})
        summary[f"syntax_codes_{mode}"] = syntax
        print(f"{mode:>7}: {summary[f'parse_rate_{mode}']:.0%} parse, {summary[f'check_rate_{mode}']:.0%} check, "
              f"{summary[f'mean_tokens_{mode}']} tokens per draft, {summary[f'completed_{mode}']} cut off and "
              f"finished, syntax errors: {', '.join(syntax) or 'none'}")
    print("RESULT " + json.dumps(summary, sort_keys=True))
    return 0 if summary["parse_rate_grammar"] == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
