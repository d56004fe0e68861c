"""A state that runs another machine: `run NAME(arg = ..., ...)`.

The called machine runs as a run of its own, nested in the caller's: its own agents' memory, visits,
counters and bounds, its own limits inside it, on its own core (the callee's MachinePlan). Its steps are the
caller's step: the child's generator is driven from inside the caller's (`yield from`), so its effects reach
the executor like the caller's own, and a durable engine records them in one history. What the call gives
is its outcome (calls.CallOutcome).

Everything nests by path. A child's events go to the caller's trace with `call` set to where it is
(`investigate`, `investigate[2]` for a map's element, `a/b` for a call within a call); its checkpoint
records go into the caller's (snapshot.py: `Head.calls`, `Changes.calls`), keyed by the call (`state#n`,
`state[item]`), so a resumed run revives the child where it was; a person it asks pauses the whole run,
and the answer is routed to it by path; a script answers its states by path (`investigate/draft`). The
caller's `steps`, `tokens`, `cost_usd` and `seconds` count everything its calls do: each check of a
child's limits also checks every caller's (`_check_callers`), and the child's steps and usage join the
caller's when it ends. `CallSteps` is the core's part that does this; RunCore (core.py) mixes it in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .effects import Paused
from .inputs import InputError
from .plan import MachinePlan, StatePlan
from .result import Failure, RunFailed
from .run_state import Run, Steps, call_key, real_run, state_of_key, where_of_key
from .snapshot import Delta, Snapshot, make_delta
from .spec import Scope
from .structured import to_jsonable


class CallSteps:
    """The core's steps of states that run a machine (mixed into RunCore)."""

    if TYPE_CHECKING:  # what these steps use of the rest of the core (core.py)
        plan: MachinePlan
        clock: Callable[[], float]
        callee_cores: dict[str, Any]

        def core_for(self, plan: MachinePlan) -> Any: ...
        def _elapsed(self, run: Run) -> float: ...
        def _emit_start(self, run: Run, resumed: bool) -> None: ...
        def execute(self, run: Run) -> Steps: ...
        def begin(self, run: Run, resumed: bool) -> None: ...
        def start(self, run_id: str, inputs: Mapping[str, Any], workspace: str) -> Run: ...
        def revive_child(self, run_id: str, snapshot: Snapshot, workspace: str) -> Run: ...
        def fail_input(self, run_id: str, inputs: Mapping[str, Any], workspace: str, failure: Failure,
                       emit: Any) -> Any: ...

    def callee(self, plan: StatePlan) -> Any:
        """The core of the machine `plan`'s state runs (made once, with this core's options)."""
        spec = plan.spec.run
        assert spec is not None
        core = self.callee_cores.get(spec.machine)
        if core is None:
            machine = self.plan.machine.machines[spec.machine]
            mine = self.plan
            child_plan = MachinePlan(machine, model_map=mine.model_map, max_tokens=mine.max_tokens,
                                     durable=mine.durable)
            core = self.callee_cores[spec.machine] = self.core_for(child_plan)
        return core

    def _call_step(self, run: Run, plan: StatePlan) -> Steps:
        """Run the state's machine to its end (or its pause): the call's outcome."""
        spec = plan.spec.run
        assert spec is not None
        core = self.callee(plan)
        key, where = call_key(plan, run)
        child = run.calls.get(key)  # a call under way when the run was stopped goes on where it was
        if child is None:
            scope = Scope(run.outputs.get(run.last_state) if run.last_state else None, run.inputs, run.outputs,
                          run.visits, run.locals or {}, run.vars)
            try:
                # as plain data, as if given from outside: a record of the caller's is checked against the
                # called machine's own class of that type (the same declaration, another class)
                inputs = {name: to_jsonable(value) for name, value in spec.args(scope).items()}
            except Exception as exc:  # noqa: BLE001 - reported as the step's failure
                raise RunFailed(Failure("guard", f"state '{plan.name}': the inputs of {spec.machine}(...) could "
                                                 f"not be computed: {type(exc).__name__}: {exc}", state=plan.name,
                                        origin=spec.origin)) from None
            try:
                child = core.start(f"{run.run_id}/{where}", inputs, run.workspace)
            except InputError as exc:  # the inputs do not fit the called machine: the call fails, typed
                # (calls.py holds pydantic models: a process whose machines call none never loads them)
                from .calls import CallFailure, CallOutcome

                return CallOutcome(ok=False, failure=CallFailure(kind="input", message=str(exc), origin=spec.origin))
            self._attach_child(run, child, key, where, core)
            run.calls[key] = child
            core.begin(child, resumed=False)
        else:
            self._attach_child(run, child, key, where, core)
            core.begin(child, resumed=True)
        result = yield from core.execute(child)
        if result.status == "waiting":
            raise Paused  # the whole run waits: the child's question is its caller's
        del run.calls[key]
        real_run(run).call_heads.pop(key, None)
        run.steps += child.steps  # what the call did counts as the caller's (its limits saw it all along)
        usage, used = run.usage, child.usage
        usage.prompt_tokens += used.prompt_tokens
        usage.completion_tokens += used.completion_tokens
        usage.cost_usd += used.cost_usd
        usage.llm_calls += used.llm_calls
        run.seqs[plan.call_key] = run.seqs.get(plan.call_key, 0) + 1
        run.count("seqs", plan.call_key)
        from .calls import outcome_of
        return outcome_of(core.machine, result)

    def _attach_child(self, run: Run, child: Run, key: str, where: str, core: Any) -> None:
        """A child's hooks: its events into the caller's trace (marked with where it is), its checkpoint
        records into the caller's."""
        child.caller = (run, self)
        child.call_path = f"{run.call_path}/{where}" if run.call_path else where
        child.observe = None
        emit = None
        if run.events:
            parent_emit, path = run.emit, child.call_path

            def emit(event: str, fields: dict[str, Any]) -> None:
                parent_emit(event, {"call": path, **fields})

        owner = real_run(run)
        save = None
        if owner.changed is not None:
            def save(run_id: str, delta: Delta) -> None:
                self._save_call(owner, key, delta)

        child.listen(emit, content=run.content, save=save, stamp=run.stamp)

    def _save_call(self, run: Run, key: str, child: Delta) -> None:
        """Checkpoint the run with a call's progress in it: the caller's head with the child's, and the
        child's changes under the call's key."""
        run.call_heads[key] = child.head
        delta = make_delta(self.plan, run, "running", self._elapsed(run))
        delta.changes.calls = {key: child.changes}
        run.save(run.run_id, delta)

    def _check_callers(self, run: Run, check: Callable[[Any, Run], None]) -> None:
        """Apply a limit check to every run that called `run`, each with its own core's limits; a limit one of
        them reaches ends that run (RunFailed.owner), not only the call."""
        child = run
        while child.caller is not None:
            caller, core = child.caller
            try:
                check(core, caller)
            except RunFailed as exc:
                exc.failure.message += f" (while it ran {child.call_path})"
                exc.owner = real_run(caller)
                raise
            child = caller

    def _callers_budgeted(self, run: Run) -> bool:
        """Whether a run that called `run` has a `tokens` or `cost_usd` limit: the call's model calls are
        then estimated first, so that every such limit is checked before a call is made."""
        child = run
        while child.caller is not None:
            caller, core = child.caller
            if core.plan.budget_limited:
                return True
            child = caller
        return False

    def revive_calls(self, run: Run, snapshot: Snapshot, workspace: str) -> None:
        """The calls under way when the checkpoint was taken, revived into `run.calls` (each by its callee's
        core, checked against that machine)."""
        for key, child_snapshot in snapshot.calls.items():
            state = self.plan.states.get(state_of_key(key))
            if state is None or state.spec.run is None:
                from .snapshot import SnapshotError

                raise SnapshotError(f"the checkpoint holds a call of state '{state_of_key(key)}', which runs no "
                                    "machine")
            core = self.callee(state)
            where = where_of_key(key)
            child = run.calls[key] = core.revive_child(f"{run.run_id}/{where}", child_snapshot, workspace)
            child.call_path = f"{run.call_path}/{where}" if run.call_path else where
            run.call_heads[key] = child_snapshot.head
