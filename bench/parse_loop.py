"""Benchmark: the hand-written parse loop (grammar/lalr.py) against Lark's own tree-less LALR mode.

Both build the same syntax tree from the 10,000-state machine of bench/compile_scaling.py:

    loop   grammar/lalr.py's `drive`: one loop over Lark's LALR table and scanners that reads tokens,
           reduces and calls the tree builder's methods (what `parse_source` runs)
    lark   Lark's own tree-less LALR mode: Lark's contextual lexer, post-lexer and parser state, calling
           a callback at each reduction as they do for a transformer given to the parser
           (`Lark(..., parser="lalr", transformer=...)`), so no parse tree is built either. A transformer
           given that way gets no positions (Lark refuses `v_args(meta=True)` there, and drops the
           punctuation a span must cover before it sees the children), so each rule's callback is set on
           the parser directly, where `transformer=` would set it: it gets the rule's raw children, works
           out the rule's place from them, shapes them as Lark's tree builder does and calls the same
           builder method the loop calls.

Before timing, the two trees are compared node by node, spans included, on the large machine and on every
example, so the numbers are of the same work. Each side is timed `--repeat` times, interleaved, with the
cyclic collector paused as the compiler pauses it; the median CPU time is reported. The loop is kept only
if it is at least 1.5 times as fast as Lark's mode (issue: "decided by a number").

    python bench/parse_loop.py [--repeat N] [--states N]

The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lark import Lark, Token, Tree

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_scaling import generate_machine

from statewright.diagnostics import SourceFile, Span
from statewright.grammar import parser
from statewright.grammar.build import TreeBuilder
from statewright.grammar.lalr import PASS, Meta, Tables, _spliced
from statewright.grammar.node import Node

ROOT = Path(__file__).resolve().parent.parent
SPEED_TARGET = 1.5


class _Placed(tuple):  # type: ignore[type-arg]
    """A reduced value and the place of its text, (value, start, end); -1 when it has none."""


class TreelessLark:
    """Lark's LALR parser building the syntax tree as it reduces: each reduction calls the builder's method
    for its rule, with the rule's place worked out from its children (tokens and earlier values)."""

    def __init__(self) -> None:
        self.comments: list[Token] = []
        self.builder: Any = None
        self.lark = Lark(parser.GRAMMAR_PATH.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                         maybe_placeholders=False, postlex=parser._FieldNamesPostLex(),
                         lexer_callbacks={"COMMENT": self.comments.append})
        methods = {name: f for name, f in vars(TreeBuilder).items() if callable(f) and not name.startswith("_")}
        # the plan of each rule's reduction, as the loop makes it: which children are kept, which spliced
        plans = Tables.__new__(Tables)  # only its `plan`, which reads the methods
        plans.methods = methods
        self.lark.parser.parser.parser.callbacks = {rule: self._callback(plans.plan(rule)) for rule in self.lark.rules}

    def _callback(self, plan: tuple[Any, ...]) -> Callable[[list[Any]], Any]:
        what, _, _, method, keep, splice, single, name = plan
        owner = self
        if what == PASS:
            return _first

        def reduce(children: list[Any]) -> Any:
            start = end = -1
            for child in children:
                s = _start(child)
                if s >= 0:
                    start = s
                    break
            if start >= 0:
                for child in reversed(children):
                    e = _end(child)
                    if e >= 0:
                        end = e
                        break
            values = [c[0] if type(c) is _Placed else c for c in children]
            if keep is not None:
                values = list(keep(values))
            elif splice is not None:
                values = _spliced(values, splice)
            if single and len(values) == 1:
                child = values[0]
                if type(child) is Token:
                    return child
                return _Placed((child, start, end))  # in the place of its brackets
            if method is None:
                return _Placed((Tree(name, values), start, end))
            value = method(owner.builder, Meta(start, end, start < 0), *values)
            span = getattr(value, "span", None)
            if type(span) is Span and span.start == start and span.end == end:
                return value  # its span is its place
            return _Placed((value, start, end))

        return reduce

    def build(self, source: SourceFile) -> tuple[Any, list[tuple[str, int, int]]]:
        self.comments.clear()
        self.builder = TreeBuilder(source)
        with parser._parsing(source.text):
            placed = self.lark.parse(source.text, on_error=parser._keyword_as_name(self.lark))
        return (placed[0] if type(placed) is _Placed else placed), [(str(t), t.start_pos, t.end_pos) for t in self.comments]


def _first(children: list[Any]) -> Any:
    return children[0]


def _start(child: Any) -> int:
    kind = type(child)
    if kind is Token:
        return child.start_pos  # type: ignore[no-any-return]
    if kind is _Placed:
        return child[1]  # type: ignore[no-any-return]
    return child.span.start  # type: ignore[no-any-return]


def _end(child: Any) -> int:
    kind = type(child)
    if kind is Token:
        return child.end_pos  # type: ignore[no-any-return]
    if kind is _Placed:
        return child[2]  # type: ignore[no-any-return]
    return child.span.end  # type: ignore[no-any-return]


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every node and token of a tree with its span, in order, for a comparison that sees positions."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Node):
            span = getattr(item, "span", None)
            yield type(item).__name__, (span.start, span.end) if isinstance(span, Span) else span
            stack.extend(reversed([getattr(item, f) for f in item._field_names if f != "span"]))
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        elif isinstance(item, Span):
            yield "Span", (item.start, item.end)
        else:
            yield type(item).__name__, item


def same_trees(a: Any, b: Any) -> bool:
    return all(x == y for x, y in zip(_walk(a), _walk(b), strict=True))


def loop_build(source: SourceFile) -> tuple[Any, list[tuple[str, int, int]]]:
    return parser._build(source)


def cpu(run: Callable[[], Any]) -> float:
    start = time.process_time()
    with parser.paused_gc():
        run()
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--states", type=int, default=10_000)
    args = ap.parse_args(argv)
    lark = TreelessLark()
    texts = [(str(p), p.read_text(encoding="utf-8")) for p in sorted(ROOT.glob("examples/*.fsm"))]
    big = SourceFile("generated.fsm", generate_machine(args.states))
    for path, text in [*texts, (big.path, big.text)]:
        source = big if path == big.path else SourceFile(path, text)
        ours, theirs = loop_build(source), lark.build(source)
        if not same_trees(ours[0], theirs[0]) or ours[1] != theirs[1]:
            raise SystemExit(f"the two parsers build different trees for {path}")
    times: dict[str, list[float]] = {"loop": [], "lark": []}
    for _ in range(args.repeat):
        times["loop"].append(cpu(lambda: loop_build(big)))
        times["lark"].append(cpu(lambda: lark.build(big)))
    loop, treeless = statistics.median(times["loop"]), statistics.median(times["lark"])
    ratio = treeless / loop
    print(f"{args.states:,} states, {len(big.text) / 1e6:.1f} MB: loop {loop:.3f} s, Lark's tree-less mode "
          f"{treeless:.3f} s (CPU, median of {args.repeat}); the loop is {ratio:.2f}x as fast")
    verdict = "keep the loop" if ratio >= SPEED_TARGET else "use Lark's own parser"
    print(f"target {SPEED_TARGET}x: {verdict}")
    result = {"states": args.states, "loop_s": round(loop, 4), "lark_treeless_s": round(treeless, 4),
              "speedup": round(ratio, 3), "target": SPEED_TARGET, "keep_loop": ratio >= SPEED_TARGET}
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
