"""The registry of diagnostic codes. Codes are stable: never renumber, never reuse a retired code.

SW1xxx syntax · SW2xxx names · SW3xxx machine structure · SW4xxx types and guards ·
SW5xxx templates · SW6xxx test blocks · SW7xxx warnings about unused or dead parts ·
SW8xxx importers (`statewright import`: SW80xx errors in the input, SW81xx lint notes; an AutoAgent agent
form's own are SW8040-SW8049 errors and SW8050-SW8059 lint notes) · SW9xxx internal.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class _Sev(str, Enum):  # mirrors diagnostic.Severity without importing it (avoids a cycle)
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class CodeInfo:
    code: str
    title: str
    severity: _Sev
    explanation: str
    wrong: str = ""
    right: str = ""


def _e(code: str, title: str, explanation: str, wrong: str = "", right: str = "") -> CodeInfo:
    return CodeInfo(code, title, _Sev.ERROR, explanation, wrong, right)


def _w(code: str, title: str, explanation: str, wrong: str = "", right: str = "") -> CodeInfo:
    return CodeInfo(code, title, _Sev.WARNING, explanation, wrong, right)


_ALL = [
    # --- syntax -------------------------------------------------------------------------------
    _e("SW1001", "unexpected character",
       "The file contains a character that cannot start any token of the language.",
       'state draft { agent writer; }', "state draft { agent writer }"),
    _e("SW1002", "unexpected token",
       "The parser found a token where the grammar does not allow it. The message lists what it expected.",
       "state draft { agent }", "state draft { agent writer }"),
    _e("SW1003", "unexpected end of file",
       "The file ended while a block or statement was still open; usually a missing '}'.",
       "machine m {\n    final state done\n", "machine m {\n    final state done\n}"),
    _e("SW1004", "unterminated string",
       "A string literal has no closing quote. Single-quoted strings end on the same line; "
       'use """triple quotes""" for text over several lines.',
       'do "Write the draft', 'do "Write the draft"'),
    _e("SW1005", "file is not valid UTF-8 text",
       "statewright source files are UTF-8 text. The file holds bytes that are not valid UTF-8 "
       "(it may be binary or in another encoding).",
       'description "caf\\xe9"   # saved as Latin-1: the byte 0xe9 alone',
       'description "café"       # saved as UTF-8'),
    _e("SW1006", "invalid escape sequence",
       'Inside "double-quoted" strings, backslash escapes are \\\\ \\" \\n \\t \\r and \\uXXXX. '
       'Triple-quoted strings take backslashes literally.',
       r'do "C:\path"', r'do "C:\\path"'),
    _e("SW1010", "'=' used as a comparison",
       "Guards compare with '=='. A single '=' is only used for input defaults and tool-call arguments.",
       "when output.status = \"ok\" -> done", "when output.status == \"ok\" -> done"),
    _e("SW1011", "'else' is not a keyword",
       "The catch-all transition is written 'otherwise -> state' (or 'otherwise stay').",
       "else -> failed", "otherwise -> failed"),
    _e("SW1012", "'&&', '||' or '!' in a guard",
       "Guards use the words 'and', 'or' and 'not'.",
       "when output.ok && output.score > 3 -> done", "when output.ok and output.score > 3 -> done"),
    _e("SW1013", "missing 'state' keyword",
       "'start' and 'final' modify a state declaration: write 'start state NAME' or 'final state NAME'.",
       "final done", "final state done"),
    _e("SW1014", "missing '->' in a transition",
       "A transition names its target after an arrow: 'when GUARD -> STATE', '-> STATE', 'otherwise -> "
       "STATE'.",
       "when output.ok done", "when output.ok -> done"),
    _e("SW1015", "':' used to start a block",
       "Blocks are written with braces: 'state draft { ... }'.",
       "state draft:\n    agent writer", "state draft {\n    agent writer\n}"),
    _e("SW1020", "nesting too deep",
       "A guard, a type or a value (a default, tool option or test data) is nested deeper than the compiler "
       "accepts: 100 levels, counted as the constructs of its kind it sits inside. What a machine holds "
       "becomes Python code, pydantic models and run-time values, which are all read recursively, so deeper "
       "nesting could not run. Split a guard into several transitions, name the inner levels of a type "
       "('type Inner { ... }'), flatten a value.",
       "input deep: list[list[list[ ... 101 levels ... ]]]", "type Row { cells: list[str] }\ninput rows: list[Row]"),
    _e("SW1021", "file too large",
       "The file is larger than the compiler reads: 16 MiB (16,777,216 bytes; a text given directly, as the "
       "language server gives it, is measured in characters). Nothing of it is read past the limit, not even "
       "from a pipe. Keep long texts such as prompts short, split the machine into machines that call each "
       "other, or load large data at run time with a tool.", "", ""),
    _e("SW1022", "cannot read file",
       "A file named on the command line, or a directory searched for .fsm files, does not exist or cannot "
       "be read (for example, for lack of permission), so nothing in it was checked. The message gives the "
       "operating system's reason; for a missing file the help names the closest .fsm file beside it. The "
       "other files of the same command are still checked.",
       "statewright check flows/reveiw.fsm", "statewright check flows/review.fsm"),
    _e("SW1030", "':' after a keyword",
       "A statement's value follows its keyword directly: 'output Draft', 'agent writer', 'visits 3'. A colon "
       "belongs only between a name and its type ('input topic: str', a type's 'score: int') and, optionally, "
       "between a key and its value in an object.",
       "state review {\n    output: Critique\n}", "state review {\n    output Critique\n}"),
    _e("SW1031", "statement in the wrong block",
       "Each kind of block holds its own statements: an agent holds 'prompt', 'model', 'tools', 'memory'; a "
       "state holds 'agent', 'do', 'output', 'tell', transitions; a test holds 'input', 'reply', 'expect'; an "
       "agent is declared beside the states, not inside one. The statement was found in a block of another "
       "kind; the message says where it belongs.",
       "agent writer {\n    do \"Write the draft.\"\n}",
       "agent writer {\n    prompt \"You write drafts.\"\n}\nstate draft {\n    agent writer\n"
       "    do \"Write the draft.\"\n}"),
    _e("SW1032", "text after the end of the machine",
       "A file holds one machine, and its block ends at its last '}'. Something follows that '}': usually a "
       "'}' above is one too many and closed the machine early, or a declaration was written after the "
       "machine's closing brace.",
       "machine m {\n    state a { -> b } }\n    final state b\n}",
       "machine m {\n    state a { -> b }\n    final state b\n}"),
    _e("SW1033", "'\"' inside a string",
       "A double-quoted string ends at the next '\"', so a quote meant to be part of the text ends it early and "
       "what follows is read as code. Escape the quote as \\\", or write the text in \"\"\"triple quotes\"\"\", "
       "which may hold single quotes freely.",
       'do "Write about "FSMs" for beginners."', 'do "Write about \\"FSMs\\" for beginners."'),
    # --- names --------------------------------------------------------------------------------
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
    # --- files that use files, and the machines they run --------------------------------------------
    _e("SW2100", "no file to use",
       "A 'use' line names a .fsm file by its path relative to the folder of the file that uses it; there is "
       "no file at that path.",
       'use "team/research.fsm"   # the folder is teams/', 'use "teams/research.fsm"'),
    _e("SW2101", "file to use cannot be read",
       "The path of a 'use' line names something that cannot be read as a spec: a folder, a file this user "
       "may not read, or one the system cannot open.",
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
    # --- structure ----------------------------------------------------------------------------
    _e("SW3001", "no start state",
       "Every machine needs exactly one 'start state'.", "state draft { ... }", "start state draft { ... }"),
    _e("SW3002", "more than one start state",
       "A machine has exactly one 'start state'.", "start state a { ... }\nstart state b { ... }",
       "start state a { ... }\nstate b { ... }"),
    _e("SW3003", "no final state",
       "A run ends when it reaches a 'final state'; a machine without one can only end by a limit.",
       "start state draft { agent writer do \"Write.\" -> draft max 3 }",
       "start state draft { agent writer do \"Write.\" -> done }\nfinal state done"),
    _e("SW3005", "no final state can be reached",
       "From this state no sequence of transitions leads to a final state, so a run that gets here can only "
       "end by exhausting a limit. Only transitions that can fire count: one after an unconditional "
       "transition (SW3007), one whose guard is always false (SW7007) and one out of a state no run reaches "
       "lead nowhere.", "state loop { ... -> loop max 3 }", "state loop { ... -> loop max 3\n"
       "    otherwise -> done }"),
    _e("SW3006", "transition out of a final state",
       "Reaching a final state ends the run; transitions there can never be taken.",
       "final state done { -> draft }", "final state done"),
    _e("SW3007", "transition can never fire",
       "Transitions are tried in source order. After an unconditional '-> s', an 'otherwise' or a guard that "
       "is always true (SW7007), without a bound, nothing later can be reached. (A bounded edge such as "
       "'-> s max 2' falls through once exhausted.) A guard written a second time in the same state never "
       "fires either: the first one is true whenever it is.",
       "-> review\nwhen output.ok -> done", "when output.ok -> done\n-> review"),
    _e("SW3008", "cycle with no bound",
       "Every loop must be bounded: put 'max N' on one of its edges or 'visits N' on one of its states. "
       "The message names the states that form the cycle. A guard is not a bound, even one that counts "
       "visits ('when visits(review) < 3 -> draft'): the compiler does not work out when a guard turns false, "
       "so write the bound where it can see it ('visits 3' on the state, or 'max 3' on the edge).",
       "state a { ... -> b }\nstate b { ... -> a }", "state a { ... -> b }\nstate b { ... -> a max 3 }"),
    _e("SW3009", "state does no work",
       "A non-final state needs an 'agent' (with an instruction) or a tool 'call'.",
       "state draft { -> done }", 'state draft { agent writer do "Write." -> done }'),
    _e("SW3010", "state has both an agent and a tool call",
       "A state is either an agent state or a tool-only action state, not both.",
       'state t { agent a  call std.python(code = "1") }', 'state t { call std.python(code = "1") }'),
    _e("SW3011", "final state with a setting only other states use",
       "A final state ends the run once it has done its work (if any): it runs only once and no state comes "
       "after it, so 'visits' and 'tell' mean nothing there.",
       'final state done { agent writer do "Sum up." tell [editor] }',
       'final state done { agent writer do "Sum up." }'),
    _e("SW3012", "state has no transitions",
       "A non-final state must say where the run goes next.",
       'state draft { agent writer do "Write." }', 'state draft { agent writer do "Write." -> done }'),
    _e("SW3013", "bound must be at least 1",
       "'max N', 'visits N' and 'retries N' (which may be 0) need a sensible count.",
       "-> review max 0", "-> review max 2"),
    _e("SW3014", "agent state without instruction",
       "An agent state needs 'do \"...\"' telling the agent what this step is.",
       "state draft { agent writer -> done }", 'state draft { agent writer do "Write." -> done }'),
    _e("SW3015", "value out of range",
       "A number is outside the range its setting allows (temperature 0–2, limits above 0, 'retries' 0 to "
       "10).",
       "temperature 7", "temperature 0.7"),
    _e("SW3016", "'otherwise stay' needs a bound",
       "'otherwise stay' re-runs the state; bound it with 'max N' or give the state 'visits N'.",
       "otherwise stay", "otherwise stay max 2"),
    _e("SW3017", "instruction in an action state",
       "An action state calls a tool and runs no agent, so nothing would read its 'do' instruction.",
       'state test { call std.python(code = "1") do "Run it." -> done }',
       'state test { call std.python(code = "1") -> done }'),
    _e("SW3018", "result in a state that is not final",
       "'result' is what a run ends with, so only a final state can have one.",
       'state draft { agent writer do "Write." result "{{ draft.output }}" -> done }',
       'final state done { result "{{ draft.output }}" }'),
    _e("SW3019", "'fail' in a state that is not final",
       "'fail \"reason\"' declares that reaching a final state is a failure of the run, so only a final "
       "state can have it.",
       'state give_up { agent a do "Apologise." fail "no answer" -> done }',
       'final state give_up { fail "no answer" }'),
    _e("SW3020", "failing final state with a result",
       "A run that ends in a failing final state has no result: its failure carries the reason instead.",
       'final state aborted { fail "gave up" result "{{ draft.output }}" }',
       'final state aborted { fail "gave up after: {{ draft.output }}" }'),
    _e("SW3021", "'per visit' on a transition other than 'otherwise stay'",
       "'max N per visit' counts the runs of one state within one visit, so only 'otherwise stay' can carry "
       "it; 'max N' on any other transition counts over the whole run.",
       "-> review max 2 per visit", "otherwise stay max 2 per visit"),
    _e("SW3022", "'model' in a state without an agent",
       "A state's 'model' overrides the model of its agent for that state; a state without an agent calls "
       "no model.",
       'state test { call std.python(code = "1") model "openai/gpt-4o" -> done }',
       'state review { agent critic model "openai/gpt-4o" do "Review." -> done }'),
    _e("SW3023", "a state that asks a person with an agent's settings",
       "A state with 'ask' is answered by a person: it has no agent, tool call, instruction, model or "
       "retries.",
       'state approve { ask "Refund it?" agent clerk -> done }', 'state approve { ask "Refund it?" -> done }'),
    _e("SW3024", "'after' in a state that does not ask a person",
       "'after DURATION -> s' is where the run goes when a person does not answer in time, so only a state "
       "with 'ask' can have it.",
       'state draft { agent writer do "Write." after 1h -> done -> done }',
       'state approve { ask "Publish?" after 24h -> done -> done }'),
    _e("SW3025", "more than one 'after' in a state",
       "A person has one deadline per question: a state with 'ask' has at most one 'after' transition.",
       'state approve { ask "Publish?" after 1h -> remind after 2h -> done -> done }',
       'state approve { ask "Publish?" after 1h -> remind -> done }'),
    _e("SW3040", "bound from an input with no range",
       "A bound may name an int input ('-> debate max rounds'), and the compiler proves every loop bounded "
       "with the largest value the input's range allows; the run reads the bound from the input, which is "
       "validated against that range when the run starts. So the input needs a range with both ends, the "
       "smaller 0 or more: 'input rounds: int in 1..10'.",
       "input rounds: int = 3\n...\n-> debate max rounds",
       "input rounds: int in 1..10 = 3\n...\n-> debate max rounds"),
    _e("SW3060", "parallel state with fewer than two branches",
       "'parallel [a, b]' starts its branches at once and joins them; with one branch (or none) there is "
       "nothing to run side by side: make that branch's states ordinary states in the path instead.",
       "state reviews { parallel [style] -> publish }",
       "state reviews { parallel [style, facts] -> publish }"),
    _e("SW3061", "branch entry that is not a branch state",
       "The states 'parallel [...]' names are the entry states of its branches, and each is declared "
       "'branch state': a branch state runs only inside its branch, and its edges stay there.",
       "state reviews { parallel [style, facts] ... }\nstate style { ... }",
       "state reviews { parallel [style, facts] ... }\nbranch state style { ... }"),
    _e("SW3062", "branch state in no branch",
       "A 'branch state' runs only as part of a parallel state's branch: as an entry named in "
       "'parallel [...]', or as a state a branch's transitions lead to. This one is neither, so no run "
       "could enter it.",
       "branch state notes { agent a do \"...\" }   # no parallel state leads here",
       "state reviews { parallel [style, notes] ... }\nbranch state notes { agent a do \"...\" }"),
    _e("SW3063", "branch state in two branches",
       "Each branch state belongs to one branch of one parallel state: the branches of a parallel state run "
       "at once, so a state shared by two of them would run twice at the same time, and its output would "
       "belong to neither. Two parallel states may not list the same entry, and a parallel state lists each "
       "entry once.",
       "state a { parallel [x, y] ... }\nstate b { parallel [y, z] ... }",
       "state a { parallel [x, y] ... }\nstate b { parallel [w, z] ... }"),
    _e("SW3064", "transition that leaves its branch",
       "A branch runs from its entry along transitions between the states of the branch, and ends in a "
       "state without transitions: its output is then the branch's. A transition from a branch state to a "
       "state outside the branch would leave the parallel state while its other branches run; the parallel "
       "state's own transitions decide where the run goes after the join.",
       "branch state facts { agent checker do \"...\" -> publish }",
       "branch state facts { agent checker do \"...\" }   # ends the branch\n"
       "state reviews { parallel [style, facts] -> publish }"),
    _e("SW3065", "transition into a branch from outside it",
       "A run enters a branch only through its parallel state, at the branch's entry. A transition from any "
       "other state into a branch state would run the state outside its branch, with no join to wait for it.",
       "state draft { agent w do \"...\" -> style }",
       "state draft { agent w do \"...\" -> reviews }\nstate reviews { parallel [style, facts] ... }"),
    _e("SW3066", "invalid join",
       "A parallel state waits for its branches as 'join all' (the default), 'join first N' (the first N "
       "to finish; the rest are cancelled), 'join first where GUARD' or 'join first N where GUARD' (the "
       "first one, or N, whose output makes GUARD true). 'join' belongs to a parallel state only.",
       "join any 2", "join first 2"),
    _e("SW3067", "join count out of range",
       "'join first N' waits for N branches: N is at least 1 and at most the number of branches.",
       "state reviews { parallel [a, b] join first 3 ... }", "state reviews { parallel [a, b] join first 1 ... }"),
    _e("SW3068", "parallel state with work of its own",
       "A parallel state's work is its branches: it has no agent, instruction, tool call, question, output "
       "type, model, retries or 'for' of its own. Its output is the list of the joined branches' outputs.",
       "state reviews { parallel [a, b] agent critic do \"...\" -> done }",
       "state reviews { parallel [a, b] -> done }"),
    _e("SW3069", "branch state that cannot run in a branch",
       "A branch state runs inside its branch, concurrently with the other branches: it is not the start or "
       "a final state, does not ask a person, and is not itself a parallel state or a map ('for').",
       "final branch state facts { ... }", "branch state facts { ... }   # no transitions: ends the branch"),
    _e("SW3070", "map without 'max'",
       "A state that runs once per element of a list declares the most elements it takes, 'max N', so that "
       "every run is bounded before it starts. A longer list ends the run with a failure of kind 'bound'.",
       "for file in plan.output.files", "for file in plan.output.files max 20"),
    _e("SW3071", "map bound below 1",
       "'max N' and 'concurrency N' of a map are at least 1.",
       "for file in plan.output.files max 0", "for file in plan.output.files max 20 concurrency 4"),
    _e("SW3072", "map in a state that does no work per element",
       "'for' runs the state's work once per element: an agent with its instruction, or a tool call. A "
       "final state, a state that asks a person, or a state with no work has nothing to repeat.",
       "state build { for f in plan.output.files max 9 -> done }",
       "state build { for f in plan.output.files max 9 agent engineer do \"Write {{ f }}\" -> done }"),
    # --- types and guards ---------------------------------------------------------------------
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
    # --- lists, constraints and variant outputs ------------------------------------------------
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
    # --- templates ----------------------------------------------------------------------------
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
    # --- tests --------------------------------------------------------------------------------
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
    # --- warnings -----------------------------------------------------------------------------
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
    # --- importers: problems in a MetaAgent or AutoAgent file given to `statewright import` ------
    _w("SW7100", "used machine that is never run",
       "A 'use' line without braces makes a machine callable, and no state of this machine runs it.",
       'use "teams/research.fsm"   # no state runs research',
       'use "teams/research.fsm"\n...\n    run research(topic = topic)'),
    _w("SW7101", "imported name that is never used",
       "A declaration imported with 'use ... { NAME }' is used by nothing in this machine.",
       'use "common.fsm" { Critique, editor }   # no state runs editor', 'use "common.fsm" { Critique }'),
    _e("SW8001", "input is not valid JSON",
       "The MetaAgent importer reads the FSM as JSON, and this file does not parse. The message gives the "
       "JSON parser's reason at the position where it stopped. A file whose lists and objects nest more "
       "than 100 levels deep is not read at all: the error points at the bracket that opens level 101.",
       '{"agents": [], "states": {"states": [], "transitions": [],}}',
       '{"agents": [], "states": {"states": [], "transitions": []}}'),
    _e("SW8002", "input is not well-formed XML",
       "The AutoAgent importer reads the workflow form as XML, and this file is not well-formed: the message "
       "gives the XML parser's reason at the position where it stopped. Document type declarations "
       "(<!DOCTYPE ...>) are refused, since a workflow form needs none and they can expand without bound.",
       "<workflow><name>review</workflow>", "<workflow><name>review</name></workflow>"),
    _e("SW8003", "input is empty",
       "The file holds nothing but white space, so there is no machine to import.",
       "(nothing but blank lines)", '{"agents": [...], "states": {"states": [...], "transitions": [...]}}'),
    _e("SW8004", "required part missing",
       "A key of the MetaAgent JSON or an element of the AutoAgent XML that the format requires is missing: "
       "for example a state without 'agent_id', a transition without 'to_state', an event without <outputs> "
       "or a GOTO action without the <value> naming its target.",
       '{"state_id": "2", "instruction": "Review the code."}',
       '{"state_id": "2", "agent_id": "reviewer", "instruction": "Review the code."}'),
    _e("SW8005", "value of the wrong kind",
       "A key or element holds the wrong kind of value: a list where an object belongs, a number where "
       "text belongs, 'true' or 'false' written as text, or an action type other than RESULT, ABORT and "
       "GOTO.",
       '"is_final": "yes"', '"is_final": true'),
    _e("SW8006", "unknown reference",
       "An id or name refers to nothing: a state names an agent id no agent has, a transition a state id no "
       "state has, a listener an unknown agent, or an event listens to, jumps to or is run by an event or "
       "agent the file does not declare.",
       '{"from_state": "1", "to_state": "9", "condition": "If the tests pass"}   # there is no state 9',
       '{"from_state": "1", "to_state": "2", "condition": "If the tests pass"}'),
    _e("SW8007", "duplicate id",
       "Two agents, states or events share an id or a name, so references to it are ambiguous.",
       '{"state_id": "1", ...}, {"state_id": "1", ...}', '{"state_id": "1", ...}, {"state_id": "2", ...}'),
    _e("SW8008", "no single start",
       "A machine starts in exactly one place. In MetaAgent JSON exactly one state has \"is_initial\": true; "
       "in an AutoAgent workflow the on_start event takes the system input and every other event follows "
       "from it.",
       '"is_initial": true   # on two states', '"is_initial": true   # on one state'),
    _e("SW8010", "input is not valid YAML",
       "A CrewAI config file (config/agents.yaml, config/tasks.yaml) does not parse as YAML, or holds more "
       "than the importer reads: more than 100,000 values once aliases are followed, or an alias that makes "
       "a value contain itself. The message gives the YAML parser's reason at the position where it stopped.",
       "researcher:\n  role: Senior researcher: finds sources", "researcher:\n  role: >\n    Senior researcher: finds sources"),
    _e("SW8011", "crew source does not parse",
       "The importer reads a crew's Python source (crew.py) with Python's own parser, without running it, "
       "and this file is not valid Python. The message gives Python's reason at the position where it "
       "stopped.",
       "def researcher(self) -> Agent\n    return Agent(config=self.agents_config['researcher'])",
       "def researcher(self) -> Agent:\n    return Agent(config=self.agents_config['researcher'])"),
    _e("SW8012", "context cycle",
       "The tasks' context entries go round: a task reads a task that, through its own context, reads the "
       "first. No order runs each task after the tasks it reads, so CrewAI refuses the crew, and so does the "
       "importer.",
       "write:\n  context: [edit]\nedit:\n  context: [write]", "write:\n  context: [research]\nedit:\n  context: [write]"),
    _e("SW8013", "hierarchical crew without a manager",
       "A crew with process=Process.hierarchical needs a manager: a model for the manager CrewAI makes "
       "(manager_llm) or an agent of its own (manager_agent). Without one CrewAI refuses to start the crew.",
       "Crew(agents=self.agents, tasks=self.tasks, process=Process.hierarchical)",
       'Crew(agents=self.agents, tasks=self.tasks, process=Process.hierarchical, manager_llm="openai/gpt-4o")'),
    # (SW8040-SW8049: errors in an AutoAgent agent form; SW8050-SW8059: lint notes on one)
    _e("SW8040", "hand-offs in a cycle",
       "In an AutoAgent agent form an agent hands the request to another through a transfer_to_<agent> tool, "
       "and the import makes each agent a machine that the machine of the agent handing to it runs. Here the "
       "hand-offs go round: an agent hands the request, directly or through others, to an agent that hands "
       "it back on to the first (or an agent hands it to itself). A machine may not run itself, so the form "
       "cannot be imported; the message names the whole chain. (An agent's answer goes back to whoever "
       "handed it the request without a tool of its own: transfer_back_to_ is not a hand-off.)",
       "<name>Planner</name> ... <tool><name>transfer_to_coder</name></tool>\n"
       "<name>Coder</name> ... <tool><name>transfer_to_planner</name></tool>",
       "<name>Planner</name> ... <tool><name>transfer_to_coder</name></tool>\n"
       "<name>Coder</name> ... <tool><name>transfer_back_to_planner</name></tool>"),
    _e("SW8041", "hand-off to an unknown agent",
       "A transfer_to_<agent> tool in an AutoAgent agent form names no agent of the form. AutoAgent names an "
       "agent's transfer function after the agent's name in lower case with its spaces as underscores ('Web "
       "Researcher' is transfer_to_web_researcher), and the import matches names the same way; the help "
       "suggests the nearest name.",
       "<tool><name>transfer_to_web_reseacher</name></tool>",
       "<tool><name>transfer_to_web_researcher</name></tool>"),
    _e("SW8042", "agent without instructions",
       "Every agent of an AutoAgent agent form has <instructions>: they become the system prompt of the "
       "agent AutoAgent creates (and AutoAgent's form parser refuses an agent without the element). An "
       "agent with none, or with empty instructions, has nothing to work by, so the form cannot be "
       "imported. The <description> says what the agent is for, to whoever hands it the request; it is "
       "not used in the instructions' place.",
       "<agent><name>Writer</name><description>Writes the report.</description> ...</agent>",
       "<agent><name>Writer</name><description>Writes the report.</description>\n"
       "       <instructions>You write clear reports from the notes you are given.</instructions> ...</agent>"),
    _w("SW8050", "hand-back to an agent that does not hand over",
       "An agent of an AutoAgent agent form has a transfer_back_to_<agent> tool naming an agent that never "
       "hands it the request. In the import an agent is a machine whose answer goes back to the machine that "
       "ran it, so the answer goes to whoever handed the request over, whatever the tool says.",
       "<name>Writer</name> ... <tool><name>transfer_back_to_editor</name></tool>   # only 'planner' hands to it",
       "<name>Writer</name> ... <tool><name>transfer_back_to_planner</name></tool>"),
    _w("SW8051", "only agent's output is not the system output",
       "An AutoAgent agent form with one agent answers with that agent's output, so AutoAgent's form parser "
       "requires the agent's <agent_output> key to be the <system_output> key and refuses the form "
       "otherwise. The import keeps both as written: the machine ends in the final state named after the "
       "system output.",
       "<system_output><key>report</key>...   <agent_output><key>draft</key>...",
       "<system_output><key>report</key>...   <agent_output><key>report</key>..."),
    _w("SW8052", "instructions AutoAgent cannot fill in",
       "AutoAgent fills the global variables into an agent's instructions with Python's str.format when "
       "they hold a {field}, and then fails on a lone brace or on a field that is not a plain name ({} or "
       "{0} or {a.b}). The import keeps such instructions as they are written, braces and all, and fills "
       "nothing into them.",
       "<instructions>Write in {style}. Output JSON like {\"a\": 1}.</instructions>",
       "<instructions>Write in {style}. Output JSON like {{\"a\": 1}}.</instructions>"),
    _w("SW8101", "prompt routes to a state that is not an exit",
       "A prompt or instruction tells the agent to print '<STATE_TRANS>: N', but no transition leads from "
       "the agent's states to N. MetaAgent moves only along declared transitions, so this exit never fires; "
       "usually a prompt left behind after the machine changed. The importer removes the routing text "
       "either way: statewright's verifier judges the declared transitions.",
       "If the tests pass, output `<STATE_TRANS>: 7`.   # no transition to state 7",
       "If the tests pass, output `<STATE_TRANS>: 3`.   # a transition to state 3 exists"),
    _w("SW8102", "misspelt routing token",
       "The text looks like MetaAgent's routing token but is not exactly '<STATE_TRANS>' ('<STATUS_TRANS>', "
       "'<state_trans>', '<STATE TRANS>'). MetaAgent matches the exact token, so an agent that follows this "
       "text never leaves its state. The importer removes it with the rest of the routing protocol.",
       "output `<STATUS_TRANS>: 2`", "output `<STATE_TRANS>: 2`"),
    _w("SW8103", "traceback into the initial state",
       "A transition leads back to the initial state. MetaAgent then sends the sender's output to every "
       "agent as if it were the user's task; statewright keeps the task and delivers the output only to the "
       "listeners, so the imported machine behaves differently here. Check that the state really means to "
       "start over.",
       '{"from_state": "3", "to_state": "1", "condition": "If the plan is wrong"}   # 1 is initial',
       '{"from_state": "3", "to_state": "2", "condition": "If the plan is wrong"}'),
    _w("SW8104", "listener never runs after the state",
       "A state lists an agent as a listener, but no state reachable from it uses that agent, so what the "
       "listener is told is never read. Common on final states, after which the run ends.",
       '{"state_id": "3", "is_final": true, "listener": ["writer"]}',
       '{"state_id": "3", "is_final": true, "listener": []}'),
    _w("SW8105", "GOTO into an event that listens to it",
       "A GOTO action jumps to an event that also listens to this one. AutoAgent's own rules forbid it: "
       "the target would run both because of the jump and because of the result.",
       "<event><name>review</name>...<type>GOTO</type><value>publish</value>   # publish listens to review",
       "<event><name>review</name>...<type>GOTO</type><value>draft</value>"),
    _w("SW8106", "event listens to a later event",
       "AutoAgent requires the events of a workflow to be written in an order where every event comes after "
       "the events it listens to. The importer orders the events itself (keeping file order where it can), "
       "but AutoAgent's validator would refuse this file.",
       "<event><name>b</name><listen><event>c</event></listen></event>\n<event><name>c</name>...</event>",
       "<event><name>c</name>...</event>\n<event><name>b</name><listen><event>c</event></listen></event>"),
    _w("SW8107", "unknown tool",
       "MetaAgent knows the tools code_interpreter, search_engine and file_writer. The importer declares any "
       "other tool as a user tool with a stand-in import path that you must replace with your own function.",
       '"tools": ["web_browser"]', '"tools": ["search_engine"]'),
    _w("SW8110", "context names a later task",
       "A task's context names a task that runs after it, so its output is not there yet when the task "
       "runs. CrewAI refuses such a crew; the literal import keeps the read (it renders as nothing), and "
       "--repair drops it.",
       "summary:\n  context: [research]   # research comes after summary", "summary:\n  context: [research]   # research comes first"),
    _w("SW8111", "output model not in the crew's source",
       "output_pydantic or output_json names a class that is not declared in crew.py or a Python file beside "
       "it, so the importer cannot make the output type from it: the task's output is text, and the header "
       "lists it.",
       "output_pydantic=Report   # Report is imported from another package",
       "class Report(BaseModel): ...   # declared in crew.py or beside it"),
    _w("SW8112", "tool without a statewright counterpart",
       "A CrewAI tool that no standard tool matches (FileReadTool, FileWriterTool, DirectoryReadTool and "
       "CodeInterpreterTool do): the imported machine declares it as a user tool with a stand-in import path, "
       "which tells the model the tool is not configured. Search tools get a stand-in that names the query. "
       "Point the import path at your own function.",
       "tools=[ScrapeWebsiteTool()]", 'tool scrape_website = "mypkg.tools:scrape_website"   # in the .fsm'),
    _w("SW8113", "async task reads a task that runs beside it",
       "Two async tasks next to each other run at the same time, and one of them names the other in its "
       "context, whose output is not there yet. The literal import keeps the read as a read of another branch "
       "(check reports it); --repair drops it.",
       "facts:\n  async_execution: true\n  context: [quotes]   # quotes is async too",
       "facts:\n  async_execution: true\n  context: [outline]"),
    _w("SW8114", "value computed when the crew runs",
       "A keyword of an Agent, Task or Crew in crew.py is not a literal the importer can read without running "
       "the code (an f-string, a function call, a variable from elsewhere). The imported machine leaves it "
       "out.",
       "Task(config=..., description=build_description())", 'Task(config=...)   # description in tasks.yaml'),
    _w("SW8115", "agent that does no task",
       "A sequential crew runs only the agents its tasks name, and no task names this one; it is imported "
       "unused.",
       "reviewer:\n  role: Reviewer   # no task has 'agent: reviewer'", "review_task:\n  agent: reviewer"),
    _w("SW8116", "on_start does work of its own",
       "An AutoAgent on_start event with its own agent and task (older workflow forms) runs that task before "
       "the events that listen to it. The import keeps it as the start state, so what it produces is read "
       "from its output rather than asked for as an input.",
       "<event><name>on_start</name><task>Search the web for {query}</task><agent>...</agent>...",
       "<event><name>on_start</name><inputs>...</inputs><outputs>...</outputs></event>"),
    _w("SW8117", "event reads a key written beside it",
       "An event reads an input key that only events running at the same time as it (or after it) write: in "
       "the original it starts before that key has a value. The literal import leaves the key unproduced "
       "(check reports SW2008); --repair reads the writer's output when the writer runs first in the import, "
       "and asks for the key as an input otherwise.",
       "on_outline listens to on_start and reads search_result, which on_search (also after on_start) writes",
       "on_outline listens to on_search"),
    _w("SW7008", "ambiguous verifier condition",
       "Consecutive natural-language conditions are judged by one verifier call, which picks one of them or "
       "answers \"none\". Two conditions of one call that differ only in case, spacing or punctuation (or "
       "not at all), a condition that reads \"none\", and a condition without words leave a reader (and "
       "a test's 'verdict') unable to tell which transition is meant.",
       'when "The draft is good." -> publish\nwhen "the draft is good" -> polish',
       'when "The draft is good." -> publish\nwhen "the draft needs polish" -> polish'),
    _w("SW7009", "listener that never runs later",
       "'tell [a]' appends the state's output to agent a's memory, but no state that a run can enter after "
       "this one is run by a, so nothing ever reads it.",
       "state review { agent critic ... tell [writer] -> publish }\nfinal state publish",
       "state review { agent critic ... tell [writer] -> revise }\nstate revise { agent writer ... }"),
    _w("SW7010", "state tells its own agent",
       "The agent that does a step keeps its own exchange (the instruction and its reply) in its memory; "
       "telling it the state's output as well puts the output there twice.",
       "state draft { agent writer ... tell [writer, critic] }",
       "state draft { agent writer ... tell [critic] }"),
    _w("SW7060", "map concurrency above its max",
       "'concurrency N' runs at most N elements at a time; a map never has more than 'max' elements, so a "
       "concurrency above it says nothing more.",
       "for f in plan.output.files max 4 concurrency 10", "for f in plan.output.files max 4 concurrency 4"),
    _w("SW7040", "literal credential in the spec",
       "Text in the spec looks like a key or token written in (an 'sk-...' key, a bearer token, an AWS, "
       "Google, GitHub or Slack key), or a header or query parameter whose name says it holds a credential "
       "has a value without a secret in it. A spec is committed and reviewed, its text is written into "
       "generated runners, and prompts and instructions are sent to model providers: a key there leaks. Keep "
       "the key in an environment variable, name it in the tool's 'secrets' and put it in with ${NAME}.",
       'tool std.http_get {\n    allow ["api.search.example"]\n    headers { Authorization "Bearer '
       'sk-live-0123456789abcdefghij" }\n}',
       'tool std.http_get {\n    allow ["api.search.example"]\n    secrets [SEARCH_KEY]\n    headers { '
       'Authorization "Bearer ${SEARCH_KEY}" }\n}'),
    _w("SW7041", "unused secret",
       "std.http_get declares a secret that none of its headers or query parameters puts in, so the run "
       "requires an environment variable that nothing reads.",
       'secrets [SEARCH_KEY, OLD_KEY]\nheaders { Authorization "Bearer ${SEARCH_KEY}" }',
       'secrets [SEARCH_KEY]\nheaders { Authorization "Bearer ${SEARCH_KEY}" }'),
    _w("SW7042", "secret reference that is never replaced",
       "Text outside std.http_get's 'headers' and 'query' holds ${NAME} for a secret the machine declares. "
       "Secrets are put in nowhere else — not into URLs, commands, prompts or instructions — so the text is "
       "used as written (and code in the jail sees no environment variable of that name either).",
       'call std.http_get(url = "https://api.search.example/?key=${SEARCH_KEY}&q=" + topic)',
       'tool std.http_get {\n    ...\n    secrets [SEARCH_KEY]\n    query { key "${SEARCH_KEY}" }\n}\n'
       '...\ncall std.http_get(url = "https://api.search.example/?q=" + topic)'),
    _w("SW7043", "expectation on a visit the expected path does not make",
       "'expect output STATE visit N' (or 'expect instruction') checks STATE's Nth visit, but the test's "
       "own 'expect path' visits STATE fewer than N times, so the test cannot pass.",
       "expect path [draft, review, publish]\nexpect output review visit 2 { score 88 }",
       "expect path [draft, review, revise, review, publish]\nexpect output review visit 2 { score 88 }"),
    # --- run variables and approval between tool calls ------------------------------------------
    _e("SW2080", "unknown run variable",
       "An update ('set', 'append', 'extend', 'merge') names a run variable no 'var' declares. Declare it "
       "in the machine's block with its type and the value every run starts with.",
       "append past_step <- output", "var past_steps: list[Step] = []\n...\nappend past_steps <- output"),
    _e("SW2081", "run variable named like something else",
       "Guards, templates and tool arguments read run variables, inputs and states by name, so a variable "
       "cannot take the name of an input, a state, 'output', or one of Jinja's own names (self, loop, "
       "range, ...).",
       "input notes: str\nvar notes: list[str] = []", "input topic: str\nvar notes: list[str] = []"),
    _e("SW2082", "approval of a tool the agent does not have",
       "'ask before [...]' names the tools whose calls wait for a person; each must be one of the tools of "
       "the state's agent ('tools [...]'), or no call of it can ever wait.",
       "agent dev { tools [std.python] }\nstate run { agent dev  ask before [std.shell] ... }",
       "agent dev { tools [std.python] }\nstate run { agent dev  ask before [std.python] ... }"),
    _e("SW3080", "tool rounds out of range",
       "'tool_rounds N' caps the rounds of tool calls an agent makes in one step: N is from 1 to 100. An "
       "agent that still asks for tools after N rounds ends the run with a failure of kind 'tool'.",
       "tool_rounds 0", "tool_rounds 5"),
    _e("SW3081", "tool setting in a state whose agent calls no tools",
       "'ask before [...]' and 'tool_rounds N' are about the tool calls an agent makes while it works on "
       "a step, so they belong in a state whose agent has tools. An action state's call is the step "
       "itself: put a state that asks a person before it.",
       "state run { call std.python(code = c) ask before [std.python] -> done }",
       "state confirm { ask \"Run {{ c }}?\" output bool when output -> run otherwise -> done }"),
    _e("SW3082", "update in a state without an output",
       "An update computes a run variable's new value after the state's step, from its output. A final "
       "state that does no work has no step and no output: update the variable in the state before it, "
       "or read it in the final state's result.",
       "final state done { set finished <- true }",
       "state wrap_up { ... set finished <- true -> done }"),
    _e("SW4080", "initial value that does not fit its variable",
       "'var NAME: TYPE = VALUE': the value every run starts with must be a value of TYPE, so that a "
       "variable always holds one (it is never read before it has a value).",
       "var past_steps: list[Step] = none", "var past_steps: list[Step] = []"),
    _e("SW4081", "update that does not fit its variable's type",
       "'append' and 'extend' add to a list, so the variable must be a list; 'merge' writes fields into a "
       "value of a declared type, so the variable must be one. 'set' replaces any variable's value.",
       "var best: int = 0\n...\nappend best <- output.score", "set best <- max(best, output.score)"),
    _e("SW4082", "update value of the wrong type",
       "The value an update gives must fit the variable: 'set' a value of the variable's type, 'append' "
       "an item of its list, 'extend' a list of such items, 'merge' a value whose fields the variable's "
       "type has, each of the field's type.",
       "var notes: list[str] = []\n...\nappend notes <- output.score",
       "append notes <- output.summary"),
    _e("SW6080", "expectation of an unknown run variable",
       "'expect var NAME VALUE' checks run variable NAME's value when the run ends; NAME must be declared "
       "with 'var'.",
       'expect var past_step ["a"]', 'expect var past_steps ["a"]'),
    _e("SW6081", "expected variable value that does not fit its type",
       "'expect var NAME VALUE' compares the variable's value with VALUE as typed values, so VALUE must "
       "be a value of the variable's type (an object names the fields it checks).",
       "var best: int = 0\n...\nexpect var best \"90\"", "expect var best 90"),
    _e("SW6082", "approval for a state whose calls wait for nobody",
       "'approve STATE', 'reject STATE' and 'edit STATE' answer a tool call of STATE's agent that waits for "
       "a person, which only the calls of the tools in STATE's 'ask before [...]' do.",
       'state run { agent dev ... }\ntest "t" { ... approve run }',
       'state run { agent dev  ask before [std.python] ... }\ntest "t" { ... approve run }'),
    _e("SW6083", "approval of a tool the state does not ask before",
       "A test step that names a tool ('approve run std.shell') says which call it answers: the tool must "
       "be one of those in the state's 'ask before [...]'.",
       "ask before [std.python]\n...\napprove run std.shell", "approve run std.python"),
    _e("SW6084", "edited arguments that do not fit the tool",
       "'edit STATE { ... }' runs the call with these arguments instead: each must be a parameter of the "
       "tool, of its type, and the tool's required parameters must all be given. With several tools in "
       "'ask before', name the tool the edit is for ('edit run std.python { code \"...\" }').",
       'edit run { cmd "ls" }   # std.shell takes command', 'edit run { command "ls" }'),
    _w("SW7120", "run variable never read",
       "The variable is declared, and perhaps updated, but no guard, template, tool argument, map list or "
       "test reads it: what it holds is never used.",
       "var notes: list[str] = []   # and nothing reads notes", "remove it, or read it where it matters"),
    _w("SW7121", "run variable never updated",
       "No state updates the variable, so it always holds its initial value: it is a constant. Update it "
       "from some state's output, or write the value where it is read.",
       "var limit: int = 3   # and no 'set limit <- ...'", "input limit: int in 1..10 = 3"),
    _w("SW7122", "branches that set the same variable",
       "Branches of one parallel state run at once, each over the variables as they were when the branches "
       "started; their updates are applied at the join in the order the branches are written. When two "
       "branches 'set' the same variable, the later branch's value wins and the earlier one's is lost. "
       "Append to a list, merge fields, or set different variables.",
       "branch state a { ... set verdict <- output }\nbranch state b { ... set verdict <- output }",
       "branch state a { ... append verdicts <- output }\nbranch state b { ... append verdicts <- output }"),
    # --- internal -----------------------------------------------------------------------------
    _e("SW9001", "internal compiler error",
       "The compiler hit a bug. Please report it with the input file.", "", ""),
]

CODES: dict[str, CodeInfo] = {info.code: info for info in _ALL}
assert len(CODES) == len(_ALL), "duplicate diagnostic code in the registry"
