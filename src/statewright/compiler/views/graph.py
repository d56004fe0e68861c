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

A parallel state is drawn as a hexagon with an edge to each branch's entry (labelled "branch"); the
states of its branches sit in a box named for it, each branch's last states lead (dotted, "done") to a
join node that names the join rule, and the parallel state's own transitions leave from the join node. A
state that maps over a list is drawn as a subroutine box (dot: a double border) saying what it maps over.
A state that runs another machine says which ("runs research"); the machine it runs is drawn by its own
file's graph.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .. import ir
from .source_text import expr_to_source

CONDITION_LABEL_CHARS = 40
TRACEBACK_COLOUR = "#c2410c"

# ---- the view model: what both formats draw -------------------------------------------------------


JOIN = "join:"  # the key of a parallel state's join node: "join:NAME" (a colon is in no state name)


@dataclass(frozen=True)
class _Node:
    name: str  # a state's name, or JOIN + the parallel state's name
    lines: tuple[str, ...]
    final: bool
    shape: str = "state"  # "state" | "parallel" | "join" | "map"
    group: str | None = None  # the parallel state whose branches this state (or join) belongs to


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


def _join_lines(p: ir.Parallel) -> tuple[str, ...]:
    join = p.join
    if join.rule == "all":
        return ("join all",)
    text = f"join first {join.count or 1}"
    return (text, f"where {expr_to_source(join.guard)}") if join.guard is not None else (text,)


def _view(machine: ir.Machine) -> _View:
    order = _breadth_first_order(machine)
    finals = {s.name for s in machine.states if s.final}
    group_of = {s.name: p.name for p in machine.states if p.parallel is not None
                for s in machine.states if s.branch is not None and s.branch in p.parallel.branches}
    nodes = []
    edges = []
    for state in machine.states:
        lines = [state.name]
        shape = "state"
        if state.parallel is not None:
            shape = "parallel"
            lines.append("parallel")
        if state.each is not None:
            shape = "map"
            names = f"{state.each.index}, {state.each.item}" if state.each.index else state.each.item
            lines.append(f"for {names} in {expr_to_source(state.each.items)}")
            lines.append(f"max {state.each.max}, {state.each.concurrency} at once")
        if state.visits is not None:
            lines.append(f"visits {state.visits}")
        if state.model is not None:
            lines.append(f"model {state.model}")
        if state.fail is not None:
            lines.append("fails the run")
        if state.kind == "human":
            lines.append("asks a person")
        if state.run is not None:
            lines.append(_runs_line(machine, state.run))
        nodes.append(_Node(state.name, tuple(lines), state.final, shape, group_of.get(state.name)))
        source = state.name
        if state.parallel is not None:
            join = JOIN + state.name
            nodes.append(_Node(join, _join_lines(state.parallel), False, "join"))
            for entry in state.parallel.branches:
                edges.append(_Edge(state.name, entry, "solid", ("branch",), False))
            for branch_state in machine.states:  # each branch's last states hand their output to the join
                if group_of.get(branch_state.name) == state.name and not branch_state.transitions:
                    edges.append(_Edge(branch_state.name, join, "dotted", ("done",), False))
            source = join
        for t in state.transitions:
            edges.append(_edge(source, t, order, finals, state.name))
    return _View(machine.name, machine.start, tuple(nodes), tuple(edges))


def _runs_line(machine: ir.Machine, run: ir.Run) -> str:
    """`runs research` (and the machine's own name, when the caller runs it by another)."""
    callee = next((m for name, m in machine.machines if name == run.machine), None)
    if callee is None or callee.name == run.machine:
        return f"runs {run.machine}"
    return f"runs {run.machine} (machine {callee.name})"


def _edge(source: str, t: ir.Transition, order: dict[str, int], finals: set[str], state: str = "") -> _Edge:
    state = state or source  # the state the edge leaves (a join node's is its parallel state)
    target = state if t.kind == "stay" else t.target
    if t.kind == "guard" and t.guard is not None:
        style, label = "thick", expr_to_source(t.guard)
    elif t.kind == "condition":
        style, label = "dashed", shorten(t.condition or "", CONDITION_LABEL_CHARS)
    elif t.kind == "otherwise":
        style, label = "dotted", "otherwise"
    elif t.kind == "stay":
        style, label = "dotted", "stay"
    elif t.kind == "timeout" and t.seconds is not None:
        style, label = "dotted", f"after {ir.duration_text(t.seconds)}"
    else:
        style, label = "solid", ""
    lines = [label] if label else []
    if t.max is not None:
        lines.append(f"max {t.max}" + (" per visit" if t.per_visit else ""))
    # a traceback sends the run back to re-do work: never `stay`, never into a final state
    back = (
        t.kind != "stay" and target not in finals
        and target in order and state in order and order[target] <= order[state]
    )
    return _Edge(source, target, style, tuple(lines), back)


def _breadth_first_order(machine: ir.Machine) -> dict[str, int]:
    """Each reachable state's position in a breadth-first walk from the start, transitions taken in
    source order. Edges of states the walk never reaches are not tracebacks: there is no run to go back in."""
    successors = {
        s.name: [*(s.parallel.branches if s.parallel is not None else ()),
                 *(s.name if t.kind == "stay" else t.target for t in s.transitions)]
        for s in machine.states
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
    if name.startswith(JOIN):
        return f"j_{name[len(JOIN):]}"
    return f"s_{name}"


_MERMAID_SHAPES = {"parallel": "{{{{{}}}}}", "join": "[/{}\\]", "map": "[[{}]]"}


def _mermaid_node(node: _Node) -> str:
    label = _mermaid_label(node.lines)
    if node.final:
        return f"{_mermaid_id(node.name)}((({label})))"
    return _mermaid_id(node.name) + _MERMAID_SHAPES.get(node.shape, "({})").format(label)


def _render_mermaid(view: _View) -> str:
    out = ["flowchart TD"]
    out.append(f'    {_MERMAID_START}(( ))')
    for node in view.nodes:
        if node.group is not None:
            continue  # drawn in its parallel state's box, below
        out.append(f"    {_mermaid_node(node)}")
        if node.shape == "parallel":
            members = [n for n in view.nodes if n.group == node.name]
            if members:
                out.append(f"    subgraph b_{node.name}[{_mermaid_label(('branches of ' + node.name,))}]")
                out.extend(f"        {_mermaid_node(member)}" for member in members)
                out.append("    end")
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


_DOT_SHAPES = {"parallel": "shape=hexagon", "join": "shape=invtrapezium", "map": "peripheries=2"}


def _dot_id(name: str) -> str:
    # a join node's id has parentheses, which no state name can hold
    return _dot_quote(f"(join {name[len(JOIN):]})" if name.startswith(JOIN) else name)


def _dot_node(node: _Node) -> str:
    attrs = [f"label={_dot_quote(node.lines)}"]
    if node.final:
        attrs.append("shape=doublecircle")
    elif node.shape in _DOT_SHAPES:
        attrs.append(_DOT_SHAPES[node.shape])
    return f"{_dot_id(node.name)} [{', '.join(attrs)}];"


def _render_dot(view: _View) -> str:
    out = [f"digraph {_dot_quote(view.name)} {{"]
    out.append('    node [shape=box, style=rounded, fontname="Helvetica"];')
    out.append('    edge [fontname="Helvetica", fontsize=10];')
    out.append(f'    {_dot_quote(_DOT_START)} [shape=point, width=0.15, label=""];')
    for node in view.nodes:
        if node.group is not None:
            continue  # drawn in its parallel state's cluster, below
        out.append(f"    {_dot_node(node)}")
        if node.shape == "parallel":
            members = [n for n in view.nodes if n.group == node.name]
            if members:
                out.append(f"    subgraph {_dot_quote('cluster_' + node.name)} {{")
                out.append(f"        label={_dot_quote('branches of ' + node.name)};")
                out.extend(f"        {_dot_node(member)}" for member in members)
                out.append("    }")
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
        out.append(f"    {_dot_id(edge.source)} -> {_dot_id(edge.target)}{suffix};")
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
