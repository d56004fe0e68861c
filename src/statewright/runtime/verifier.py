"""The condition verifier: one separate model call judges a group of natural-language conditions.

It sees the state's instruction and output only — no agent prompt, no memory — and answers
`{choice, reason, feedback}` with `choice` the number of one listed condition, or 0 for none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .structured import extract_json

VERIFIER_SYSTEM_PROMPT = """\
You are the transition verifier of a state machine. One step of the machine was given an instruction \
and produced an output. You decide which of the listed conditions holds for that output.

Answer with a JSON object and nothing else:
{"choice": N, "reason": "...", "feedback": "..."}

- choice: the number of the first listed condition that holds for the output, or 0 when none of them holds.
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
    """The answer's schema: `choice` is a number, 1 to n for the listed conditions and 0 for none — an
    exact reference, where texts could be told apart only by how they are spelled."""
    return {
        "type": "object",
        "properties": {
            "choice": {"type": "integer", "enum": list(range(len(conditions) + 1))},
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
        "Which is the first condition that holds? Answer with the JSON object only: choice is its number, "
        "or 0 if none holds."
    )
    return [{"role": "system", "content": VERIFIER_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_verdict(text: str, conditions: list[str]) -> tuple[Verdict, list[str]]:
    """The verdict in a verifier reply. Raises ValueError (meant for the verifier) when it is unusable.

    `choice` is a condition's number (1 to n) or 0 for none. A number written as text (`"2"`) is the repair
    `choice_number`; a condition's exact text, or `"none"`, is the repair `choice_text` (what scripts and
    test blocks write). Nothing else is matched: texts that differ in case, spacing or punctuation are
    different conditions, so near-duplicates can never be taken for each other."""
    data, repairs = extract_json(text)
    if not isinstance(data, dict):
        raise ValueError('the answer must be a JSON object {"choice": ..., "reason": ..., "feedback": ...}')  # noqa: TRY004
    choice = data.get("choice")
    reason = data.get("reason")
    feedback = data.get("feedback")
    reason = reason if isinstance(reason, str) else ""
    feedback = feedback if isinstance(feedback, str) else ""
    number: int | None = None
    if isinstance(choice, int) and not isinstance(choice, bool):
        number = choice
    elif isinstance(choice, float) and choice.is_integer():
        number, repairs = int(choice), [*repairs, "choice_number"]
    elif isinstance(choice, str):
        if choice in conditions:  # a condition's exact text, even one that reads "none" or "2"
            return Verdict(conditions.index(choice), reason, feedback), [*repairs, "choice_text"]
        if choice == NO_CHOICE:
            return Verdict(None, reason, feedback), [*repairs, "choice_text"]
        if choice.strip().isdecimal() and len(choice.strip()) < 10:
            number, repairs = int(choice.strip()), [*repairs, "choice_number"]
    if number is not None and 0 <= number <= len(conditions):
        return Verdict(number - 1 if number else None, reason, feedback), repairs
    raise ValueError(f"choice must be the number of the first condition that holds (1 to {len(conditions)}), "
                     "or 0 when none of them holds")
