"""The constraint in Lark syntax, for decoders that take Lark grammars (LLGuidance, OpenAI's grammar tools).

It keeps the rules of statewright.lark as they are, written in the subset of Lark those decoders read:
terminals are plain regexes (lookarounds compiled away, no priorities, no imports), `?` and aliases are
dropped (a decoder builds no tree), and a name where the parser would read a keyword stands for a
terminal that cannot be that keyword. Whitespace and comments stay `%ignore`d, as in statewright.lark.
"""

from __future__ import annotations

from .model import ConstraintGrammar, name_variant
from .nodes import MAX_CODE_POINT, Chars, Choice, Name, Node, Ref, Repeat, Seq, Term, Text, complement

HEADER = """\
// The statewright grammar as a decoding constraint, in Lark syntax.
// Generated from statewright.lark by `statewright grammar --format lark`: do not edit.
"""


def render_lark(grammar: ConstraintGrammar, draft: bool = False) -> str:
    """The Lark constraint. With `draft`, comments are not allowed (whitespace stays ignored: how often a
    decoder lets it repeat is the decoder's setting)."""
    lines = [HEADER + ("// The draft layout: no comments.\n" if draft else "")]
    for name, body in grammar.rules.items():
        lines.append(f"{name}: {_rule(body, top=True)}")
    lines.append("")
    ignored = [name for name in grammar.ignore if not (draft and _open_ended(grammar.terminals[name]))]
    for name, body in grammar.terminals.items():
        if name in grammar.ignore and name not in ignored:
            continue
        lines.append(f"{name}: /{regex_text(body)}/")
    for excluded in grammar.name_exclusions():
        lines.append(f"{name_variant(grammar.name_terminal, excluded)}: /{regex_text(grammar.name_node(excluded))}/")
    lines.append("")
    lines.extend(f"%ignore {name}" for name in ignored)
    return "\n".join(lines) + "\n"


def _open_ended(node: Node) -> bool:
    """An ignored terminal that runs to a terminator, as a comment runs to its newline."""
    return isinstance(node, Seq) and bool(node.items) and isinstance(node.items[-1], Repeat) and len(node.items) > 1


def _rule(node: Node, top: bool = False) -> str:
    if isinstance(node, Choice):
        text = "\n    | ".join(_rule(o) for o in node.options) if top else " | ".join(_rule(o) for o in node.options)
        return text if top else f"({text})"
    if isinstance(node, Seq):
        return " ".join(_rule(i) for i in node.items)
    if isinstance(node, Repeat):
        return _rule_atom(node.item) + _repeat_suffix(node)
    if isinstance(node, Text):
        return _string(node.value)
    if isinstance(node, Ref):
        return node.rule
    if isinstance(node, Term):
        return node.name
    if isinstance(node, Name):
        return name_variant("NAME", node.excluded) if node.excluded else "NAME"
    raise TypeError(node)


def _rule_atom(node: Node) -> str:
    text = _rule(node)
    return f"({text})" if isinstance(node, Seq) and len(node.items) > 1 else text


def _repeat_suffix(node: Repeat) -> str:
    bounds = (node.min, node.max)
    if bounds == (0, None):
        return "*"
    if bounds == (1, None):
        return "+"
    if bounds == (0, 1):
        return "?"
    return f"~{node.min}..{node.max}" if node.max is not None else f"~{node.min}..{node.min + 1000}"


def _string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


# ---- regexes ----------------------------------------------------------------------------------------

_REGEX_SPECIAL = set(".^$*+?()[]{}|\\/")
_CLASS_SPECIAL = set("]\\^-[/")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f"}


def regex_text(node: Node) -> str:
    """A regex in the dialect Python's `re` and Rust's `regex` share (no lookarounds, no backreferences)."""
    if isinstance(node, Chars):
        return _class_text(node)
    if isinstance(node, Text):
        return "".join(_regex_char(ch) for ch in node.value)
    if isinstance(node, Seq):
        return "".join(_regex_group(i) if isinstance(i, Choice) else regex_text(i) for i in node.items)
    if isinstance(node, Choice):
        return "|".join(regex_text(o) for o in node.options)
    if isinstance(node, Repeat):
        inner = node.item
        atom = regex_text(inner)
        single = isinstance(inner, Chars) or (isinstance(inner, Text) and len(inner.value) == 1)
        atom = atom if single else f"(?:{atom})"
        if (node.min, node.max) in ((0, None), (1, None), (0, 1)):
            return atom + {(0, None): "*", (1, None): "+", (0, 1): "?"}[(node.min, node.max)]
        return atom + (f"{{{node.min},{node.max}}}" if node.max is not None else f"{{{node.min},}}")
    raise TypeError(node)


def _regex_group(node: Node) -> str:
    return f"(?:{regex_text(node)})"


def _regex_char(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    if ch in _REGEX_SPECIAL:
        return "\\" + ch
    return ch if ch.isprintable() else _code_escape(ord(ch))


def _class_text(charset: Chars) -> str:
    negated = bool(charset.ranges) and charset.ranges[-1][1] == MAX_CODE_POINT
    shown = complement(charset) if negated else charset
    if not negated and len(shown.ranges) == 1 and shown.ranges[0][0] == shown.ranges[0][1]:
        return _regex_char(chr(shown.ranges[0][0]))
    parts = []
    for low, high in shown.ranges:
        if low == high:
            parts.append(_class_char(low))
        elif high == low + 1:
            parts.append(_class_char(low) + _class_char(high))
        else:
            parts.append(f"{_class_char(low)}-{_class_char(high)}")
    return ("[^" if negated else "[") + "".join(parts) + "]"


def _class_char(point: int) -> str:
    ch = chr(point)
    if ch in _NAMED:
        return _NAMED[ch]
    if ch in _CLASS_SPECIAL:
        return "\\" + ch
    return ch if ch.isprintable() and ch != " " or ch == " " else _code_escape(point)


def _code_escape(point: int) -> str:
    if point < 0x100:
        return f"\\x{point:02x}"
    if point < 0x10000:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"
