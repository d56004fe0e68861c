"""Types and guards (SW4xxx): values, lists, constraints and variant outputs."""

from __future__ import annotations

from .entry import _e

CODES = [
    # --- types and guards -------------------------------------------------------------------------
    _e("SW3100", "machine that runs itself",
       "A machine may not run itself, directly or through the machines it runs (supervisor -> research -> "
       "supervisor): every call would start another, and no bound could be proven. The message names the "
       "chain. A machine that repeats work loops over its own states, with a bound.",
       '# research.fsm\nuse "supervisor.fsm"\n...\n    run supervisor(topics = [topic])',
       "# research.fsm\n...\n    -> research_more max 2   # a bounded loop of its own"),
    _e("SW3101", "state that runs a machine with work of its own",
       "A state with 'run NAME(...)' does its step by running that machine: it has no agent, instruction, "
       "question, tool call, output, branches or retries of its own. Its output is the call's outcome. It may "
       "map over a list ('for'), be a branch state, tell listeners, bound its visits and have transitions.",
       "state investigate {\n    agent researcher\n    run research(topic = topic)",
       "state investigate {\n    run research(topic = topic)"),
    _e("SW3102", "final state that runs a machine",
       "A run ends on entering a final state, so a final state runs no machine: run it in a state before, and "
       "lead from there to the final state (whose result may read the call's outcome).",
       "final state done { run publish(text = draft.output) }",
       'state publishing { run publish(text = draft.output) -> done }\nfinal state done { result '
       '"{{ publishing.output.result }}" }'),
    _e("SW4001", "type mismatch",
       "The operands of a comparison, arithmetic or 'in' do not have compatible types.",
       'when output.score == "high" -> done', "when output.score >= 85 -> done"),
    _e("SW4002", "state has no typed output",
       "'output.FIELD' needs the state to declare 'output TYPE'. Without it the output is plain text (str).",
       "state a { agent w do \"...\" when output.ok -> b }",
       "state a { agent w do \"...\" output Check when output.ok -> b }"),
    _e("SW4004", "guard is not a boolean",
       "A guard must evaluate to true or false, and so must each operand of 'and', 'or' and 'not': compare "
       "the value with something.",
       "when output.score -> done", "when output.score > 0 -> done"),
    _e("SW4005", "wrong arguments to a function",
       "len() takes one str or list; visits() takes one state name.",
       "when len() > 0 -> done", "when len(output.fixes) > 0 -> done"),
    _e("SW4006", "value does not fit the type",
       "A default, test input, test reply or tool argument does not have the declared type.",
       'input retries: int = "two"', "input retries: int = 2"),
    _e("SW4008", "invalid index",
       "Only lists can be indexed, and only with an int.", "when output.fixes[\"a\"] == \"x\" -> done",
       'when output.fixes[0] == "x" -> done'),
    _e("SW4009", "recursive type",
       "A type may not contain itself, directly or through other types: structured output needs a finite "
       "schema.",
       "type Node { child: Node }", "type Node { children: list[str] }"),
    _e("SW4010", "invalid enum",
       "An enum lists distinct string values.", 'status: "ok" | "ok"', 'status: "ok" | "failed"'),
    _e("SW4011", "invalid tool call",
       "A tool call names parameters the tool does not take, or omits a required one.",
       "call std.python(source = \"print(1)\")", "call std.python(code = \"print(1)\")"),
    _e("SW4012", "attribute access on a value without fields",
       "Only values of a declared type have fields.", "when output.score.value > 3 -> done",
       "when output.score > 3 -> done"),
    _e("SW4013", "state name used as a value",
       "In a guard, a state name on its own is not a value: read its output with 'STATE.output' or count its "
       "runs with 'visits(STATE)'.",
       'when draft == "x" -> done', 'when draft.output == "x" -> done'),
    _e("SW4015", "type nested too deep",
       "A value of a type may nest at most 100 levels of records and lists, counted through the named types "
       "it uses: a chain of types each holding the next nests as deep as one type written out. Deeper "
       "schemas are more than a model can fill and more than a reply may nest.",
       "type T0 { next: T1 }\ntype T1 { next: T2 }\n...\ntype T120 { v: int }",
       "type Part { id: str\n  parent: str? }\ntype Outline { parts: list[Part] }"),
    _e("SW4014", "value read where it may be none",
       "A value may be none: an optional one (type 'T?'), or 'STATE.output' where STATE may not have run "
       "yet. Reading a field or an item of it, looping over it, ordering it, doing arithmetic with it or "
       "taking its len() fails on none, so it is allowed only where the value is surely there. "
       "'STATE.output' is there in a guard when every path from the start state to the guard's state "
       "passes through STATE (or STATE is that state), and in a tool-call argument or a template when "
       "every path passes through STATE before the state. Elsewhere, test for none first: in a guard "
       "'VALUE != none and ...' (or 'VALUE == none or ...'); in a template '{% if VALUE %}...{% endif %}' "
       "or '{{ VALUE.FIELD if VALUE }}'. Comparing a value with '==' or '!=', and printing it whole, are "
       "always fine.",
       "when review.output.score > 80 -> publish   # in a state a run can reach before 'review'",
       "when review.output != none and review.output.score > 80 -> publish"),
    _e("SW4060", "map over a value that is not a list",
       "'for item in EXPR' runs the state once per element of EXPR, so EXPR must be a list: a list input, "
       "a list field of a state's output, or the output of a map or a parallel state.",
       "for file in plan.output.title max 9", "for file in plan.output.files max 9"),
    # --- lists, constraints and variant outputs ---------------------------------------------------
    _e("SW4020", "item name already in use",
       "In 'all(TEST for NAME in LIST)' (and any, count) NAME is the current item, bound in TEST only. It "
       "must be a new name: an input, a state, 'output' or the item of an enclosing all/any/count already "
       "mean something everywhere in the guard, and a second meaning would hide the first.",
       "input f: str\n...\nwhen all(f.ok for f in output.findings) -> done",
       "input f: str\n...\nwhen all(finding.ok for finding in output.findings) -> done"),
    _e("SW4021", "all, any or count over something that is not a list",
       "all(), any() and count() go over the items of a list: the value after 'in' must be a list (a list "
       "field, a list input or a list literal). A list that may be none needs a test first, as everywhere "
       "(SW4014).",
       "when all(c != \"x\" for c in output.title) -> done",
       "when all(t != \"x\" for t in output.tags) -> done"),
    _e("SW4022", "constraint does not apply to the type",
       "'in LOW..HIGH' bounds a number (int or float); 'len LOW..HIGH' bounds the characters of a str or the "
       "items of a list; 'matches \"PATTERN\"' applies to a str. On an optional type (T?) a constraint "
       "applies to the value when there is one. Enums, booleans and declared types take none.",
       "title: str in 1..80", "title: str len 1..80"),
    _e("SW4023", "invalid range",
       "A range holds the values from its lower end to its upper end, both included; either end may be left "
       "open (1.. or ..80), not both. The lower end may not be above the upper one, the ends of an int's "
       "range and of a length are whole numbers, a length is never negative, and an end is a finite number.",
       "urgency: int in 5..1", "urgency: int in 1..5"),
    _e("SW4024", "invalid or non-portable pattern",
       "A 'matches' pattern is a regular expression that three engines must read alike: Python's 're' (the "
       "compiler), Rust's 'regex' (pydantic, which validates every reply) and ECMA-262 (JSON Schema's "
       "'pattern', which structured-output decoders read). So it must parse, and it may not use what one of "
       "them lacks or reads differently: lookarounds, backreferences, atomic groups, possessive quantifiers, "
       "Python's named groups '(?P<name>...)', inline flags '(?i)', or '\\A', '\\Z' and '\\z' (anchor with "
       "'^' and '$'). A pattern matches anywhere in the text unless it is anchored.",
       'code: str matches "^(?i)[a-z]+$"', 'code: str matches "^[A-Za-z]+$"'),
    _e("SW4025", "constraints out of order",
       "A field's or an input's constraints are written in one order: 'in', then 'len', then 'matches' (the "
       "formatter never reorders anything, so the order is part of the canonical form).",
       'code: str matches "^[A-Z]+$" len 1..8', 'code: str len 1..8 matches "^[A-Z]+$"'),
    _e("SW4030", "invalid variant output",
       "'output A | B' says the state's output is exactly one of several declared types. Each variant is a "
       "declared type (so that a guard can tell which one arrived with 'output is A'), listed once; built-in "
       "types cannot be variants (wrap one in a type with a single field). Unions of strings are enums "
       "('\"yes\" | \"no\"'), not variants.",
       "output Answer | str", "type Note { text: str }\n...\noutput Answer | Note"),
    _e("SW4031", "field not on every variant",
       "A variant output is one of several types, so a field can be read from it directly only when every "
       "type it may be has the field, with the same type. Otherwise test which variant it is first: in a "
       "guard 'output is A and output.FIELD ...', in a template '{% if draft.output is A %}...{% endif %}'. "
       "A test narrows the value the way a none test does: on the right of 'and' (or of 'or' after a "
       "negated test) and in the body of an 'if'.",
       "when output.text == \"\" -> retry", "when output is Answer and output.text == \"\" -> retry"),
    _e("SW4032", "invalid variant test",
       "'VALUE is TYPE' (and 'VALUE is not TYPE') tells which type a variant output arrived as: VALUE is "
       "'output' or 'STATE.output' of a state with 'output A | B', and TYPE is one of its variants. To test "
       "for none, compare: 'VALUE == none'.",
       "when output is Anwser -> done", "when output is Answer -> done"),
    _e("SW4040", "bound from an input that is not an int",
       "A bound counts steps, visits or elements, so an input it is read from must be declared 'int' (not "
       "optional) with a range: 'input rounds: int in 1..10'.",
       "input rounds: float in 1..10 = 3\n...\n-> debate max rounds",
       "input rounds: int in 1..10 = 3\n...\n-> debate max rounds"),
    _e("SW4100", "unknown input of a called machine",
       "The arguments of 'run NAME(...)' are the inputs of the machine it runs, by name.",
       "run research(topc = topic)", "run research(topic = topic)"),
    _e("SW4101", "called machine's input not given",
       "'run NAME(...)' gives every input of the called machine that has no default and is not optional.",
       "run research()   # research declares 'input topic: str'", "run research(topic = topic)"),
    _e("SW4102", "argument does not fit the called machine's input",
       "Each argument of 'run NAME(...)' is a guard expression whose type must fit the type of the input it "
       "gives (an int fits a float, an enum value a str).",
       'run research(depth = "2")   # input depth: int', "run research(depth = 2)"),
    _e("SW4103", "argument given twice",
       "Each input of a called machine is given once in 'run NAME(...)'.",
       "run research(topic = a, topic = b)", "run research(topic = a)"),
    _e("SW4104", "result that does not fit 'returns'",
       "'returns TYPE' declares the type of the machine's result, what a machine that runs it reads as "
       "'output.result'. Each final state that succeeds must give a TYPE: one with a 'result' template gives "
       "text (so TYPE must be str); one without gives the last output, the output of the state that leads "
       "to it (or its own, when it does work).",
       'returns Report\n...\nfinal state done { result "{{ write.output }}" }',
       "returns Report\n...\nstate write { ... output Report -> done }\nfinal state done"),
    _e("SW4105", "field of an untyped result",
       "A called machine that declares no 'returns TYPE' has a result of no known type when some final state "
       "of it gives the last output: the caller may use 'output.result' as a whole (in a template, say), but "
       "not read fields of it. Declare 'returns TYPE' in the called machine.",
       "when output.result.score > 80 -> done   # research declares no 'returns'",
       "# research.fsm: returns Findings\nwhen output.result != none and output.result.score > 80 -> done"),
    _e("SW2020", "variant type named like a Jinja test",
       "Templates test a variant output with Jinja's 'is': '{% if draft.output is Answer %}'. Jinja has "
       "tests of its own ('number', 'string', 'mapping', 'defined', ...); a variant type with one of those "
       "names could not be told apart from it. Rename the type.",
       "type number { value: int }\n...\noutput number | Note", "type Number { value: int }\n...\noutput Number | Note"),
    _e("SW6020", "reply does not say which variant it is",
       "A reply for a state with a variant output ('output A | B') is one of its variants. Usually the fields "
       "decide: a reply that fits exactly one variant is that one. When it fits several, or to be explicit, "
       "name the variant before the value: 'reply STATE A { ... }'. Only replies for variant outputs name a "
       "variant, and the name must be one of the state's variants.",
       "output Answer | Draft   # both are { text: str }\n...\nreply write { text \"hi\" }",
       "output Answer | Draft\n...\nreply write Answer { text \"hi\" }"),
]
