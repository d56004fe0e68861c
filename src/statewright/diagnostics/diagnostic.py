"""The diagnostic type and the collector every stage reports into."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum

from .source import Span


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    """One problem: a stable code, where it is, what is wrong and, where possible, how to fix it."""

    code: str
    message: str
    span: Span | None
    label: str = ""
    help: str = ""
    notes: tuple[str, ...] = ()
    severity: Severity = field(default=Severity.ERROR)
    file: str | None = None  # the file a problem without a span concerns (one that cannot be read)

    @property
    def path(self) -> str:
        if self.span is not None:
            return self.span.path
        return self.file if self.file is not None else "<input>"

    def sort_key(self) -> tuple[str, int, int, str]:
        start = self.span.start if self.span is not None else -1
        end = self.span.end if self.span is not None else -1
        return (self.path, start, end, self.code)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A short 'did you mean' help text, or '' when nothing is close."""
    close = close_names(name, candidates)
    if not close:
        return ""
    if len(close) == 1:
        return f"did you mean '{close[0]}'?"
    return "did you mean one of " + ", ".join(f"'{c}'" for c in close) + "?"


def close_names(name: str, candidates: Iterable[str]) -> list[str]:
    """The (at most three) candidates closest to `name`, closest first: difflib's close matches, cutoff 0.6.

    Each is worked out once per check (a name misspelled the same way twice costs one search), and a
    check spends at most SUGGESTION_BUDGET comparisons on them (suggestion_budget): every suggestion
    compares the name with every candidate, so a file with thousands of mistakes against thousands of
    names would otherwise take minutes to report. Past the budget, a mistake is reported without one.
    """
    budget = _budget.get()
    if budget is not None and budget.left <= 0:
        return []  # spent: not even the candidates are read
    pool = tuple(sorted(set(candidates)))
    if budget is None:
        return list(_close_names(name, pool))
    key = (name, pool)
    found = budget.found.get(key)
    if found is None:
        if budget.left < len(pool):
            budget.left = 0
            return []
        budget.left -= len(pool)
        found = budget.found[key] = _close_names(name, pool)
    return list(found)


def _close_names(name: str, pool: tuple[str, ...]) -> tuple[str, ...]:
    import difflib  # here, not at import: only a file with a mistake needs it

    return tuple(difflib.get_close_matches(name, pool, n=3, cutoff=0.6))


SUGGESTION_BUDGET = 50_000  # comparisons of a name with a candidate, in one check: well under a second


class _Budget:
    def __init__(self, comparisons: int) -> None:
        self.left = comparisons
        self.found: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}


_budget: ContextVar[_Budget | None] = ContextVar("statewright_suggestion_budget", default=None)


@contextmanager
def suggestion_budget(comparisons: int = SUGGESTION_BUDGET) -> Iterator[None]:
    """What close_names may spend while the block runs (one check of one file); its own in each thread
    and task."""
    token = _budget.set(_Budget(comparisons))
    try:
        yield
    finally:
        _budget.reset(token)


def quoted_list(names: Iterable[str], limit: int = 8, last: str = "and") -> str:
    """Names for a message, quoted: `'a', 'b' and 'c'` (or `... or 'c'` with last="or"); past `limit` of
    them, the first `limit` and how many more."""
    rest = iter(names)
    shown = list(itertools.islice(rest, limit + 1))  # the rest are only counted: a help text per mistake
    if len(shown) > limit:  # may list thousands of states
        total = len(names) if isinstance(names, Sized) else len(shown) + sum(1 for _ in rest)
        quoted = [*(f"'{n}'" for n in shown[:limit]), f"{total - limit} more"]
    else:
        quoted = [f"'{n}'" for n in shown]
    if len(quoted) < 2:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + f" {last} " + quoted[-1]


class Diagnostics:
    """Collects diagnostics; stages report every problem rather than stopping at the first."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def report(
        self,
        code: str,
        message: str,
        span: Span | None,
        *,
        label: str = "",
        help: str = "",
        notes: Iterable[str] = (),
    ) -> Diagnostic:
        from .codes import CODES  # here, not at import: a file without problems never needs the registry

        info = CODES[code]  # a KeyError here is a bug: every code must be registered
        diag = Diagnostic(code, message, span, label, help, tuple(notes), Severity(info.severity.value))
        self.items.append(diag)
        return diag

    def extend(self, other: Iterable[Diagnostic]) -> None:
        self.items.extend(other)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.WARNING]

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.items)

    def sorted(self) -> list[Diagnostic]:
        seen: set[tuple[object, ...]] = set()
        out = []
        for d in sorted(self.items, key=Diagnostic.sort_key):
            key = (d.sort_key(), d.message)
            if key not in seen:
                seen.add(key)
                out.append(d)
        return out

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.items)
