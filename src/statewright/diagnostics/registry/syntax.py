"""Syntax (SW1xxx): what the parser reads."""

from __future__ import annotations

from .entry import _e

CODES = [
    # --- syntax -----------------------------------------------------------------------------------
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
    _e("SW1007", "carriage return without a line feed",
       "A line of a statewright file ends with a line feed (LF), or a carriage return and a line feed (CRLF). "
       "A carriage return alone (the line ending of old Mac files, or a stray '\\r' pasted into the text) "
       "ends a line for editors, for code review and for the language server's client, but would not for the "
       "compiler: a comment before it would take in the code after it, and every position after it would "
       "point elsewhere. So it is an error, reported at the first one (with how many more there are); save "
       "the file with LF or CRLF line endings, or write '\\r' as an escape inside a double-quoted string.",
       "# the model's instructions\\r    agent writer { prompt \"You write.\" }   # one line to statewright",
       "# the model's instructions\n    agent writer { prompt \"You write.\" }"),
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
]
