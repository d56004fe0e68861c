"""What the text just before the cursor is, for completion: a comment, a template, which block, which words.

A file being typed rarely parses, so this reads the text itself: strings, comments and braces up to the
cursor (one regular-expression pass), the blocks left open there and the headers that opened them, and,
inside a string, the `{{ ... }}` or `{% ... %}` the cursor is in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# strings (triple-quoted first), comments and braces; an unclosed string or comment runs to the cursor
_TOKENS = re.compile(r'"""[^"]*(?:"(?!"")[^"]*)*(?:"""|\Z)|"[^"\\\n]*(?:\\.[^"\\\n]*)*(?:"|$)|#[^\n]*|[{}]',
                     re.MULTILINE)
_HEADERS = (
    ("use", re.compile(r'\buse\s+"([^"\n]*)"(?:\s+as\s+\w+)?\s*$')),  # `use "PATH" {`: the names it imports
    ("machine", re.compile(r"\bmachine\s+(\w+)\s*$")),
    ("state", re.compile(r"\b((?:(?:start|final|branch)\s+)*)state\s+(\w+)\s*$")),
    ("agent", re.compile(r"\bagent\s+(\w+)\s*$")),
    ("type", re.compile(r"\btype\s+(\w+)\s*$")),
    ("test", re.compile(r'\btest\s+"[^"\n]*"\s*$')),
    ("limits", re.compile(r"\blimits\s*$")),
    ("tool", re.compile(r"\btool\s+[\w.]+(?:\s*=\s*\"[^\"\n]*\")?\s*$")),
)
_OPENERS = re.compile(r"\{\{|\{%|\}\}|%\}")


@dataclass
class Block:
    """A block left open before the cursor: its kind ("state", "object", ...), the name in its header, the
    state modifiers, and the offset of its `{`."""

    kind: str
    name: str = ""
    final: bool = False
    branch: bool = False
    start: int = 0


@dataclass
class CursorContext:
    """Where the cursor is. `line` is the text from the start of its line (or of the template
    expression) to the cursor; `blocks` the open blocks, outermost first."""

    blocks: list[Block] = field(default_factory=list)
    line: str = ""
    in_comment: bool = False
    in_string: bool = False
    template: str | None = None  # the text of the `{{ ...` or `{% ...` before the cursor, when in one

    @property
    def block(self) -> Block | None:
        return self.blocks[-1] if self.blocks else None

    @property
    def state(self) -> Block | None:
        """The state the cursor is in, if any."""
        return next((b for b in reversed(self.blocks) if b.kind == "state"), None)


def cursor_context(text: str, offset: int) -> CursorContext:
    """The context of a cursor at character `offset` of `text`."""
    context = CursorContext()
    last_end = 0  # the end of the last brace: a block's header is the text after it
    for m in _TOKENS.finditer(text, 0, offset):
        token = m.group()
        if token == "{":
            context.blocks.append(_block(text[last_end : m.start()], m.start()))
            last_end = m.end()
        elif token == "}":
            if context.blocks:
                context.blocks.pop()
            last_end = m.end()
        elif m.end() >= offset and not _closed(token):
            if token.startswith("#"):
                context.in_comment = True
            else:
                context.in_string = True
                context.template = _open_template(token[3:] if token.startswith('"""') else token[1:])
    line_start = text.rfind("\n", 0, offset) + 1
    context.line = text[line_start:offset]
    return context


def _closed(token: str) -> bool:
    if token.startswith('"""'):
        return len(token) >= 6 and token.endswith('"""')
    if token.startswith('"'):
        return len(token) >= 2 and token.endswith('"') and not token.endswith('\\"')
    return not token.startswith("#")


def _open_template(body: str) -> str | None:
    """The template expression the end of `body` is inside (`{{ review.output.`), or None."""
    start = None
    for m in _OPENERS.finditer(body):
        start = m.end() if m.group() in ("{{", "{%") else None
    return body[start:] if start is not None else None


def _block(before: str, start: int) -> Block:
    header = before.rsplit("\n", 3)
    text = " ".join(header)
    for kind, pattern in _HEADERS:
        m = pattern.search(text)
        if m is not None:
            if kind == "state":
                modifiers = m.group(1).split()
                return Block("state", m.group(2), final="final" in modifiers, branch="branch" in modifiers,
                             start=start)
            return Block(kind, m.group(1) if m.groups() else "", start=start)
    return Block("object", start=start)


_STATEMENT = re.compile(r"^[ \t]*(ask[ \t]+before\b|[A-Za-z_]\w*|->)", re.MULTILINE)


def statement_words(text: str, open_brace: int, cursor: int) -> set[str]:
    """The first words of the statements directly inside the block opened at `open_brace` (before and after
    the cursor, up to the block's `}` or the end of the text), except on the cursor's line: what the block
    already holds. Strings, comments and nested blocks are blanked out, line breaks kept, so a prompt's
    lines are not statements."""
    out: list[str] = []
    depth, pos = 0, open_brace + 1
    for m in _TOKENS.finditer(text, pos):
        between = text[pos : m.start()]
        out.append(between if depth == 0 else _blank(between))
        token = m.group()
        if token == "}" and depth == 0:
            break
        depth += {"{": 1, "}": -1}.get(token, 0)
        out.append(_blank(token))
        pos = m.end()
    else:
        out.append(text[pos:] if depth == 0 else _blank(text[pos:]))
    body = "".join(out)
    line_start = text.rfind("\n", 0, cursor) + 1
    line_end = text.find("\n", cursor)
    own = (line_start - open_brace - 1, (line_end if line_end >= 0 else len(text)) - open_brace - 1)
    return {" ".join(m.group(1).split()) for m in _STATEMENT.finditer(body) if not own[0] <= m.start(1) <= own[1]}


def _blank(text: str) -> str:
    """`text` with every character but a line break made a space: skipped, with offsets and lines kept."""
    return re.sub(r"[^\n]", " ", text)


# ---- the words before the cursor ---------------------------------------------------------------------

_CHAIN = re.compile(r"([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\.\s*(\w*)$")
_WORD = re.compile(r"(\w*)$")


def dotted_chain(text: str) -> tuple[list[str], str] | None:
    """`review.output.sc` -> (["review", "output"], "sc"): the names before the last dot and the part of
    the name being typed; None when the text does not end in a dotted name."""
    m = _CHAIN.search(text)
    if m is None:
        return None
    return [part.strip() for part in m.group(1).split(".")], m.group(2)


def word_before(text: str) -> str:
    m = _WORD.search(text)
    return m.group(1) if m else ""
