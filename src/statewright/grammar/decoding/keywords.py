"""Where a keyword cannot be a name: read off the parser's own LALR tables.

The parser lets a keyword stand for a name wherever it would otherwise reject the keyword (grammar/parser.py,
`_keyword_as_name`). So at each place a rule takes a name, the words that cannot be names are exactly the
keywords the parser acts on in the states where that name is read: there it takes the keyword as a
keyword. Each name occurrence is wrapped in a rule of its own (`occurrence: NAME`), so its states are the
ones holding that rule's item; the lookaheads are Lark's LALR(1) lookaheads, which can only name more
keywords than a canonical parser would (the constraint then forbids more, never less).
"""

from __future__ import annotations

import re
from typing import Any

from lark.common import ParserConf
from lark.load_grammar import Grammar
from lark.parsers.lalr_analysis import LALR_Analyzer

MARK = "sw_name_occurrence_"


def keywords_taken(rule_defs: list[Any], term_defs: list[Any], ignore: list[str], start: str,
                   name_pattern: re.Pattern[str], occurrences: int) -> dict[int, frozenset[str]]:
    """For each marked name occurrence (rules `MARK<k>: NAME` in `rule_defs`), the keywords (string terminals
    that `name_pattern` matches) that the parser takes as keywords where that name is read."""
    terminals, rules, _ = Grammar(rule_defs, term_defs, ignore).compile([start], set())
    keywords = {t.name: t.pattern.value for t in terminals
                if t.pattern.type == "str" and name_pattern.fullmatch(t.pattern.value)}
    analyzer = LALR_Analyzer(ParserConf(rules, {}, [start]))
    # the steps of compute_lalr() up to the lookaheads: building the action table would stop at the
    # reduce/reduce conflicts the wrapper rules introduce, and only the lookaheads are needed
    analyzer.compute_lr0_states()
    analyzer.compute_reads_relations()
    analyzer.compute_includes_lookback()
    analyzer.compute_lookaheads()
    taken: dict[int, set[str]] = {k: set() for k in range(occurrences)}
    for state in analyzer.lr0_itemsets:
        acted_on = {s.name for s in state.transitions if s.is_term} | {s.name for s in state.lookaheads}
        words = {keywords[t] for t in acted_on if t in keywords}
        for item in state.closure:
            origin = item.rule.origin.name
            if item.index == 0 and isinstance(origin, str) and origin.startswith(MARK):
                taken[int(origin[len(MARK):])] |= words
    return {k: frozenset(v) for k, v in taken.items()}
