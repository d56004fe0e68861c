"""Completion: the names, keywords and snippets that fit where the cursor is.

It reads the text before the cursor (context.py), so it works on a line that does not parse yet, and the
names of the document's last version that parsed. Inside a state, only the items that fit the kind of
state its other lines make it are offered: no `ask` or `after` in an agent state, no `agent` where a tool
is called, no `join` where the state does work. Snippets (a machine, a state, a test, a parallel state
with its branches, a map, a state that asks a person) are offered to clients that take snippets.
"""

from __future__ import annotations

import os
import re

from lsprotocol import types

from ..compiler import ir
from ..compiler.checks.resolve import BUILTIN_TYPES, JINJA_NAMES, Symbols
from ..runtime.tool_signatures import STD_TOOLS
from .analysis import Analysis
from .context import Block, CursorContext, cursor_context, dotted_chain, statement_words, word_before

MACHINE_KEYWORDS = ("description", "input", "returns", "model", "verifier model", "temperature", "limits", "var",
                    "type", "tool", "agent", "state", "start state", "final state", "branch state", "test")
FILE_KEYWORDS = ("use", "machine")  # before the machine: the files it uses, then the machine
AGENT_KEYWORDS = ("prompt", "model", "temperature", "tools", "memory", "fallbacks")
TEST_KEYWORDS = ("input", "reply", "verdict", "timeout", "approve", "reject", "edit", "expect path", "expect final",
                 "expect result", "expect failure", "expect output", "expect instruction", "expect var",
                 "allow unused replies")
UPDATE_KEYWORDS = ("set", "append", "extend", "merge")
TOOL_KEYWORDS = ("allow", "secrets", "headers", "query")
LIMIT_KEYWORDS = ("steps", "cost_usd", "tokens", "seconds")
GUARD_FUNCTIONS = ("len", "visits", "sum", "min", "max")


def completion(a: Analysis, good: Analysis | None, position: types.Position, *, snippets: bool = False
               ) -> types.CompletionList:
    """Names that fit where the cursor is: states after `->`, fields after `output.` and
    `STATE.output.`, variables in templates, keywords (and, for a client that takes them, snippets) at the
    start of a line in a block. Names come from the document's last version that parsed (`good`), so
    completing inside half-typed text works."""
    offset = a.lines.offset(position.line, position.character)
    context = cursor_context(a.text, offset)
    source = a if a.compilation.symbols is not None else good
    symbols = source.compilation.symbols if source is not None else None
    items = _complete(context, symbols, a.text, offset) if not context.in_comment else []
    block = context.block
    if not items and block is not None and block.kind == "use" and a.project is not None:
        # a `use` line being typed: the file it names, if the project has compiled it
        joined = os.path.normpath(os.path.join(os.path.dirname(a.path), block.name))
        compiled = a.project.compilation(joined)
        if compiled is not None and compiled.symbols is not None:
            items = _importable_from(compiled.symbols)
    if snippets and not context.in_comment and not context.in_string and re.fullmatch(r"\s*\w*", context.line):
        items += _snippets(context.block)
    return types.CompletionList(is_incomplete=False, items=items)


def _item(label: str, kind: types.CompletionItemKind, detail: str = "", doc: str = "") -> types.CompletionItem:
    documentation = types.MarkupContent(kind=types.MarkupKind.Markdown, value=doc) if doc else None
    return types.CompletionItem(label=label, kind=kind, detail=detail or None, documentation=documentation)


def _complete(context: CursorContext, symbols: Symbols | None, text: str, offset: int
              ) -> list[types.CompletionItem]:
    K = types.CompletionItemKind
    state = context.state
    if context.in_string:
        if context.template is None:
            return []
        return _expression(context.template, symbols, state.name if state else None, template=True,
                           scope_states=state is not None)
    line = context.line
    block = context.block
    if symbols is not None:
        if re.search(r"->\s*\w*$", line) and not re.search(r"^\s*when\b.*->.*->", line):
            return [_item(n, K.EnumMember, "state") for n in symbols.states]
        if block is not None and block.kind == "state":
            if re.search(r"^\s*agent\s+\w*$", line):
                return [_item(n, K.Class, "agent") for n in symbols.agents]
            if re.search(r"^\s*output\s+[\w\[]*$", line):
                return _types(symbols)
            if re.search(r"^\s*tell\s*\[[^\]]*$", line):
                return [_item(n, K.Class, "agent") for n in symbols.agents]
            if re.search(r"^\s*call\s+[\w.]*$", line):
                return _tools(symbols)
            if re.search(r"^\s*(set|append|extend|merge)\s+\w*$", line):
                return _variables(symbols)
            if re.search(r"^\s*(set|append|extend|merge)\s+\w+\s*<-\s*", line):
                return _expression(re.sub(r"^\s*\w+\s+\w+\s*<-\s*", "", line), symbols,
                                   state.name if state else None, template=False, scope_states=True)
            if re.search(r"^\s*ask\s+before\s*\[[^\]]*$", line):
                return _agent_tools(symbols, state.name if state else None)
            run = _run_completion(line, symbols)
            if run is not None:
                return run
            if re.search(r"^\s*parallel\s*\[[^\]]*$", line):  # the branches: their entry states
                return [_item(n, K.EnumMember, "branch state") for n, v in symbols.states.items() if v.decl.branch]
            if re.search(r"^\s*(for\s+\w+(\s*,\s*\w+)?\s+in|join\s+first(\s+\d+)?\s+where)\s+", line):
                expression = re.sub(r"^\s*(for\s+\w+(\s*,\s*\w+)?\s+in|join\s+first(\s+\d+)?\s+where)\s+", "", line)
                return _expression(expression, symbols, state.name if state else None, template=False,
                                   scope_states=True)
            if re.search(r"^\s*when\s+", line):
                return _expression(re.sub(r"^\s*when\s+", "", line), symbols, state.name if state else None,
                                   template=False, scope_states=True)
            if re.search(r"^\s*call\s+[\w.]+\s*\(.*=\s*[^,)]*$", line):
                return _expression(line.rsplit("=", 1)[1], symbols, None, template=False, scope_states=True)
        if block is not None and block.kind == "agent" and re.search(r"^\s*tools\s*\[[^\]]*$", line):
            return _tools(symbols)
        if block is not None and block.kind == "test" and re.search(r"^\s*expect\s+var\s+\w*$", line):
            return _variables(symbols)
        if block is not None and block.kind == "test" and re.search(r"^\s*(approve|reject|edit)\s+\w*$", line):
            return [_item(n, K.EnumMember, "state whose tool calls wait for approval")
                    for n, v in symbols.states.items() if v.ask_before is not None]
        if block is not None and block.kind == "use":
            return _importable(block.name, symbols)
        if block is not None and block.kind == "test" and (
                re.search(r"^\s*(reply|verdict|timeout|expect\s+(final|output|instruction))\s+\w*$", line)
                or re.search(r"^\s*expect\s+path\s*\[[^\]]*$", line)):
            return [_item(n, K.EnumMember, "state") for n in symbols.states]
        if block is not None and block.kind == "machine" and re.search(r"^\s*(input|var)\s+\w+\s*:\s*[\w\[]*$", line):
            return _types(symbols)
        if block is not None and block.kind == "type" and re.search(r":\s*[\w\[]*$", line):
            return _types(symbols)
    if block is not None and block.kind == "agent" and re.search(r"^\s*memory\s+\w*$", line):
        return [_item(w, K.Keyword) for w in ("all", "none", "last")]
    if block is not None and block.kind == "test" and re.search(r"^\s*expect\s+failure\s+\w*$", line):
        from ..runtime.result import FAILURE_KINDS

        return [_item(w, K.EnumMember, "failure kind") for w in FAILURE_KINDS]
    if re.fullmatch(r"\s*\w*", line):
        if block is not None and block.kind == "state":
            return [_item(w, K.Keyword) for w in state_keywords(block, statement_words(text, block.start, offset))]
        return [_item(w, K.Keyword) for w in _keywords(block)]
    return []


def _run_completion(line: str, symbols: Symbols) -> list[types.CompletionItem] | None:
    """After `run `: the machines this one may run; in its parentheses, the inputs not given yet, and
    after `=` the names in scope."""
    K = types.CompletionItemKind
    if re.search(r"^\s*run\s+\w*$", line):
        return [_item(n, K.Module, f"machine {c.machine_name} ({c.path})") for n, c in symbols.callees.items()]
    m = re.search(r"^\s*run\s+(\w+)\s*\(([^)]*)$", line)
    if m is None:
        return None
    if re.search(r"=\s*[^,]*$", m.group(2)):
        return _expression(m.group(2).rsplit("=", 1)[1], symbols, None, template=False, scope_states=True)
    callee = symbols.callees.get(m.group(1))
    if callee is None:
        return []
    given = set(re.findall(r"(\w+)\s*=", m.group(2)))
    return [_item(n, K.Variable, f"input {d.type.span.text}") for n, d in callee.symbols.inputs.items()
            if n not in given]


def _importable(path: str, symbols: Symbols) -> list[types.CompletionItem]:
    """In the braces of `use "PATH" {`: the types, agents and tools of that file's machine."""
    used = next((u for u in symbols.uses if u.decl.path.value == path and u.compilation is not None), None)
    other = used.compilation.symbols if used is not None and used.compilation is not None else None
    return _importable_from(other) if other is not None else []


def _importable_from(other: Symbols) -> list[types.CompletionItem]:
    K = types.CompletionItemKind
    return ([_item(n, K.Struct, "type") for n in other.types] + [_item(n, K.Class, "agent") for n in other.agents]
            + [_item(n, K.Function, "tool") for n in other.tools])


def _keywords(block: Block | None) -> tuple[str, ...]:
    if block is None:
        return FILE_KEYWORDS
    return {"machine": MACHINE_KEYWORDS, "agent": AGENT_KEYWORDS, "test": TEST_KEYWORDS,
            "limits": LIMIT_KEYWORDS, "tool": TOOL_KEYWORDS}.get(block.kind, ())


def state_keywords(block: Block, present: set[str]) -> list[str]:
    """The items that fit a state whose other statements begin with the words in `present`.

    What a state already holds decides its kind (the shape checks' rules): an agent state (`agent`, `do`,
    `model`) takes no `call`, `ask` or `parallel`; an action state (`call`) no agent's items; a state that
    asks a person (`ask`) has nothing of an agent's and is the only one with `after`; a parallel state
    (`parallel`, `join`) does no work of its own; a map (`for`) does not ask; a branch state neither asks,
    fans out nor maps; a final state has no transitions and ends with `result` or `fail`. An empty state
    is offered every kind's first words."""
    agent_work = bool(present & {"agent", "do", "model", "ask before", "tool_rounds"})
    tool_work = "call" in present or "run" in present  # (running a machine is the state's work, as a call is)
    asks = "ask" in present
    fans = bool(present & {"parallel", "join"})
    maps = "for" in present
    final, branch = block.final, block.branch
    offered = [
        ("agent", not (tool_work or asks or fans)),
        ("model", not (tool_work or asks or fans)),
        ("do", not (tool_work or asks or fans)),
        ("call", not (agent_work or asks or fans or "run" in present)),
        ("run", not (agent_work or asks or fans or final or "call" in present)),
        ("ask", not (agent_work or tool_work or fans or maps or final or branch or "retries" in present)),
        ("output", not (fans or "run" in present)),
        ("tell", not final),
        ("visits", not final),
        ("retries", not (asks or fans or "run" in present)),
        ("after", asks and not final),
        ("when", not final),
        ("otherwise", not final),
        ("->", not final),
        ("parallel", not (agent_work or tool_work or asks or maps or final or branch or fans
                          or present & {"output", "retries"})),
        ("join all", not (agent_work or tool_work or asks or maps or final or branch or "join" in present
                          or present & {"output", "retries"})),
        ("join first", not (agent_work or tool_work or asks or maps or final or branch or "join" in present
                            or present & {"output", "retries"})),
        ("for", not (asks or fans or maps or final or branch)),
        ("ask before", agent_work and not (tool_work or asks or fans)),
        ("tool_rounds", agent_work and not (tool_work or asks or fans)),
        *((word, bool(agent_work or tool_work or asks or fans or not final)) for word in UPDATE_KEYWORDS),
        ("result", final and "fail" not in present),
        ("fail", final and "result" not in present),
    ]
    return [word for word, fits in offered if fits and (word not in present or word in _REPEATABLE)]


# a state has many transitions and updates, and one of each other item
_REPEATABLE = frozenset({"when", "->", *UPDATE_KEYWORDS})


# ---- snippets: skeletons to fill in, tab by tab ----------------------------------------------------------

_SNIPPETS: dict[str, tuple[str, str, str]] = {  # label -> (where, what it is, the snippet)
    "machine": ("top", "a machine with an input, an agent, a start and a final state", """\
machine ${1:name} {
    description "${2:What the machine does.}"

    input ${3:task}: str

    model "${4:openai/gpt-4o-mini}"

    agent ${5:worker} {
        prompt "${6:You do the task well.}"
    }

    start state ${7:work} {
        agent ${5:worker}
        do "${8:Do this task}: {{ ${3:task} }}"
        -> done
    }

    final state done
}"""),
    "state": ("machine", "an agent state", """\
state ${1:name} {
    agent ${2:agent}
    do "${3:What the agent does.}"
    -> ${4:next}
}"""),
    "test": ("machine", "a test block: inputs, scripted replies and the path expected", """\
test "${1:what it shows}" {
    input { ${2:name} "${3:value}" }
    reply ${4:state} "${5:A reply.}"
    expect path [${4:state}, ${6:done}]
}"""),
    "parallel": ("machine", "a parallel state and its two branches", """\
state ${1:reviews} {
    parallel [${2:first}, ${3:second}]
    join all
    -> ${4:next}
}

branch state ${2:first} {
    agent ${5:agent}
    do "${6:The first branch's work.}"
}

branch state ${3:second} {
    agent ${5:agent}
    do "${7:The second branch's work.}"
}"""),
    "map": ("machine", "a state that runs once per element of a list", """\
state ${1:name} {
    for ${2:item} in ${3:list} max ${4:10}
    agent ${5:agent}
    do "${6:Work on} {{ ${2:item} }}"
    -> ${7:next}
}"""),
    "ask": ("machine", "a state that asks a person and waits for the answer", """\
state ${1:approve} {
    ask "${2:Should we go on?}"
    output ${3:Decision}
    after ${4:24h} -> ${5:timed_out}
    when output.${6:approved} -> ${7:next}
    otherwise -> ${8:refused}
}"""),
}


def _snippets(block: Block | None) -> list[types.CompletionItem]:
    where = "top" if block is None else block.kind
    return [types.CompletionItem(
        label=label, kind=types.CompletionItemKind.Snippet, detail=what,
        label_details=types.CompletionItemLabelDetails(description="snippet"),
        insert_text=snippet, insert_text_format=types.InsertTextFormat.Snippet,
        insert_text_mode=types.InsertTextMode.AdjustIndentation)
        for label, (at, what, snippet) in _SNIPPETS.items() if at == where]


def snippet_text(label: str) -> str:
    """A snippet as the text it inserts when every placeholder keeps its default."""
    text = _SNIPPETS[label][2]
    while True:
        replaced = re.sub(r"\$\{\d+:([^${}]*)\}", r"\1", text)
        if replaced == text:
            return re.sub(r"\$\d+", "", replaced)
        text = replaced


def _types(symbols: Symbols) -> list[types.CompletionItem]:
    K = types.CompletionItemKind
    return ([_item(n, K.Struct, "type") for n in symbols.types] + [_item(n, K.TypeParameter, "built-in type")
                                                                    for n in (*BUILTIN_TYPES, "list")])


def _variables(symbols: Symbols) -> list[types.CompletionItem]:
    K = types.CompletionItemKind
    return [_item(n, K.Variable, "run variable " + decl.type.span.text) for n, decl in symbols.variables.items()]


def _agent_tools(symbols: Symbols, state: str | None) -> list[types.CompletionItem]:
    """The tools of the state's agent (what `ask before [...]` may name)."""
    view = symbols.states.get(state or "")
    agent = symbols.agents.get(view.agent.name.value) if view is not None and view.agent is not None else None
    names = [t.dotted for t in agent.tools.tools] if agent is not None and agent.tools is not None else []
    K = types.CompletionItemKind
    return [_item(n, K.Function, "tool", STD_TOOLS.get(n, {}).get("doc", "")) for n in names]


def _tools(symbols: Symbols) -> list[types.CompletionItem]:
    K = types.CompletionItemKind
    names = dict.fromkeys([*symbols.tools, *STD_TOOLS])
    return [_item(n, K.Function, "tool", STD_TOOLS.get(n, {}).get("doc", "")) for n in names]


def _expression(text: str, symbols: Symbols | None, state: str | None, *, template: bool,
                scope_states: bool) -> list[types.CompletionItem]:
    """Completions in a guard or a template expression: the names in scope, or after a dot the fields."""
    if symbols is None:
        return []
    K = types.CompletionItemKind
    chain = dotted_chain(text)
    if chain is None:
        if not re.search(r"(^|[\s(\[,!=<>+\-*/%|])\w*$", text) and word_before(text) == "":
            return []
        items = [_item(n, K.Variable, "input " + symbols.inputs[n].type.span.text) for n in symbols.inputs]
        if scope_states:  # (where states are in scope, so are the run variables: not in a prompt)
            items += _variables(symbols)
            items += [_item(n, K.EnumMember, "state") for n in symbols.states if n not in JINJA_NAMES]
        if not template and state is not None:
            items.append(_item("output", K.Variable, "this state's output"))
        if not template:
            items += [_item(f, K.Function, "function") for f in GUARD_FUNCTIONS]
        return items
    names, _ = chain
    t = _chain_type(names, symbols, state, template)
    if isinstance(t, str):  # a state itself: its parts
        return [_item(p, K.Property, doc) for p, doc in (
            ("output", f"the output of state '{t}'"), *((("visits", "how many times it ran"),) if template else ()))]
    while isinstance(t, ir.Optional_):
        t = t.inner
    if not isinstance(t, ir.Named):
        return []
    decl = symbols.types.get(t.name)
    return [_item(f.name.value, K.Field, f.type.span.text, f.doc.value if f.doc else "")
            for f in (decl.fields if decl else ())]


def _chain_type(names: list[str], symbols: Symbols, state: str | None, template: bool) -> ir.Type | str | None:
    """The type of `a.b.c` (or the state's name, for a chain that is a state alone)."""
    first, rest = names[0], names[1:]
    t: ir.Type | None
    if first == "output" and not template and state in symbols.states:
        t = _output(symbols, state)
    elif first in symbols.inputs:
        t = symbols.resolve_type(symbols.inputs[first].type)
    elif first in symbols.variables:
        t = symbols.resolve_type(symbols.variables[first].type)
    elif first in symbols.states:
        if not rest:
            return first
        if rest[0] != "output":
            return None
        t, rest = _output(symbols, first), rest[1:]
    else:
        return None
    for name in rest:
        while isinstance(t, ir.Optional_):
            t = t.inner
        if not isinstance(t, ir.Named):
            return None
        t = symbols.fields_of(t.name).get(name)
    return t


def _output(symbols: Symbols, state: str | None) -> ir.Type | None:
    view = symbols.states.get(state or "")
    return symbols.resolve_output(view.output.type) if view is not None and view.output is not None else None
