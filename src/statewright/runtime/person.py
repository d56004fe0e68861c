"""A state that asks a person: the question put, the answer awaited, checked against the state's type.

Locally the run pauses (checkpointed) until it is resumed with an answer; a durable engine may wait for a
signal instead. Either way the core yields one AwaitPerson effect and is answered with a PersonReply: the
answer, a timeout once the state's `after` deadline passed, or none yet. `PersonSteps` is the core's part
that does this; RunCore (core.py) mixes it in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .effects import AwaitPerson, Paused, PersonReply
from .plan import StatePlan
from .result import AnswerError, Failure, RunFailed, Waiting
from .run_state import Question, Run, Steps, state_of_key
from .structured import validate_typed
from .untrusted import BorderError, NotAJsonNumber, check_value, read_json

TIMED_OUT = object()  # what a person's step gives when its deadline passed without an answer


def _answer_fields(state: str, timed_out: bool, waiting: Question, reply: PersonReply) -> dict[str, Any]:
    """The `answer` event's fields: with `asked_at` (seconds since the epoch) when a person was waited for
    (a span of the wait begins there); a test's scripted answer waited for nobody."""
    fields: dict[str, Any] = {"state": state, "timed_out": timed_out}
    if not reply.scripted and waiting.asked_at is not None:
        fields["asked_at"] = waiting.asked_at
    return fields


class PersonSteps:
    """The core's steps of states that ask a person (mixed into RunCore)."""

    if TYPE_CHECKING:  # what these steps use of the rest of the core (core.py)
        _plans: Mapping[str, StatePlan]

        def callee(self, plan: StatePlan) -> Any: ...

        def _render(self, run: Run, source: str, state: str, context: Mapping[str, Any] | None = None) -> str: ...

    def _person_step(self, run: Run, plan: StatePlan) -> Steps:
        """Ask a person the state's question: their answer (validated against the state's output type) and
        the question; TIMED_OUT when the deadline passed first. Raises _Paused while nobody has answered."""
        name = plan.name
        waiting = run.waiting
        if waiting is None:
            question = self._render(run, plan.instruction, name)
            waiting = Question(name, question, run.seqs.get(plan.person_key, 0))
            run.waiting = waiting
        seconds = plan.timeout.seconds if plan.timeout is not None else None
        reply: PersonReply = yield AwaitPerson(name, waiting.question, self.answer_schema(plan), waiting.seq,
                                               waiting.deadline, seconds, call=run.call_path)
        if waiting.asked_at is None:
            waiting.asked_at = reply.now
            if seconds is not None:
                waiting.deadline = reply.now + seconds
        if reply.kind == "none":
            raise Paused
        run.waiting = None
        run.seqs[plan.person_key] = waiting.seq + 1
        run.count("seqs", plan.person_key)
        if reply.kind == "timeout":
            if run.events:
                run.emit("answer", _answer_fields(name, True, waiting, reply))
            return TIMED_OUT
        try:
            answer = self.parse_answer(plan, reply.value)
        except AnswerError as exc:
            if reply.scripted:
                raise RunFailed(Failure("script", f"state '{name}': the scripted answer does not fit: {exc}",
                                        state=name, origin=plan.spec.origin)) from None
            raise RunFailed(Failure("output", f"state '{name}': the answer does not fit: {exc}", state=name,
                                    origin=plan.spec.origin)) from None
        if run.events:
            fields = _answer_fields(name, False, waiting, reply)
            if run.content:
                fields["answer"] = answer
            run.emit("answer", fields)
        return answer, waiting.question

    def answer_schema(self, plan: StatePlan) -> dict[str, Any]:
        """The JSON Schema of an answer to `plan`'s question: its output type's, or text. A person answers
        with the value itself, so an output the model gets wrapped (`{"value": ...}`: a list, a variant)
        is shown unwrapped, its definitions kept."""
        if plan.schema is None:
            return {"type": "string"}
        if not plan.wrapped:
            return plan.schema
        inner = dict(plan.schema.get("properties", {}).get("value", {}))
        if "$defs" in plan.schema:
            inner["$defs"] = plan.schema["$defs"]
        return inner

    def parse_answer(self, plan: StatePlan, given: Any) -> Any:
        """A person's answer as the state's output: text as it is for an untyped state; for a typed one a
        JSON value (text is read as JSON when it parses, else taken as the text itself). AnswerError says
        what does not fit."""
        try:
            check_value(given, "the answer")  # before json and pydantic, which recurse
        except BorderError as exc:
            raise AnswerError(str(exc)) from None
        if plan.output is None:
            if isinstance(given, str):
                return given
            raise AnswerError(f"state '{plan.name}' takes text as its answer, not {type(given).__name__}")
        candidates = [given]
        refused: ValueError | None = None
        if isinstance(given, str):
            try:
                candidates.insert(0, read_json(given, "the answer"))
            except (BorderError, NotAJsonNumber) as exc:
                refused = exc  # unless the text itself fits (a text type), this is what is wrong
            except ValueError:
                pass
        error = ""
        for value in candidates:
            try:
                return validate_typed(plan.output, value, plan.wrapped, strict=True)  # no lax coercion
            except ValueError as exc:
                error = error or str(exc)
        if refused is not None:
            raise AnswerError(str(refused))
        # a declared type by its name; a list, a text type or a variant has only the generated schema's name
        what = f"the output type of state '{plan.name}'" if plan.wrapped or plan.variant else plan.schema_name
        raise AnswerError(f"the answer does not fit {what}: {error}")

    def waits(self, run: Run) -> list[tuple[str, Any, StatePlan, Any]]:
        """Every question the run waits on — its own, the tool calls of its agents that wait for approval, and
        those of the machines it is running, at any depth — as (path, question — a Question or an
        approvals.ApprovalRecord —, the state's plan, the core of its machine): `approve`, `execute`, `build[3]`,
        `investigate[2]/approve`."""
        found: list[tuple[str, Any, StatePlan, Any]] = []
        prefix = f"{run.call_path}/" if run.call_path else ""
        if run.waiting is not None:
            state = run.waiting.state
            found.append((prefix + state, run.waiting, self._plans[state], self))
        for key, approval in run.approvals.items():
            found.append((prefix + key, approval, self._plans[approval.state], self))
        for key, child in run.calls.items():
            found += self.callee(self._plans[state_of_key(key)]).waits(child)
        return found

    def check_answer(self, run: Run, given: Any, path: str | None = None) -> str:
        """An answer given to a resumed run, checked before the run moves: the path of the question it
        answers. AnswerError when the run waits for no answer, waits in several places and `path` does not
        say which, or the answer does not fit (the run then keeps waiting, unchanged)."""
        waits = self.waits(run)
        if not waits:
            raise AnswerError(f"run '{run.run_id}' is not waiting for an answer")
        places = ", ".join(where for where, *_ in waits)
        if path is None:
            if len(waits) > 1:
                raise AnswerError(f"run '{run.run_id}' waits for {len(waits)} answers, at {places}: say which "
                                  "this one is for with --at PATH")
            chosen = waits[0]
        else:
            matches = [w for w in waits if w[0] == path]
            if not matches:
                raise AnswerError(f"run '{run.run_id}' waits for no answer at {path}; it waits at {places}")
            chosen = matches[0]
        where, question, plan, core = chosen
        if getattr(question, "kind", "") == "approval":
            from .approvals import parse_approval

            parse_approval(question, given)
        else:
            core.parse_answer(plan, given)
        return where


def waiting_of(where: str, question: Any, schema: dict[str, Any]) -> Waiting:
    """What a run's result says of one question it waits on: a state's question (with the schema of its
    answer), or a tool call that waits for approval (its own answer schema, its tool and arguments)."""
    if getattr(question, "kind", "") == "approval":
        return Waiting(question.state, question.question, question.answer_schema, question.asked_at, None, where,
                       kind="approval", tool=question.tool, arguments=question.arguments)
    return Waiting(question.state, question.question, schema, question.asked_at, question.deadline, where)
