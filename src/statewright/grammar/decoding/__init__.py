"""The grammar as a decoding constraint: statewright.lark written as GBNF (llama.cpp) or as Lark for decoders.

Both forms are generated from statewright.lark by code, through Lark's own grammar loader: `model` reads the
rules and terminals, `keywords` asks the parser's LALR tables where a keyword cannot be a name, `terminals`
compiles the terminals' lookaheads away, and `gbnf` and `lark_syntax` write the two forms. `completion`
finishes a constrained draft that a token limit cut off.
"""

from __future__ import annotations

from functools import lru_cache

from .model import GrammarExportError, load_constraint_grammar

FORMATS = ("gbnf", "lark")

__all__ = ["FORMATS", "GrammarExportError", "export_constraint"]


@lru_cache(maxsize=2 * len(FORMATS))
def export_constraint(fmt: str, draft: bool = False) -> str:
    """The grammar as a decoding constraint in `fmt` ("gbnf" or "lark").

    The default form accepts every file the parser accepts, in any layout, with comments (less a few
    layouts where two tokens touch that could run together). `draft` is the form a model writes into: no
    comments, and (in GBNF) no leading text and bounded whitespace, so a small model cannot spend its
    token budget on them."""
    grammar = load_constraint_grammar()
    if fmt == "gbnf":
        from .gbnf import render_gbnf

        return render_gbnf(grammar, draft)
    if fmt == "lark":
        from .lark_syntax import render_lark

        return render_lark(grammar, draft)
    raise ValueError(f"unknown constraint format {fmt!r}; the formats are: {', '.join(FORMATS)}")
