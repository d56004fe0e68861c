"""Importers (SW8xxx): problems in a file given to `statewright import`, and lint notes on it."""

from __future__ import annotations

from .entry import _e, _w

CODES = [
    # --- importers: problems in a MetaAgent or AutoAgent file given to `statewright import` -------
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
]
