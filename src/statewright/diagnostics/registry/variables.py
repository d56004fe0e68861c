"""Run variables and approval between tool calls (in the families of their kind)."""

from __future__ import annotations

from .entry import _e, _w

CODES = [
    # --- run variables and approval between tool calls --------------------------------------------
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
]
