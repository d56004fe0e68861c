"""Mapping decisions that follow the language: each is one function, so each follows its construct.

A MetaAgent final state that does work is a final state with an agent; its re-prompt budget is an
`otherwise stay ... per visit` budget; AutoAgent's ABORT is a failing final state (`fail "reason"`); an
AutoAgent fan-out and join is a parallel state whose branches are the events that run side by side. A
fan-out that is not that simple shape (a branch of several events, a branch that routes, a join that
waits for events of two fan-outs) still runs its events one after another, and the header of the file
says so (docs/import.md lists it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import quoted_list
from .model import State, Transition
from .names import Namespace

# MetaAgent re-prompts a state this many times, each time it is entered, when none of its exits is recognised.
TURNS_TO_NAME_AN_EXIT = 4

PARALLEL_NOTE = (
    "Branches the original runs in parallel run here one after another, in file order ({names}): a parallel "
    "state takes branches that each end in one result and are joined by one event."
)


def work_in_final_state(state: State) -> None:
    """A final state that does work (MetaAgent's `is_final`): a final state with the same agent and
    instruction, which ends the run once its step is done (its output is the run's result, as in the
    original). The exits the original lists for it never fire there either, and nothing runs after it to hear
    its listeners: both are named in a comment."""
    state.final = True
    if state.tell:  # no state runs after a final one to hear it
        state.comments.append(f"The original's listeners {quoted_list(state.tell)} hear this state; nothing runs "
                              "after a final state to use it.")
        state.tell.clear()
        state.tell_origins.clear()
    if state.transitions:
        exits = quoted_list(t.target for t in state.transitions if t.target is not None)
        state.comments.append(f"The original lists exits to {exits}; a final state ends the run after its step.")
        state.transitions.clear()


def no_exit_budget() -> Transition:
    """What happens when no exit of a state is recognised: MetaAgent re-prompts the state up to four times
    on each visit. `otherwise stay max 4 per visit` does the same, with the verifier's feedback; once the
    turns of a visit are used up the run ends in a typed failure (`bound`) where the original would return
    the last output."""
    return Transition(None, otherwise=True, bound=TURNS_TO_NAME_AN_EXIT, per_visit=True)


def failing_final(name: str, names: Namespace, reason: str) -> State:
    """An end the original counts as a failure (AutoAgent's ABORT): a failing final state, `fail "reason"`.
    The run ends with status `failed`, kind `final`, and the reason as its message."""
    return State(names.claim(name, "state"), final=True, failing=True, fail_reason=reason)


@dataclass(frozen=True)
class Fork:
    """An AutoAgent fan-out that is a parallel state: `source` (or the start) starts `branches`, each one
    event, and `join` listens to exactly them."""

    source: str
    branches: tuple[str, ...]
    join: str


def parallel_branches(order: list[str], listens: dict[str, list[str]], start: str, plain: set[str]) -> list[Fork]:
    """The fan-outs of the original that become parallel states.

    `order` and `listens` are as for `sequence_parallel_branches`; `plain` holds the events that end in
    one unconditional RESULT. A fan-out qualifies when the events listening to its source (or to `start`)
    are at least two, listen to it alone, are plain, run one after another in `order` and are listened to
    by exactly one event, which listens to them and nothing else and runs right after them: then they run
    at once, as branches, and the join waits for all of them — as the original does.
    """
    forks: list[Fork] = []
    taken: set[str] = set()
    for source in [start, *order]:
        listeners = [e for e in order if source in listens.get(e, [])]
        if len(listeners) < 2 or any(listens.get(e) != [source] or e not in plain or e in taken
                                     for e in listeners):
            continue
        positions = sorted(order.index(e) for e in listeners)
        if positions != list(range(positions[0], positions[0] + len(positions))):
            continue
        joins = [e for e in order if set(listens.get(e, [])) & set(listeners)]
        if len(joins) != 1 or sorted(listens[joins[0]]) != sorted(listeners):
            continue
        if order.index(joins[0]) != positions[-1] + 1:
            continue
        forks.append(Fork(source, tuple(order[p] for p in positions), joins[0]))
        taken.update(listeners)
    return forks


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
