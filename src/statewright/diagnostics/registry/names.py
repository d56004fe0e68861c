"""Names (SW2xxx): declarations, references, and files that use files."""

from __future__ import annotations

from .entry import _e

CODES = [
    # --- names ------------------------------------------------------------------------------------
    _e("SW2001", "duplicate name",
       "Two declarations of the same kind share a name. Names of states, agents, types, tools, inputs, "
       "fields and tests must each be unique. Inputs and states also share one namespace (guards and "
       "templates read both by name), and 'output' is reserved for the current state's output.",
       "state draft { ... }\nstate draft { ... }", "state draft { ... }\nstate redraft { ... }"),
    _e("SW2002", "unknown state",
       "A transition, listener, test or guard names a state that is not declared.",
       "-> reviw", "-> review"),
    _e("SW2003", "unknown agent",
       "A state or a 'tell' list names an agent that is not declared.",
       "agent writr", "agent writer"),
    _e("SW2004", "unknown type",
       "A type reference names neither a built-in type (str, int, float, bool, list[T]) nor a declared "
       "'type'.",
       "output Critque", "output Critique"),
    _e("SW2005", "unknown tool",
       "An agent or action state uses a tool that is neither a standard 'std.*' tool nor declared with "
       "'tool'.",
       "tools [std.pyton]", "tools [std.python]"),
    _e("SW2006", "unknown field",
       "An expression or template reads a field that the type does not have.",
       "when output.scor > 80 -> done", "when output.score > 80 -> done"),
    _e("SW2007", "unknown name in a guard",
       "A guard may use 'output', the machine's inputs, state names (for 'STATE.output') and the functions "
       "len() and visits().", "when scroe > 3 -> done", "when output.score > 3 -> done"),
    _e("SW2008", "unknown template variable",
       "A Jinja2 template uses a variable that is not in scope. Instructions and results can use the "
       "machine's inputs and state names ('STATE.output'). An agent's prompt is rendered once with the "
       "inputs only.",
       'do "Write about {{ topc }}"', 'do "Write about {{ topic }}"'),
    _e("SW2009", "unknown function",
       "Guards may call only len(x) and visits(state).",
       "when length(output.fixes) == 0 -> done", "when len(output.fixes) == 0 -> done"),
    _e("SW2010", "setting given twice",
       "A setting such as 'model', 'prompt' or 'agent' appears twice in the same block.",
       'agent a { model "x" model "y" }', 'agent a { model "y" }'),
    _e("SW2011", "unknown setting or option",
       "A limit (steps, cost_usd, tokens, seconds), memory policy (all, none, last N) or tool option is not "
       "one the language knows. 'memory last' needs a count; 'all' and 'none' take none. User tools take no "
       "options.",
       "limits { step 10 }", "limits { steps 10 }"),
    _e("SW2012", "tool not enabled",
       "std.shell and std.http_get are off unless the machine enables them with a 'tool' declaration.",
       "agent a { tools [std.shell] }", "tool std.shell\nagent a { tools [std.shell] }"),
    _e("SW2013", "invalid tool declaration",
       "A user tool is declared with the import path of its Python function: 'tool NAME = "
       "\"package.module:function\"'. Standard tools ('std.*') are declared by name alone, to enable them or"
       " set their options.",
       "tool lookup", 'tool lookup = "mypkg.tools:lookup"'),
    _e("SW2014", "name reserved by templates",
       "Templates are Jinja2, and Jinja2 gives some names a meaning of its own: 'self' is the template, "
       "'loop' the current loop, 'varargs', 'kwargs', 'caller' and 'super' belong to macros and blocks, "
       "'range', 'dict', 'lipsum', 'cycler', 'joiner' and 'namespace' are functions, 'true', 'false', 'none' "
       "(and 'True', 'False', 'None') are constants and 'not' is an operator. A template could not read an "
       "input or state of that name, so none may have one.",
       "input loop: int\n...\ndo \"Round {{ loop }}.\"", "input round: int\n...\ndo \"Round {{ round }}.\""),
    _e("SW2060", "a map's name hides another name",
       "'for i, item in LIST' names the element's position and the element for the state's instruction and "
       "tool call. A name that is already an input, a state, 'output' or one of Jinja's own names would "
       "hide it there (and the two names must differ).",
       "input file: str\n...\nstate build { for i, file in plan.output.files max 9 ... }",
       "input file: str\n...\nstate build { for i, item in plan.output.files max 9 ... }"),
    _e("SW2040", "unknown secret",
       "A header or query value of std.http_get puts in a secret with ${NAME}, and NAME must be one of the "
       "tool's own secrets: 'secrets [NAME]' in the same tool declaration. A secret is the name of an "
       "environment variable; its value is read when a run starts and never appears in the spec.",
       'tool std.http_get {\n    allow ["api.search.example"]\n    headers { Authorization "Bearer '
       '${SEARCH_KEY}" }\n}',
       'tool std.http_get {\n    allow ["api.search.example"]\n    secrets [SEARCH_KEY]\n    headers { '
       'Authorization "Bearer ${SEARCH_KEY}" }\n}'),
    _e("SW2041", "tool cannot take secrets",
       "Secrets reach two kinds of tool: std.http_get, which puts them into its 'headers' and 'query', and "
       "user tools, whose Python function receives them in a parameter named 'secrets'. std.python and "
       "std.shell run code in a jail that never sees the runner's environment, and the file tools talk to no "
       "service, so none of them takes 'secrets'; only std.http_get takes 'headers' and 'query'.",
       "tool std.shell {\n    secrets [GITHUB_TOKEN]\n}",
       'tool gh = "mytools.github:issues" {\n    secrets [GITHUB_TOKEN]\n}'),
    _e("SW2042", "invalid header or query parameter",
       "std.http_get sends its 'headers' with every request and adds its 'query' parameters to every URL. A "
       "header name is an HTTP token (letters, digits and !#$%&'*+-.^_`|~), given once (names ignore case), "
       "and not one that std.http_get writes itself (Host, Connection and the headers that frame the "
       "body and its encoding); a header value is printable ASCII text. A query parameter has a name. "
       "In a value, ${NAME} puts in a secret and $${ is the text '${'; any other '${' is a mistake.",
       'headers { "X Api Key" "${KEY}" }', 'headers { "X-Api-Key" "${KEY}" }'),
    _e("SW2070", "bound names no input",
       "A bound — 'max N' on a transition or after 'for ... in', 'visits N' on a state — is a number or the "
       "name of an int input whose range says how large it may be; the run reads the bound from that input. "
       "This name is no input of the machine.",
       "input rounds: int in 1..5 = 2\n...\n-> debate max round",
       "input rounds: int in 1..5 = 2\n...\n-> debate max rounds"),
    # --- files that use files, and the machines they run ------------------------------------------
    _e("SW2100", "no file to use",
       "A 'use' line names a .fsm file by its path relative to the folder of the file that uses it; there is "
       "no file at that path.",
       'use "team/research.fsm"   # the folder is teams/', 'use "teams/research.fsm"'),
    _e("SW2101", "file to use cannot be read",
       "The path of a 'use' line names something that cannot be read as a spec: a folder, a file this user "
       "may not read, one the system cannot open, or something that is no regular file (a FIFO or a device, "
       "which is never read: it could hold up the check or never end).",
       'use "teams"', 'use "teams/research.fsm"'),
    _e("SW2102", "used file has errors",
       "A file is used only when it checks: its own errors are reported against it (once, however many "
       "files use it), and each file that uses it gets this one error at its 'use' line. Fix that file first.",
       'use "teams/research.fsm"   # research.fsm has an unknown state', 'use "teams/research.fsm"   # checks'),
    _e("SW2103", "files that use each other",
       "Files cannot use each other in a cycle (a.fsm uses b.fsm, which uses a.fsm): each would need the "
       "other checked first. The message names the whole chain. Move what they share into a third file that "
       "both use.",
       '# a.fsm\nuse "b.fsm" { Report }\n# b.fsm\nuse "a.fsm" { Finding }',
       '# a.fsm and b.fsm\nuse "common.fsm" { Report, Finding }'),
    _e("SW2104", "unknown imported name",
       "The braces of a 'use' line import declarations of that file's machine by name: its types, agents "
       "and tools (a tool by its dotted name). States and inputs are not imported: a machine's states are "
       "run by running the machine.",
       'use "common.fsm" { Critque }', 'use "common.fsm" { Critique }'),
    _e("SW2105", "imported name clashes",
       "A declaration imported with 'use ... { NAME }' takes its name in this machine, as if declared here: "
       "it may not have the name of a declaration of the same kind here, or of another import. An imported "
       "type brings the types its fields use, and an imported agent the tools it lists, under their own "
       "names; those may clash too.",
       'use "common.fsm" { Critique }\nmachine m {\n    type Critique { score: int }',
       'use "common.fsm" { Critique }\nmachine m {\n    type Review { score: int }'),
    _e("SW2106", "two machines callable by one name",
       "Each 'use' line makes the machine of its file callable by that machine's name, or by the name after "
       "'as'. Two lines may not give two machines the same name.",
       'use "a/review.fsm"\nuse "b/review.fsm"', 'use "a/review.fsm"\nuse "b/review.fsm" as second_review'),
    _e("SW2107", "unknown machine",
       "'run NAME(...)' runs a machine that a 'use' line before 'machine' makes callable as NAME: the "
       "machine's own name, or the name after 'as'.",
       'use "teams/research.fsm"\n...\n    run reserch(topic = topic)',
       'use "teams/research.fsm"\n...\n    run research(topic = topic)'),
]
