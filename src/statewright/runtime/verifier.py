"""The condition verifier: one separate model call judges a group of natural-language conditions.

It sees the state's instruction and output only — no agent prompt, no memory — and answers
`{choice, reason, feedback}` with `choice` restricted to the listed conditions or "none".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .structured import extract_json

VERIFIER_SYSTEM_PROMPT = """\
You are the transition verifier of a state machine. One step of the machine was given an instruction \
and produced an output. You decide which of the listed conditions holds for that output.

Answer with a JSON object and nothing else:
{"choice": "...", "reason": "...", "feedback": "..."}

- choice: the exact text of the first listed condition that holds for the output, or "none" when none \
of them holds.
- reason: one or two sentences on why, about the output itself. Do not quote the conditions.
- feedback: concrete advice for whoever produced the output on how to improve it. Do not mention the \
conditions or this decision."""

NO_CHOICE = "none"


@dataclass
class Verdict:
    choice: int | None  # index into the listed conditions; None for "none"
    reason: str
    feedback: str


def verdict_schema(conditions: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "choice": {"type": "string", "enum": [*conditions, NO_CHOICE]},
            "reason": {"type": "string"},
            "feedback": {"type": "string"},
        },
        "required": ["choice", "reason", "feedback"],
        "additionalProperties": False,
    }


def verifier_messages(instruction: str, output_text: str, conditions: list[str]) -> list[dict[str, Any]]:
    listed = "\n".join(f"{i}. {text}" for i, text in enumerate(conditions, 1))
    user = (
        f"Instruction the step was given:\n<<<\n{instruction}\n>>>\n\n"
        f"Output the step produced:\n<<<\n{output_text}\n>>>\n\n"
        f"Conditions, in order:\n{listed}\n\n"
        f'Which is the first condition that holds? Answer with the JSON object only; choice "{NO_CHOICE}" '
        "if none holds."
    )
    return [{"role": "system", "content": VERIFIER_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _verifier_normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().strip(".").casefold()


def parse_verdict(text: str, conditions: list[str]) -> tuple[Verdict, list[str]]:
    """The verdict in a verifier reply. Raises ValueError (meant for the verifier) when it is unusable."""
    data, repairs = extract_json(text)
    if not isinstance(data, dict):
        raise ValueError('the answer must be a JSON object {"choice": ..., "reason": ..., "feedback": ...}')  # noqa: TRY004
    choice = data.get("choice")
    reason = data.get("reason")
    feedback = data.get("feedback")
    reason = reason if isinstance(reason, str) else ""
    feedback = feedback if isinstance(feedback, str) else ""
    if choice is None:
        return Verdict(None, reason, feedback), repairs
    if isinstance(choice, int) and not isinstance(choice, bool) and 1 <= choice <= len(conditions):
        return Verdict(choice - 1, reason, feedback), repairs + ["choice_number"]
    if isinstance(choice, str):
        wanted = _verifier_normal(choice)
        if wanted == NO_CHOICE:
            return Verdict(None, reason, feedback), repairs
        for index, condition in enumerate(conditions):
            if _verifier_normal(condition) == wanted:
                exact = choice == condition
                return Verdict(index, reason, feedback), repairs if exact else repairs + ["choice_text"]
    allowed = ", ".join(f'"{c}"' for c in [*conditions, NO_CHOICE])
    raise ValueError(f"choice must be exactly one of: {allowed}")
