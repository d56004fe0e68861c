"""Mapping decisions that wait for the language: each is one function, so each can switch to its construct.

The language has no per-visit `otherwise stay` budget, no agent in a final state, no failing final state
and no parallel branches yet. Until it does, the importers use the closest form below and say so in the
header of every file where one applies (docs/import.md lists them).
"""

from __future__ import annotations

from ..diagnostics import quoted_list
from .model import State, Transition
from .names import Namespace

# MetaAgent re-prompts a state this many times when none of its exits is recognised.
TURNS_TO_NAME_AN_EXIT = 4

WORK_IN_FINAL_NOTE = (
    "A final state of the original still does work: here it is an agent state that hands over to a final "
    "state named after it ({pairs}), until final states can run an agent."
)
NO_EXIT_NOTE = (
    "The original re-prompts a state up to {turns} times when no exit is recognised: here that is "
    "'otherwise stay max {turns}', counted over the whole run rather than per visit, until the language has "
    "a per-visit budget."
)
FAILING_FINAL_NOTE = (
    "ABORT ends the original in failure: here it reaches a final state named for the failure ({names}), "
    "until the language has failing final states."
)
PARALLEL_NOTE = (
    "Branches the original runs in parallel run here one after another, in file order ({names}), until the "
    "language has parallel branches."
)


def work_in_final_state(state: State, names: Namespace) -> State:
    """A final state that does work (MetaAgent's `is_final`).

    Until a final state can run an agent, the state stays an agent state whose first transition hands over
    unconditionally to a new final state `<name>_done`. The final state has no result, so the run's result
    is the working state's output, as in the original. Transitions the original lists after it can never
    fire, and `check` says so (SW3007).
    """
    final = State(names.claim(f"{state.name}_done", "state"), final=True, origin=state.origin)
    state.transitions.insert(0, Transition(final.name, origin=state.origin))
    return final


def no_exit_budget() -> Transition:
    """What happens when no exit of a state is recognised (MetaAgent re-prompts four times).

    The closest form today is `otherwise stay max 4`: four more turns, with the verifier's feedback, but
    counted over the run instead of per visit. Once they are used up the run ends in a typed failure
    (`bound`) where the original would return the last output.
    """
    return Transition(None, otherwise=True, bound=TURNS_TO_NAME_AN_EXIT)


def failing_final(name: str, names: Namespace, reason: str) -> State:
    """An end the original counts as a failure (AutoAgent's ABORT).

    Until the language has failing final states, a final state named for the failure, with a comment that
    says what it stands for. Without a result, the run ends with the output of the state that aborted.
    """
    state = State(names.claim(name, "state"), final=True, failing=True)
    state.comments.append(f"{reason}: a failing final state once the language has one")
    return state


def sequence_parallel_branches(order: list[str], listens: dict[str, list[str]], start: str
                               ) -> tuple[dict[str, str | None], dict[str, list[str]], list[str]]:
    """Fan-out and join, until the language has parallel branches: run the events one after another.

    `order` is the events that follow from the start event `start`, in the order they run (file order, made
    topological); `listens` maps every event to the events it listens to. Returns:

    - for every event, the event a RESULT continues with (None: the run is done); an event outside `order`
      (one only a GOTO reaches) continues with the first event in `listens` that listens to it;
    - comments on the events where the original runs branches in parallel: a fan-out (several events
      listen to one) and a join (one event listens to several), and on the first event when several
      listen to `start`;
    - the branches that now run in sequence, in run order.
    """
    following: dict[str, str | None] = {}
    for i, name in enumerate(order):
        following[name] = order[i + 1] if i + 1 < len(order) else None
    for name in listens:
        if name not in following:
            following[name] = next((e for e in listens if name in listens[e]), None)
    comments: dict[str, list[str]] = {name: [] for name in order}
    branches: set[str] = set()
    starters = [e for e in order if start in listens.get(e, [])]
    if len(starters) > 1:
        comments[order[0]].append(f"The original starts {quoted_list(starters)} in parallel: here they run "
                                  "one after another, in file order.")
        branches.update(starters)
    for name in order:
        sources = [s for s in listens.get(name, []) if s in following]
        if len(sources) > 1:
            comments[name].append(f"Joins {quoted_list(sources)}, which the original runs in parallel: here "
                                  "this state runs after all of them.")
        fanned = [e for e in order if name in listens.get(e, [])]
        if len(fanned) > 1:
            comments[name].append(f"Fans out to {quoted_list(fanned)}, which the original runs in parallel: "
                                  "here they run one after another, in file order.")
            branches.update(fanned)
    return following, {k: v for k, v in comments.items() if v}, [e for e in order if e in branches]
