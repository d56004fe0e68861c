"""Syntax error recovery: the rest of a text read after its first syntax error, each later one named once.

After the first slip, the loop reads on without building, mending each slip as it goes, so that one run
reports every syntax error of a file, each once.

A slip may be named several ways (syntax_errors.py), most likely first, each with the repairs that mend
its usual cause (`=>` read as `->`, a missing '}' put back, a stray ':' dropped). The first name whose
repair reads on is the one reported; a name without a repair of its own, or the first when none reads on,
leaves the mending to the smallest edits (drop the token; put one token the parser takes before it; put
one in its place; drop it and the next), the first of which to read on is taken, as in Burke and
Fisher's and Corchuelo's repairing LR parsers. A repair reads on when the parser then takes REPAIR_CHECK
tokens, or the rest of the slip's line and ends it where a statement may end, or a complete text; a
named one may also meet another mistake on its own line after a token (`when x = 1 => b`). When nothing
reads on, panic mode skips the rest of the line; the first token of a later line resumes where the parser
takes it, or at the enclosing block that does (a '}', the next declaration).

What a repair makes of the text is never reported: it is only a guess that keeps the parser in step with
the author. So that a guess that went wrong does not show as errors of its own, a slip is reported only
when it is not at the token of the one before, not later on a line panic mode skipped, and not the
closing brace a repair that opened a block (`state s:` read as `state s {`) left owed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .lalr import (
    ACCEPTED,
    END,
    MAX_STACK,
    REFUSED,
    SHIFTED,
    BuildFailure,
    Repair,
    Slip,
    SlipNamer,
    Tables,
    Unreadable,
    read_token,
    shifts,
    step,
)

MAX_SYNTAX_ERRORS = 20  # reported per file; past it, the parse stops
# What a slip may be, most likely first: each a problem to report and the repairs that mend it.
Namings = Sequence[tuple[object, Sequence[Repair]]]
REPAIR_CHECK = 4  # tokens the parser must read on after a repair, on the slip's own line
_CHECKED_TOKENS = frozenset({"STRING", "LONG_STRING", "INT", "FLOAT", "DURATION"})
# the order generic repairs put tokens in: what closes or links first, names and values last
_FIRST = ("}", "]", ")", "->", "{", ",", ":", "=")


class Recovery:
    """Reads the rest of a text after a slip without building, naming and mending each slip."""

    def __init__(self, tables: Tables, text: str, builder: Any, on_slip: SlipNamer) -> None:
        self.tables = tables
        self.text = text
        self.builder = builder
        self.on_slip = on_slip
        self.problems: list[object] = []
        self.reported = 0
        self.last_start = -1  # where the last slip was
        self.quiet_until = -1  # a slip before this offset follows from the last skip (the rest of its line)
        self.owed_braces = 0  # '{' a repair put in, whose '}' the text will lack
        self.open_kind = tables.literal_kinds.get("{", "")
        self.close_kind = tables.literal_kinds.get("}", "")
        self.order = {tables.literal_kinds[t]: i for i, t in enumerate(_FIRST) if t in tables.literal_kinds}
        # the last keyword read as a name: (kind, text, start, end, the parser's states before it)
        self.conversion: tuple[str, str, int, int, tuple[Any, ...]] | None = None

    def run(self, slip: Slip) -> list[object]:
        """The problems of the text from the first slip on. The first slip is named before anything else,
        so that a bug in recovery costs only what comes after it (an SW9001 says so)."""
        named = self.on_slip(slip)
        try:
            self._recognize(list(slip.states), slip.start, slip, named)
        except Exception as err:  # noqa: BLE001 - the syntax errors found so far are still reported
            if not self.problems:
                self.problems.append(named[0][0])
            self.problems.append(_internal_error(err))
        return self.problems

    def resume(self, states: list[Any], pos: int) -> list[object]:
        """The problems of the text from `pos` on, the parser in `states` there."""
        try:
            self._recognize(list(states), pos, None, None)
        except Exception as err:  # noqa: BLE001 - as in run
            self.problems.append(_internal_error(err))
        return self.problems

    # -- the loop without building

    def _recognize(self, states: list[Any], pos: int, slip: Slip | None, named: Namings | None) -> None:
        tables, text = self.tables, self.text
        while True:
            if slip is not None:
                mended = self._mend(slip, named or self.on_slip(slip))
                if mended is None:
                    return
                states, pos = mended
                slip = named = None
                continue
            try:
                kind, value, start, end = read_token(tables, text, pos, states[-1], None)
            except Unreadable as e:
                slip = Slip("", text[e.pos], e.pos, e.pos + 1, tuple(states), tables.accepts(states))
                continue
            noted: list[tuple[Any, ...]] = []
            result = step(tables, states, kind, noted)
            if result == ACCEPTED:
                return
            if result == REFUSED:
                slip = self._slip_at(states, kind, value, start, end)
                continue
            if noted:
                self.conversion = (kind, value, start, end, noted[-1])
            if len(states) > MAX_STACK:
                self._report(Slip(kind, value, start, end, tuple(states), frozenset(), True))
                return
            if kind in _CHECKED_TOKENS:
                failure = self.builder.token_failure(kind, value, start)
                if failure is not None:
                    self.problems.append(failure)
            pos = end

    def _slip_at(self, states: list[Any], kind: str, value: str, start: int, end: int) -> Slip:
        """The slip where the parser stopped; at the keyword read as a name before it, if that was on the
        same line (as lalr._stuck_slip says)."""
        conversion, self.conversion = self.conversion, None
        if conversion is not None and "\n" not in self.text[conversion[2]:start]:
            k_kind, k_value, k_start, k_end, k_states = conversion
            return Slip(k_kind, k_value, k_start, k_end, k_states, self.tables.accepts(k_states))
        return Slip(kind, value, start, end, tuple(states), self.tables.accepts(states))

    def _mend(self, slip: Slip, named: Namings) -> tuple[list[Any], int] | None:
        """Report the slip (unless it is a consequence of mending an earlier one) and mend it: the stack
        and position to read on from, or None where reading stops (the end of the text, too deep, or a
        slip after which nothing can be read in step: a repair with no place to resume).

        `named` holds what the slip may be, most likely first, each with the repairs that mend it: the
        first whose repair reads on is what is reported, or one that leaves the mending to the smallest
        edits; when none does, the first."""
        if slip.too_deep or slip.kind == END or any(r.resume < 0 for r in named[0][1]):
            owed = slip.kind == END and self.owed_braces > 0  # the '}' a block opened by a repair lacks
            if slip.too_deep or not (self._consequence(slip) or owed):
                self._report_problem(slip, named[0][0])
            return None
        problem, repair = self._choose(slip, named)
        if repair is None:
            consequence = self._consequence(slip)
            skipped = self._skip(slip)
            if not consequence:
                self._report_problem(slip, problem)
            return skipped
        states = list(repair.states if repair.states is not None else slip.states)
        for kind in repair.inserts:
            step(self.tables, states, kind)
        closes_owed = self.close_kind in repair.inserts and self.owed_braces > 0
        if closes_owed:
            self.owed_braces -= 1
        elif not self._consequence(slip):
            self._report_problem(slip, problem)
        self.owed_braces += repair.inserts.count(self.open_kind)
        return states, repair.resume

    def _choose(self, slip: Slip, named: Namings) -> tuple[object, Repair | None]:
        """What the slip is reported as, and the repair that mends it (None: skip in panic mode)."""
        for problem, repairs in named:
            if not repairs:
                return problem, self._guess(slip)
            for repair in repairs:
                if self._reads_on(slip, repair, named=True):
                    return problem, repair
        return named[0][0], self._guess(slip)

    def _consequence(self, slip: Slip) -> bool:
        return slip.start == self.last_start or slip.start < self.quiet_until

    def _report_problem(self, slip: Slip, problem: object) -> None:
        self.last_start = slip.start
        if self.reported < MAX_SYNTAX_ERRORS:
            self.problems.append(problem)
        self.reported += 1

    def _report(self, slip: Slip) -> None:
        """Report a slip under its first (most likely) name."""
        [(problem, _), *_others] = self.on_slip(slip)
        self._report_problem(slip, problem)

    # -- repairs

    def _guess(self, slip: Slip) -> Repair | None:
        """The first of the smallest edits after which the parser reads on far enough (None: none does)."""
        for repair in self._edits(slip):
            if self._reads_on(slip, repair, named=False):
                return repair
        return None

    def _edits(self, slip: Slip) -> list[Repair]:
        """The smallest edits at a slip: drop the token, put one before it, put one in its place, drop two."""
        kinds = sorted(slip.accepts - {END}, key=lambda k: (self.order.get(k, len(self.order)), k))
        if slip.kind == "":  # a character no terminal reads: it can only go, or be something else
            return [Repair(slip.end), *(Repair(slip.end, (k,)) for k in kinds)]
        edits = [Repair(slip.end), *(Repair(slip.start, (k,)) for k in kinds), *(Repair(slip.end, (k,)) for k in kinds)]
        try:
            _, _, _, after = read_token(self.tables, self.text, slip.end, slip.state, None)
        except Unreadable as e:
            after = e.pos + 1
        edits.append(Repair(after))
        return edits

    def _reads_on(self, slip: Slip, repair: Repair, named: bool) -> bool:
        """Whether the parser, given the repair, reads on far enough: REPAIR_CHECK tokens, or to the end of
        a complete text, or to the end of the slip's line where a statement may end (a '}' could follow),
        what the next line holds being that line's own business. The repair of a named mistake may also
        read one token and meet another mistake on the same line (`when x = 1 => b`)."""
        tables, text = self.tables, self.text
        states = list(repair.states if repair.states is not None else slip.states)
        for kind in repair.inserts:
            if step(tables, states, kind) != SHIFTED:
                return False
        pos, read = repair.resume, 0
        line_end = _line_end(text, slip.start)
        while read < REPAIR_CHECK:
            try:
                kind, _, start, end = read_token(tables, text, pos, states[-1], None)
            except Unreadable as e:
                kind, start, end = "", e.pos, e.pos + 1
            if start > line_end and self._may_close(states):
                return True
            result = step(tables, states, kind) if kind else REFUSED
            if result == ACCEPTED:
                return True
            if result == REFUSED:
                return named and read > 0 and start <= line_end
            read += 1
            pos = end
        return True

    def _may_close(self, states: list[Any]) -> bool:
        """Whether a block could close here: the parser is between two statements."""
        return shifts(self.tables, states, self.close_kind)

    def _skip(self, slip: Slip) -> tuple[list[Any], int] | None:
        """Panic mode: skip the tokens of the slip's line until one the parser takes where it is. The
        first token of a later line always ends the skip: where the parser takes it, or an enclosing block
        does (a '}', the next declaration), the blocks in between left; elsewhere, as the slip of its own
        line. A slip later on the line the skip ended in follows from the skip, and is not reported."""
        tables, text = self.tables, self.text
        states = list(slip.states)
        kind, start, end = slip.kind, slip.start, slip.end
        line_end = _line_end(text, slip.start)
        while True:
            try:
                kind, _, start, end = read_token(tables, text, end, states[-1], None)
            except Unreadable as e:
                kind, start, end = "", e.pos, e.pos + 1
            if kind == END:
                return None
            if start > line_end:
                return self._at_new_line(states, kind), start
            if kind and shifts(tables, states, kind):
                self.quiet_until = line_end
                return states, start

    def _at_new_line(self, states: list[Any], kind: str) -> list[Any]:
        """The stack to read a line's first token with: as it is where the parser takes it, else as the
        nearest enclosing block that does (the blocks in between left), else as it is."""
        if not kind or shifts(self.tables, states, kind):
            return states
        for depth in range(len(states) - 1, 0, -1):
            outer = states[:depth]
            if self._may_close(outer) and shifts(self.tables, outer, kind):  # between two statements there
                return outer
        return states


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _internal_error(err: Exception) -> BuildFailure:
    return BuildFailure("SW9001", f"internal compiler error while looking for more syntax errors: "
                        f"{type(err).__name__}: {str(err)[:200]}", 0, 0,
                        help="this is a bug in statewright; please report it with this file")
