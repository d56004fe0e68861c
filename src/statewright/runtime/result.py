"""What a run ends with: a final state and its result, or a typed failure that names its cause."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Failure kinds. "limit" names the machine limit in `limit`; "bound" means every transition of a state
# was disabled by its bounds; "input" and "secret" (a secret a tool names is not set) mean the run could not
# start; "final" means the run reached a final state declared with `fail` (its name is the run's final_state,
# its reason the message); "variable" means an update of a run variable could not be computed or made a
# value that does not fit the variable; the rest name the step that failed.
FAILURE_KINDS = ("limit", "bound", "output", "model", "tool", "guard", "script", "input", "template", "final",
                 "secret", "variable")


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    llm_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "llm_calls": self.llm_calls,
        }


@dataclass
class Failure:
    kind: str  # one of FAILURE_KINDS
    message: str
    state: str | None = None
    limit: str | None = None  # "steps" | "cost_usd" | "tokens" | "seconds" when kind == "limit"
    origin: str = ""  # the .fsm position of the failing construct, when there is one

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "state": self.state, "limit": self.limit,
                "origin": self.origin}


class RunFailed(Exception):
    """Raised inside the engine to end a run with a typed failure; never escapes `Engine.run`."""

    def __init__(self, failure: Failure, owner: Any = None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        # the run the failure ends, when it is not the one whose step raised it: a caller whose limit a
        # machine it runs exhausted (runtime/call_steps.py)
        self.owner = owner


@dataclass
class Waiting:
    """What a paused run waits for: a person's answer to `question`, asked in `state`.

    `answer_schema` is the JSON Schema an answer must fit; `asked_at` and `deadline` are wall-clock
    seconds since the epoch (`deadline` None when the state has no `after`)."""

    state: str
    question: str
    answer_schema: dict[str, Any]
    asked_at: float | None = None
    deadline: float | None = None
    # where the state is, for a state of a machine the run called: `investigate[2]/approve`
    path: str = ""
    # "answer" (the state's question) or "approval" (a tool call of the state's agent waits: `tool` with
    # `arguments`; the answer approves, rejects or edits it)
    kind: str = "answer"
    tool: str | None = None
    arguments: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"state": self.state, "question": self.question, "answer_schema": self.answer_schema,
                                "asked_at": self.asked_at, "deadline": self.deadline}
        if self.path and self.path != self.state:
            data["path"] = self.path
        if self.kind != "answer":
            data.update(kind=self.kind, tool=self.tool, arguments=self.arguments)
        return data


class AnswerError(ValueError):
    """An answer given to a waiting run does not fit its question (or the run waits for none); the run
    keeps waiting, unchanged."""


@dataclass
class RunResult:
    status: str  # "final" | "failed" | "waiting" (paused until a person answers: see `waiting`)
    run_id: str
    machine: str
    final_state: str | None
    result: Any
    path: list[str] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None
    usage: Usage = field(default_factory=Usage)
    workspace: str | None = None  # the directory the run's tools worked in
    waiting: Waiting | None = None  # what a paused run waits for (the first, when it waits in several places)
    waits: list[Waiting] = field(default_factory=list)  # every question it waits on (calls run at once may ask)
    variables: dict[str, Any] = field(default_factory=dict)  # the run variables' values (JSON) as the run left them

    @property
    def ok(self) -> bool:
        return self.status == "final"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "run_id": self.run_id,
            "machine": self.machine,
            "final_state": self.final_state,
            "result": self.result,
            "path": self.path,
            "failure": self.failure.to_json() if self.failure else None,
            "usage": self.usage.to_json(),
            "workspace": self.workspace,
            **({"waiting": self.waiting.to_json()} if self.waiting is not None else {}),
            **({"waits": [w.to_json() for w in self.waits]} if len(self.waits) > 1 else {}),
            **({"variables": self.variables} if self.variables else {}),
        }
