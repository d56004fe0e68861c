"""Graph rendering: a checked machine drawn as a Mermaid flowchart or a Graphviz digraph.

Both formats draw the same picture, built once as a view model of ready-made label lines; each renderer
only escapes and arranges them. Output is deterministic: states and edges come out in source order.

Edge styles (the legend in docs/graphs.md):
    guard `when EXPR`          thick, labelled with the expression
    condition `when "text"`    dashed, labelled with the (shortened) condition the verifier judges
    unconditional `-> s`       solid, no label
    `otherwise -> s`           dotted, "otherwise"
    `otherwise stay`           dotted self-loop, "stay"
    traceback                  coloured: the edge goes back to a non-final state at or before its
                               source in breadth-first order from the start state
A bound adds a "max N" line to the edge label; a state's `visits N` adds a line to its node label.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .. import ir
from .formatter import expr_to_source

CONDITION_LABEL_CHARS = 40
TRACEBACK_COLOUR = "#c2410c"

# ---- the view model: what both formats draw -------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    name: str
    lines: tuple[str, ...]
    final: bool


@dataclass(frozen=True)
class _Edge:
    source: str
    target: str
    style: str  # "thick" | "solid" | "dashed" | "dotted"
    lines: tuple[str, ...]
    traceback: bool


@dataclass(frozen=True)
class _View:
    name: str
    start: str
    nodes: tuple[_Node, ...]
    edges: tuple[_Edge, ...]


def _view(machine: ir.Machine) -> _View:
    order = _breadth_first_order(machine)
    finals = {s.name for s in machine.states if s.kind == "final"}
    nodes = []
    edges = []
    for state in machine.states:
        lines = [state.name]
        if state.visits is not None:
            lines.append(f"visits {state.visits}")
        nodes.append(_Node(state.name, tuple(lines), state.kind == "final"))
        for t in state.transitions:
            edges.append(_edge(state.name, t, order, finals))
    return _View(machine.name, machine.start, tuple(nodes), tuple(edges))


def _edge(source: str, t: ir.Transition, order: dict[str, int], finals: set[str]) -> _Edge:
    target = source if t.kind == "stay" else t.target
    if t.kind == "guard" and t.guard is not None:
        style, label = "thick", expr_to_source(t.guard)
    elif t.kind == "condition":
        style, label = "dashed", shorten(t.condition or "", CONDITION_LABEL_CHARS)
    elif t.kind == "otherwise":
        style, label = "dotted", "otherwise"
    elif t.kind == "stay":
        style, label = "dotted", "stay"
    else:
        style, label = "solid", ""
    lines = [label] if label else []
    if t.max is not None:
        lines.append(f"max {t.max}")
    # a traceback sends the run back to re-do work: never `stay`, never into a final state
    back = (
        t.kind != "stay" and target not in finals
        and target in order and source in order and order[target] <= order[source]
    )
    return _Edge(source, target, style, tuple(lines), back)


def _breadth_first_order(machine: ir.Machine) -> dict[str, int]:
    """Each reachable state's position in a breadth-first walk from the start, transitions taken in
    source order. Edges of states the walk never reaches are not tracebacks: there is no run to go back in."""
    successors = {
        s.name: [s.name if t.kind == "stay" else t.target for t in s.transitions] for s in machine.states
    }
    order: dict[str, int] = {}
    queue: deque[str] = deque()
    if machine.start in successors:
        order[machine.start] = 0
        queue.append(machine.start)
    while queue:
        for target in successors.get(queue.popleft(), ()):
            if target not in order and target in successors:
                order[target] = len(order)
                queue.append(target)
    return order


def shorten(text: str, limit: int) -> str:
    """`text` on one line, cut to at most `limit` characters with an ellipsis when it is longer."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


def _printable(text: str) -> str:
    """One line of label text: whitespace runs collapsed, invisible characters (control, bidi
    overrides, zero-width) made visible as U+FFFD so a label cannot hide or reorder text."""
    flat = " ".join(text.split())
    return "".join(c if c.isprintable() else "\ufffd" for c in flat)


# ---- Mermaid -------------------------------------------------------------------------------------

_MERMAID_START = "sw_start"  # state ids all begin "s_", so this cannot collide with one
_MERMAID_PLAIN = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:_-+*/=!?'()[]{}@^~\\"
)
_MERMAID_STROKES = {"dashed": "stroke-dasharray:6 4", "dotted": "stroke-dasharray:2 3"}


def mermaid_text(text: str) -> str:
    """Label text for inside a double-quoted Mermaid string.

    Mermaid decodes `#name;` and `#NNN;` entities, reads `<`, `>` and `&` as HTML and `$$` as maths;
    so every ASCII character outside a plain set is written as a numeric entity. Printable
    non-ASCII text (accents, CJK, emoji) is kept as it is.
    """
    out = []
    for c in _printable(text):
        if c in _MERMAID_PLAIN or ord(c) > 0x7F:
            out.append(c)
        else:
            out.append(f"#{ord(c)};")
    return "".join(out)


def _mermaid_label(lines: tuple[str, ...]) -> str:
    return '"' + "<br>".join(mermaid_text(line) for line in lines) + '"'


def _mermaid_id(name: str) -> str:
    # a prefix keeps ids clear of Mermaid keywords ("end") and of edge heads ("o"/"x" after a link)
    return f"s_{name}"


def _render_mermaid(view: _View) -> str:
    out = ["flowchart TD"]
    out.append(f'    {_MERMAID_START}(( ))')
    for node in view.nodes:
        label = _mermaid_label(node.lines)
        shape = f"((({label})))" if node.final else f"({label})"
        out.append(f"    {_mermaid_id(node.name)}{shape}")
    out.append(f"    {_MERMAID_START} --> {_mermaid_id(view.start)}")
    link_styles = []
    for number, edge in enumerate(view.edges, start=1):  # link 0 is the start marker's
        arrow = {"solid": "-->", "thick": "==>"}.get(edge.style, "-.->")
        label = f"|{_mermaid_label(edge.lines)}|" if edge.lines else ""
        out.append(f"    {_mermaid_id(edge.source)} {arrow}{label} {_mermaid_id(edge.target)}")
        style = [_MERMAID_STROKES[edge.style]] if edge.style in _MERMAID_STROKES else []
        if edge.traceback:
            style += [f"stroke:{TRACEBACK_COLOUR}", f"color:{TRACEBACK_COLOUR}"]
        if style:
            link_styles.append(f"    linkStyle {number} {','.join(style)}")
    out.extend(link_styles)
    out.append(f"    style {_MERMAID_START} fill:#333,stroke:#333")
    return "\n".join(out) + "\n"


# ---- Graphviz dot --------------------------------------------------------------------------------

_DOT_START = "(start)"  # parentheses cannot occur in a state name, so this id is free
_DOT_STYLES = {"thick": "bold"}


def dot_text(text: str) -> str:
    """Label text for inside a double-quoted dot string.

    Backslashes are doubled so that dot's own escapes (`\\N`, `\\G`, `\\l`) never fire on user text, and
    `&` is written `&amp;` because Graphviz decodes HTML entities even in plain labels.
    """
    return _printable(text).replace("&", "&amp;").replace("\\", "\\\\").replace('"', '\\"')


def _dot_quote(lines: tuple[str, ...] | str) -> str:
    if isinstance(lines, str):
        lines = (lines,)
    return '"' + "\\n".join(dot_text(line) for line in lines) + '"'


def _render_dot(view: _View) -> str:
    out = [f"digraph {_dot_quote(view.name)} {{"]
    out.append('    node [shape=box, style=rounded, fontname="Helvetica"];')
    out.append('    edge [fontname="Helvetica", fontsize=10];')
    out.append(f'    {_dot_quote(_DOT_START)} [shape=point, width=0.15, label=""];')
    for node in view.nodes:
        attrs = [f"label={_dot_quote(node.lines)}"]
        if node.final:
            attrs.append("shape=doublecircle")
        out.append(f"    {_dot_quote(node.name)} [{', '.join(attrs)}];")
    out.append(f"    {_dot_quote(_DOT_START)} -> {_dot_quote(view.start)};")
    for edge in view.edges:
        attrs = []
        if edge.lines:
            attrs.append(f"label={_dot_quote(edge.lines)}")
        if edge.style != "solid":
            attrs.append(f"style={_DOT_STYLES.get(edge.style, edge.style)}")
        if edge.traceback:
            attrs.append(f'color="{TRACEBACK_COLOUR}", fontcolor="{TRACEBACK_COLOUR}"')
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f"    {_dot_quote(edge.source)} -> {_dot_quote(edge.target)}{suffix};")
    out.append("}")
    return "\n".join(out) + "\n"


# ---- entry ---------------------------------------------------------------------------------------

FORMATS = ("mermaid", "dot")


def render_graph(machine: ir.Machine, fmt: str = "mermaid") -> str:
    """The machine as Mermaid (`flowchart`) or Graphviz (`digraph`) source text."""
    view = _view(machine)
    if fmt == "mermaid":
        return _render_mermaid(view)
    if fmt == "dot":
        return _render_dot(view)
    raise ValueError(f"unknown graph format {fmt!r}: expected one of {', '.join(FORMATS)}")
