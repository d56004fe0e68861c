"""Random machines that check, with test blocks recorded from a run of their own: the every-face harness's
random corpus (tests/test_faces.py).

`random_machine(seed)` writes a machine from a seed alone — a chain of states of random kinds (text, typed
and variant outputs with guards, verifier conditions, bounded loops back, parallel states joining all or
the first, maps over a list input, a person's approval with or without a deadline, per-visit `stay`
budgets, an agent whose python calls a person approves, rejects or edits), run variables every kind of state
updates (branches and map elements too) and guards and templates read, a result template and a failing
final state, every template reading what ran before it (variants through `is`). `with_recorded_tests(text, seeds)` runs it locally once per seed with a client
that makes up every reply, verdict and answer from the seed and what it is asked, and writes what the run
was served and what it did as a test block: its path, its ending, its result, and the outputs and
instructions of a few visits. Every face must then pass those tests and do exactly the same.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from statewright import api
from statewright.runtime.client import ModelRequest
from statewright.runtime.engine import Engine
from statewright.runtime.scripted import Script, ScriptedClient, ScriptedReply

KINDS = ("text", "typed", "variant", "parallel", "map", "ask", "stay", "tools")
CONDITIONS = ("the text is finished", "it needs another pass", "The answer is complete.")
TEXTS = ("ok", "Done.", "needs work", "a draft with }} and {% inside", "redo", "Fine — finished.")


def _reads(kind: str, name: str) -> str:
    """A template fragment that reads the output of an earlier state of `kind`."""
    return {
        "text": f"{{{{ {name}.output }}}}",
        "stay": f"{{{{ {name}.output }}}}",
        "typed": f"{{{{ {name}.output.text }}}} ({{{{ {name}.output.n }}}})",
        # (not `elif ... is Bad`: where the transitions in show the output is Good, the check reports that
        # branch's read of `reason`, SW4031 — a branch no run takes)
        "variant": f"{{% if {name}.output is Good %}}{{{{ {name}.output.text }}}}{{% endif %}}",
        "parallel": f"{{{{ {name}.output | length }}}} reviews",
        "map": f"{{% for o in {name}.output %}}{{{{ o.text }}}};{{% endfor %}}",
        "ask": f"{{{{ {name}.output }}}}",
        "tools": f"{{{{ {name}.output }}}}",
    }[kind]


# what each kind of state writes into the run variables after its step (map elements and branches too)
_UPDATES = {
    "text": ['append trail <- "{name}: " + output', "set count <- count + 1"],
    "stay": ['append trail <- "{name}"'],
    "tools": ['append trail <- "{name} ran tools"', "set count <- count + 2"],
    "typed": ["append trail <- output.text", "set count <- count + output.n"],
    "variant": ['append trail <- (output.text if output is Good else "bad")', "set last <- output.text if output is Good else none"],
    "map": ["append trail <- item", "set count <- count + 1"],
    "branch": ['append trail <- "{name}: " + output.text', "set last <- output.text"],
    "ask": ["append trail <- output"],
}


def random_machine(seed: int) -> str:
    """A machine that checks clean, made from `seed` alone."""
    rng = random.Random(seed)
    count = rng.randint(3, 6)
    kinds = [rng.choice(KINDS) for _ in range(count)]
    names = [f"s{i}" for i in range(count)]
    deadline = rng.choice(["", "2h"])
    lines = [f"machine faces_{seed} {{", '    description "A machine the every-face harness made."', "",
             "    input topic: str", '    input items: list[str] = ["a", "b"]', "",
             f"    limits {{\n        steps {rng.choice([12, 40])}\n    }}", "",
             "    type Good {\n        text: str\n        ok: bool\n        n: int\n    }", "",
             "    type Bad {\n        reason: str\n        level: int\n    }", "",
             '    var trail: list[str] = []', "    var count: int = 0", "    var last: str? = none", "",
             '    agent w {\n        prompt "You write about {{ topic }}."\n    }', "",
             f'    agent r {{\n        prompt "You review."\n        memory {rng.choice(["none", "last 2", "all"])}\n    }}',
             "", '    agent t {\n        prompt "You check things with python."\n        tools [std.python]\n    }', ""]
    branches: list[str] = []
    for i, (name, kind) in enumerate(zip(names, kinds)):
        nxt = names[i + 1] if i + 1 < count else "done"
        earlier = [(k, n) for k, n in zip(kinds[:i], names[:i])]
        context = " ".join(_reads(k, n) for k, n in rng.sample(earlier, min(len(earlier), 2)))
        body: list[str] = []
        loop = (f"-> {names[rng.randrange(i)]} max {rng.randint(1, 2)}" if i and rng.random() < 0.4 else None)
        if kind in ("text", "typed", "variant", "stay", "tools"):
            agent = "t" if kind == "tools" else rng.choice("wr")
            trail = " ({{ trail | length }} so far, count {{ count }})" if rng.random() < 0.5 else ""
            body += [f"agent {agent}", f'do "Step {i} on {{{{ topic }}}}.{trail} {context}"']
            if rng.random() < 0.4:
                body.append(f"tell [{'r' if agent == 'w' else 'w'}]")
        if kind == "tools":
            body += ["ask before [std.python]", f"tool_rounds {rng.randint(1, 3)}"]
        if kind in _UPDATES:
            body += [u.format(name=name) for u in _UPDATES[kind] if rng.random() < 0.7]
        if kind == "text":
            if rng.random() < 0.5:
                body.append(f'when "{rng.choice(CONDITIONS)}" -> {nxt}')
            body.append('when "redo" in output -> failed' if rng.random() < 0.3 else f'when output == "ok" -> {nxt}')
        elif kind == "typed":
            body.append("output Good")
            body.append(f"when output.ok -> {nxt}")
            body.append("when output.n > 2 -> failed")
        elif kind == "variant":
            body.append("output Good | Bad")
            body.append(f"when output is Good and output.ok -> {nxt}")
            body.append("when output is Bad and output.level >= 3 -> failed")
        elif kind == "stay":
            body.append(f'when "{rng.choice(CONDITIONS)}" -> {nxt}')
        elif kind == "parallel":
            left, right = f"{name}_a", f"{name}_b"
            join = rng.choice(["all", "first 1"])
            body += [f"parallel [{left}, {right}]", f"join {join}", f"when count(o.ok for o in output) >= 1 -> {nxt}"]
            if rng.random() < 0.5:
                body.insert(2, "set count <- count + len(output)")
            if rng.random() < 0.5:
                body.insert(2, "when len(trail) > 6 and count > 3 -> " + nxt)
            for branch in (left, right):
                updates = [f"        {u.format(name=branch)}" for u in _UPDATES["branch"] if rng.random() < 0.7]
                branches += [f"    branch state {branch} {{", "        agent r",
                             f'        do "Review {branch}: {{{{ topic }}}}. {context}"', "        output Good",
                             *updates, "    }", ""]
        elif kind == "map":
            listed = "items" if rng.random() < 0.6 else "items + trail"
            body += [f"for item in {listed} max 20 concurrency {rng.randint(1, 3)}", f"agent {rng.choice('wr')}",
                     f'do "Handle {{{{ item }}}} for {{{{ topic }}}}. {context}"', "output Good"]
        elif kind == "ask":
            body += [f'ask "Go on with {{{{ topic }}}}? {context}"', 'output "yes" | "no"']
            if deadline:
                body.append(f"after {deadline} -> late")
            body.append(f'when output == "yes" -> {nxt}')
        elif kind == "tools":
            body.append(f'when "{rng.choice(CONDITIONS)}" -> {nxt}' if rng.random() < 0.3 else f"when count > 1 -> {nxt}")
        if loop is not None and kind not in ("ask", "stay"):
            body.append(loop)
        if kind == "stay":
            body.append(f"otherwise stay max {rng.randint(1, 2)} per visit")
        else:
            body.append(f"otherwise -> {nxt if rng.random() < 0.7 else 'failed'}")
        head = "start state" if i == 0 else "state"
        lines += [f"    {head} {name} {{", *(f"        {item}" for item in body), "    }", ""]
    lines += branches
    last_kind, last = kinds[-1], names[-1]
    lines += ["    final state done {",
              f'        result "{{{{ topic }}}}: {_reads(last_kind, last)} [{{{{ trail | join(\', \') }}}}; {{{{ count }}}}]"',
              "    }", "",
              "    final state failed {", '        fail "the run gave up on {{ topic }}"', "    }", ""]
    if deadline and "ask" in kinds:
        lines += ["    final state late", ""]
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---- recording a run as a test block ------------------------------------------------------------------


def _made_up(rng: random.Random, schema: dict[str, Any] | None, defs: dict[str, Any]) -> Any:
    """A value that fits `schema` (the small JSON Schemas pydantic writes for these machines)."""
    if schema is None:
        return rng.choice(TEXTS)
    if "$ref" in schema:
        return _made_up(rng, defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return _made_up(rng, rng.choice(schema["anyOf"]), defs)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        return {key: _made_up(rng, value, defs) for key, value in schema.get("properties", {}).items()}
    if kind == "array":
        return [_made_up(rng, schema.get("items"), defs) for _ in range(rng.randint(0, 2))]
    if kind == "boolean":
        return rng.random() < 0.6
    if kind == "integer":
        return rng.randint(schema.get("minimum", 0), min(schema.get("maximum", 4), 4))
    if kind == "number":
        return rng.choice([0.5, 1.0, 2.5])
    return rng.choice(TEXTS)


class RecordingClient(ScriptedClient):
    """A scripted client whose script grows as the run asks: each reply made up from the seed and the
    request, then served and kept, so the script ends up holding exactly what the run was answered."""

    def __init__(self, seed: int, machine: Any) -> None:
        super().__init__(Script())
        self.seed = seed
        self.machine = machine

    def _rng(self, *key: Any) -> random.Random:
        return random.Random(hashlib.sha256(repr((self.seed, *key)).encode()).digest())

    def _grow(self, role: str, state: str, index: int, make: Any) -> None:
        replies = self.script._replies.setdefault((role, state), [])
        while len(replies) <= index:
            replies.append(ScriptedReply(make(len(replies))))

    def _reply(self, request: ModelRequest) -> tuple[ScriptedReply, int]:
        identity = request.metadata.get("statewright") or {}
        role, state = str(identity.get("role") or request.role), str(identity.get("state") or request.state)
        item = identity.get("item")
        index = int(item) if item is not None else int(identity.get("seq") or 0)
        schema = request.response_schema

        def make(n: int) -> Any:
            rng = self._rng(role, state, n, json.dumps(request.messages[-1:], sort_keys=True))
            if role == "verifier":  # a condition by its text, as a test block names it, or none
                listed = str(request.messages[-1]["content"]).split("Conditions, in order:\n", 1)[1]
                conditions = [line.split(". ", 1)[1] for line in listed.split("\n\n", 1)[0].splitlines()]
                choice = rng.choice([0, *conditions])
                return {"choice": choice, "reason": "made up", "feedback": "again"}
            if request.tools and rng.random() < 0.6:  # the agent asks to run some python first
                return {"tool_calls": [{"name": "std.python", "arguments": {"code": f"print({n} + 1)"}}]}
            return _made_up(rng, schema, (schema or {}).get("$defs", {}))

        self._grow(role, state, index, make)
        return super()._reply(request)

    def person(self, state: str, seq: int, *, run_id: str | None = None, item: int | None = None
               ) -> ScriptedReply | None:
        spec = self.machine.states[state]
        timed = any(t.kind == "timeout" for t in spec.transitions)

        def make(n: int) -> Any:
            rng = self._rng("person", state, n)
            if spec.ask_before:  # a tool call that waits: approved, rejected or edited
                decision = rng.choice(["approve", "approve", "reject", "edit"])
                return {"answer": {"decision": decision, **({"reason": "not now"} if decision == "reject" else {}),
                                   **({"arguments": {"code": "print('edited')"}} if decision == "edit" else {})}}
            if timed and rng.random() < 0.3:
                return {"timeout": True}
            return {"answer": rng.choice(["yes", "yes", "no"])}

        self._grow("person", state, seq, make)
        return super().person(state, seq, run_id=run_id, item=item)


def fsm_value(value: Any) -> str:
    """A JSON value written as a test block's value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(fsm_value(v) for v in value) + "]"
    return "{ " + "  ".join(f"{k} {fsm_value(v)}" for k, v in value.items()) + " }"


def _reply_line(machine: Any, role: str, state: str, value: Any) -> str:
    if role == "verifier":
        choice = value["choice"]
        return f"verdict {state} none" if choice == 0 else f"verdict {state} {json.dumps(choice)}"
    spec = machine.states[state]
    if role == "person" and spec.ask_before:
        answer = value["answer"]
        if answer["decision"] == "reject":
            return f"reject {state} {fsm_value(answer['reason'])}"
        if answer["decision"] == "edit":
            return f"edit {state} {fsm_value(answer['arguments'])}"
        return f"approve {state}"
    if role == "person":
        return f"timeout {state}" if value.get("timeout") else f"reply {state} {fsm_value(value['answer'])}"
    if isinstance(value, dict) and set(value) == {"tool_calls"}:
        calls = ", ".join(f"{c['name']}(" + ", ".join(f"{k} = {fsm_value(v)}" for k, v in c["arguments"].items()) + ")"
                          for c in value["tool_calls"])
        return f"reply {state} call {calls}"
    if spec.output_variant:  # {"value": {"Good": {...}}}
        [(variant, fields)] = value["value"].items()
        return f"reply {state} {variant} {fsm_value(fields)}"
    return f"reply {state} {fsm_value(value)}"


def recorded_test(text: str, seed: int, name: str) -> str:
    """A test block scripting what a local run of `text` was answered with `seed`, and expecting what it did."""
    comp = api.check_text(text, "faces.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics if d.severity == "error"]
    machine = api.runtime_machine(comp)
    client = RecordingClient(seed, machine)
    seen: dict[tuple[str, str, int], Any] = {}

    def observe(kind: str, state: str, visit: int, value: Any) -> None:
        seen[(kind, state, visit)] = value

    rng = random.Random(seed)
    items = rng.choice([[], ["x"], ["x", "y", "z"]])
    inputs = {"topic": rng.choice(["FSMs", 'quotes " and {{ braces }}', "émigré"]), "items": items}
    result = Engine(machine, client=client, observe=observe, require_secrets=False).run(inputs, run_id="record")
    lines = [f"input {{ topic {fsm_value(inputs['topic'])}  items {fsm_value(items)} }}"]
    for (role, state), replies in client.script._replies.items():
        lines += [_reply_line(machine, role, state, reply.value) for reply in replies]
    lines.append(f"expect path [{', '.join(result.path)}]")
    if result.status != "waiting":
        lines += [f"expect var {name} {fsm_value(value)}" for name, value in result.variables.items()
                  if rng.random() < 0.5]
    if result.status == "final":
        lines.append(f"expect final {result.final_state}")
        if isinstance(result.result, str):
            lines.append(f"expect result {fsm_value(result.result)}")
    elif result.failure is not None:
        lines.append(f"expect failure {result.failure.limit or result.failure.kind}")
    for (kind, state, visit), value in sorted(seen.items())[: rng.randint(0, 3)]:
        value = json.loads(json.dumps(value, default=lambda v: v.model_dump(mode="json")))
        if kind == "instruction" and isinstance(value, str):
            lines.append(f"expect instruction {state} visit {visit} {fsm_value(value)}")
        elif kind == "output" and not machine.states[state].output_variant:
            lines.append(f"expect output {state} visit {visit} {fsm_value(value)}")
    body = "".join(f"        {line}\n" for line in lines)
    return f'    test "{name}" {{\n{body}    }}\n'


def with_recorded_tests(text: str, seeds: list[int]) -> str:
    """`text` with one recorded test block per seed."""
    blocks = "\n".join(recorded_test(text, seed, f"recorded {seed}") for seed in seeds)
    assert text.endswith("\n}\n")
    return text[: -len("}\n")] + "\n" + blocks + "}\n"
