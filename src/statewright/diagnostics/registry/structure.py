"""Machine structure (SW3xxx): states, transitions, bounds, fan-out and calls."""

from __future__ import annotations

from .entry import _e

CODES = [
    # --- structure --------------------------------------------------------------------------------
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
]
