"""Templates (SW5xxx), test blocks (SW6xxx) and warnings about unused or dead parts (SW7xxx)."""

from __future__ import annotations

from .entry import _e, _w

CODES = [
    # --- templates --------------------------------------------------------------------------------
    _e("SW5001", "template syntax error",
       "Instructions, prompts and results are Jinja2 templates; this one does not parse.",
       'do "Write about {{ topic }"', 'do "Write about {{ topic }}"'),
    _e("SW5002", "output of a state used where it is not typed",
       "A template reads 'STATE.output.FIELD' but that state has no typed output.",
       'do "{{ draft.output.title }}"', 'do "{{ draft.output }}"'),
    _e("SW5003", "template nested too deeply",
       "A template nests brackets, blocks or operators deeper than templates may (30 levels of brackets, "
       "blocks or signs in a row; 100 operations in one expression). Jinja2 parses and compiles templates "
       "recursively, so deeper nesting could not run. Split the template into simpler parts.",
       'do "{{ ((((((((((((((((((((((((((((((((1)))))))))))))))))))))))))))))))) }}"', 'do "{{ 1 }}"'),
    _e("SW5004", "template computes a value that is too large",
       "Templates compute with bounded operators: a number may have at most 4,300 digits and a text or list "
       "at most 10,000,000 characters or items, and '**', '*', '%', '+' and '~' refuse to build anything "
       "larger. The compiler works out constant expressions the same way, so one that would be refused at run "
       "time is an error here.",
       'do "{{ 10 ** 5000 }}"', 'do "{{ 10 ** 50 }}"'),
    _e("SW5010", "read into a value the template check does not follow",
       "The template check follows typed values through every name a template binds ('set', 'with', 'for', "
       "a macro's parameters, 'namespace()') and through the filters whose result it knows ('first', "
       "'map(attribute=...)', 'selectattr', 'groupby', 'default', ...), so that a field read from a copy is "
       "checked like a read of the original. Here a typed value went through something it does not follow — "
       "a filter such as 'dictsort', a value a call returns, a field chosen at run time, 'loop.previtem', a "
       "macro called without the argument — and the template reads a field or an item of the result, which "
       "could fail when the run renders it. Read the field from the value itself, before the filter or call; "
       "the help says how for each case.",
       'do "{% set first = (plan.output.steps | dictsort)[0] %}{{ first.title }}"',
       'do "{% set first = plan.output.steps[0] %}{{ first.title }}"'),
    # --- tests ------------------------------------------------------------------------------------
    _e("SW6001", "test names an unknown state",
       "A 'reply', 'verdict' or 'expect' in a test block names a state the machine does not have.",
       "reply drat \"text\"", "reply draft \"text\""),
    _e("SW6002", "reply does not fit the state's output type",
       "A scripted reply must be a valid value of the state's 'output' type (text for untyped states).",
       "reply review { score \"high\" }", "reply review { score 90 fixes [] }"),
    _e("SW6003", "reply for a state that does no work",
       "Only agent states and action states produce output that a test can script.",
       'reply done "x"', 'reply draft "x"'),
    _e("SW6009", "scripted tool call the state's agent cannot make",
       "'reply STATE call TOOL(...)' scripts a reply of STATE's agent that asks for tool calls; the tools then "
       "run for real. STATE must be an agent state, and each tool one of its agent's 'tools [...]'.",
       'agent writer { prompt "You write." }\n...\nreply draft call std.write_file(path = "a.txt", content = "x")',
       'agent writer { prompt "You write."  tools [std.write_file] }\n...\n'
       'reply draft call std.write_file(path = "a.txt", content = "x")'),
    _e("SW6004", "test input problem",
       "A test gives an input the machine does not declare, or omits one without a default.",
       "input { topc \"x\" }", "input { topic \"x\" }"),
    _e("SW6005", "verdict names no condition of the state",
       "A 'verdict STATE \"condition\"' must repeat one of that state's natural-language conditions, "
       "or be 'verdict STATE none'.",
       'when "the draft is finished" -> done\n...\nverdict draft "the draft is done"',
       'when "the draft is finished" -> done\n...\nverdict draft "the draft is finished"'),
    _e("SW6006", "unknown expectation",
       "A test expects 'path [...]', 'final STATE', 'result VALUE' or 'failure KIND', where KIND is a "
       "failure kind (limit, bound, output, model, tool, guard, script, input, template) or a limit name "
       "(steps, cost_usd, tokens, seconds). A run cannot both reach a final state and fail.",
       "expect failure stepz", "expect failure steps"),
    _e("SW6008", "'timeout' for a state that sets no deadline",
       "'timeout STATE' in a test says the person at STATE did not answer in time, which only a state with "
       "'ask' and 'after DURATION -> s' can notice.",
       'timeout draft', 'timeout approve'),
    _e("SW6007", "expected final state is not final",
       "'expect final STATE' names the final state a run ends in; the named state is not a final state.",
       "expect final review", "expect final publish"),
    _e("SW6040", "expected output does not fit the state's output type",
       "'expect output STATE VALUE' compares STATE's output with VALUE as typed values, so VALUE must fit "
       "the state's output type: text for an agent state without 'output TYPE', the declared type for one "
       "with it, the tool's result for an action state. An object names only the fields it checks; each of "
       "them must be a field of the type, with a value of the field's type. 'contains \"...\"' needs a text "
       "output.",
       'type Critique { score: int  fixes: list[str] }\n...\nexpect output review { score "88" }',
       'type Critique { score: int  fixes: list[str] }\n...\nexpect output review { score 88 }'),
    _e("SW6041", "expectation of something the state does not have",
       "Only an agent state sends an instruction (its rendered 'do'), so 'expect instruction' names an agent "
       "state. A final state does no step and has no output: expect the run's result instead.",
       "state run_tests { call std.python(code = code) ... }\n...\nexpect instruction run_tests contains \"x\"",
       "state run_tests { call std.python(code = code) ... }\n...\nexpect output run_tests { exit_code 0 }"),
    _e("SW6042", "expected result can never match",
       "'expect result VALUE' compares typed values: 90 is not \"90\" and true is not 1. A final state's "
       "'result' template renders text, so when every final state the test can end in has one, the run's "
       "result is text and a number, a boolean, none, a list or an object can never equal it.",
       'final state done { result "{{ review.output.score }}" }\n...\nexpect result 90',
       'final state done { result "{{ review.output.score }}" }\n...\nexpect result "90"'),
    # --- warnings ---------------------------------------------------------------------------------
    _e("SW6100", "test path through a state that runs no machine",
       "A test step scripts a called machine's state by path: each step but the last is a state that runs a "
       "machine ('run NAME(...)'), the last a state of the machine the step before runs.",
       'reply draft/write "text"   # draft is an agent state', 'reply investigate/write "text"'),
    _e("SW6101", "test path to a state the called machine does not have",
       "The last step of a test path names a state of the machine that the step before runs.",
       'reply investigate/draf "text"', 'reply investigate/draft "text"'),
    _e("SW6102", "test path without the call's number, or with one it cannot have",
       "A state that maps over a list runs one call per element: a test path names which by the element's "
       "position in the list, from 0 ('investigate[2]/draft' is the call of the third element), below the "
       "map's 'max'. A state that runs one call takes no number, and the last step (a state) none either.",
       'reply investigate/draft "text"   # investigate: for topic in topics ...',
       'reply investigate[0]/draft "text"'),
    _w("SW7001", "unused agent", "The agent is declared but no state uses it and no state tells it anything.",
       'agent helper { prompt "You help." }   # no state says \'agent helper\' or tells it',
       'agent helper { prompt "You help." }\nstate check { agent helper do "Check it." -> done }'),
    _w("SW7002", "unused type", "The type is declared but nothing refers to it.", "type Unused { x: int }",
       "type Check { ok: bool }\nstate review { ... output Check ... }"),
    _w("SW7003", "unused tool", "The tool is declared but no agent or action state uses it.",
       'tool lookup = "pkg.mod:lookup"',
       'tool lookup = "pkg.mod:lookup"\nagent researcher { prompt "..." tools [lookup] }'),
    _w("SW7004", "unreachable state",
       "No path of transitions that can fire leads here from the start state; the state can never run. "
       "The dead-state pass removes it from compiled runners.",
       "start state draft { ... -> done }\nstate polish { ... -> done }\nfinal state done",
       "start state draft { ... -> polish }\nstate polish { ... -> done }\nfinal state done"),
    _w("SW7005", "unused input", "The input is declared but no template or guard reads it.",
       'input audience: str = "engineers"\n...\ndo "Write about {{ topic }}."',
       'input audience: str = "engineers"\n...\ndo "Write about {{ topic }} for {{ audience }}."'),
    _w("SW7006", "test has no expectation",
       "A test block without 'expect' only checks that the run does not crash.",
       'test "drafts" { input { topic "FSMs" } reply draft "A draft." }',
       'test "drafts" { input { topic "FSMs" } reply draft "A draft." expect final done }'),
    _w("SW7007", "guard whose value never changes",
       "The guard reads nothing a run decides (no 'output', input, 'STATE.output' or 'visits(STATE)'), so it "
       "has the same value every time. Always true, the transition always fires, exactly like '-> s', and "
       "the transitions after it can never fire (SW3007); always false, it never fires. Usually a "
       "placeholder left behind, or a comparison that lost the value it was meant to test.",
       'when 1 == 1 -> done\notherwise -> review', 'when output.score == 1 -> done\notherwise -> review'),
    _w("SW7020", "comparison decided by a constraint",
       "The guard compares a constrained field or input (or its len()) with a number that its range decides: "
       "every value the constraint allows gives the same answer, so the comparison is always true or always "
       "false ('urgency: int in 1..5' makes 'urgency > 5' always false). Only the comparison is reported; the "
       "checks of the machine's shape do not count on it, since a constraint is enforced by validation "
       "rather than by the language.",
       "urgency: int in 1..5\n...\nwhen output.urgency > 5 -> escalate",
       "urgency: int in 1..5\n...\nwhen output.urgency >= 4 -> escalate"),
    _w("SW7021", "pattern that not every decoder reads alike",
       "The pattern is valid everywhere it is validated, but a structured-output decoder may read it "
       "differently or not at all: '\\d', '\\w', '\\s' and '\\b' mean Unicode characters to Python and Rust but "
       "ASCII ones to ECMA-262, and llama.cpp's JSON-schema grammar takes only patterns written '^...$' with "
       "no '(?' groups, lazy quantifiers or class escapes. Replies are validated all the same; a decoder that "
       "cannot read the pattern may reject the request or not enforce it while the model writes.",
       'code: str matches "\\d+"', 'code: str matches "^[0-9]+$"'),
]
