"""The project: every file a command reads, each read and compiled once, with the files it uses.

A file's `use "PATH"` lines name other files, relative to the using file. The project resolves each path,
reads and compiles the file it names the first time it is asked (a cache by the file's real path, so a
file used by fifty others is checked once per invocation), and hands the using file's checks what the
used file declares. A path that names no file, a file that cannot be read, a file that uses itself
through others (an import cycle): each is a diagnostic at the `use` line, positioned at the path's string;
a used file with errors gets one diagnostic there too ("fix the errors of teams/research.fsm first"),
while its own diagnostics belong to it and are reported against it, once.

A file has two names: where it is on disk (its location, for reading) and the name diagnostics and
generated code give it (its display name). They are the same but for `compile -o`, which names every
file relative to the runner it writes. The language server keeps one project across edits and tells it
which files changed (`invalidate`), so only those and the files that use them are compiled again.
"""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..diagnostics import Diagnostics, SourceFile, did_you_mean
from ..grammar import ast
from .compilation import STAGES, Compilation, Stage

if TYPE_CHECKING:
    from ..grammar import ParseResult

SPEC_SUFFIX = ".fsm"
Reader = Callable[[str], bytes]


def read_file(location: str) -> bytes:
    """A used file's bytes (to one past the size limit, which read_source refuses); OSError, with the reason,
    for what is no regular file: a FIFO or a device behind a `use` line must not hold up the check."""
    from ..grammar.parser import read_named_file

    return read_named_file(location)


@dataclass(frozen=True)
class UsedFile:
    """What one `use` line gives the file that has it: the used file's compilation, and the name `run`
    calls its machine by (its own name, or the one after `as`). It is `usable` when the file checks; one
    that does not (missing, unreadable, in a cycle, or with errors) is reported at the `use` line, and its
    compilation, when there is one, holds its own diagnostics."""

    decl: ast.UseDecl
    path: str  # the used file's display name
    compilation: Compilation | None
    name: str  # the name the using machine runs it by ("" when the file could not be parsed)
    usable: bool = True


def is_pseudo_path(path: str) -> bool:
    """`<string>`, `<stdin>`, a URI: a name that is no file's place on disk."""
    return path.startswith("<") or "://" in path


def _joined(base_file: str, written: str) -> str:
    """`written` relative to the directory of `base_file` (the working directory for a pseudo path)."""
    base = "" if is_pseudo_path(base_file) else os.path.dirname(base_file)
    return os.path.normpath(os.path.join(base, written)) if written else written


class Project:
    """The files of one invocation (or of a language server's session), each compiled once.

    `reader` reads a file's bytes by its location (the language server's reads open documents first);
    `namer` gives a used file its display name from its location (by default, its path from the name of
    the file that uses it: `compile -o` names every file from the runner's folder instead)."""

    def __init__(self, compile_file: Callable[..., Compilation], reader: Reader | None = None,
                 namer: Callable[[str], str] | None = None) -> None:
        self.compile_file = compile_file  # pipeline.compile_source: the project drives it for each file
        self.reader = reader or read_file
        self.namer = namer
        self._units: dict[str, Compilation] = {}  # real path -> the file's compilation
        self._stages: dict[str, int] = {}  # real path -> how far it was compiled (an index into STAGES)
        self._names: dict[str, str] = {}  # real path -> display name
        self._active: list[str] = []  # the files being compiled, outermost first: a cycle returns to one
        self._cycles: dict[tuple[str, str], tuple[str, ...]] = {}  # (user, used) -> the cycle it closes
        self._users: dict[str, set[str]] = {}  # real path -> the files that use it (for invalidate)
        # the files parsed so far and where each is, for naming a cycle back to one of them
        self._parsed: dict[str, ast.Machine] = {}
        self._handed: dict[str, ParseResult] = {}  # parsed on the way down, for the pipeline to take
        self._locations: dict[str, str] = {}

    # -- the files

    @staticmethod
    def key(location: str) -> str:
        if is_pseudo_path(location):
            return location
        try:
            return os.path.realpath(location)
        except ValueError:  # a NUL: no file's name (reading it says so)
            return os.path.abspath(location)

    def compilations(self) -> list[Compilation]:
        """Every file compiled so far, in the order each was finished (a used file before its user)."""
        return list(self._units.values())

    def compilation(self, location: str) -> Compilation | None:
        return self._units.get(self.key(location))

    def users_of(self, location: str) -> set[str]:
        """The real paths of the files that use the file at `location`, directly or through others."""
        found: set[str] = set()
        stack = [self.key(location)]
        while stack:
            for user in self._users.get(stack.pop(), ()):
                if user not in found:
                    found.add(user)
                    stack.append(user)
        return found

    def invalidate(self, location: str) -> set[str]:
        """Forget the file at `location` and every file that uses it (they are compiled again when next
        asked for); the real paths forgotten."""
        key = self.key(location)
        gone = {key} | self.users_of(location)
        for k in gone:
            self._units.pop(k, None)
            self._stages.pop(k, None)
        for edge in [e for e in self._cycles if e[0] in gone or e[1] in gone]:
            del self._cycles[edge]
        return gone

    # -- compiling

    def compile_path(self, location: str, *, stop_after: Stage = "lower") -> Compilation:
        """The compilation of the file at `location` (read, or taken from the cache). Raises OSError when
        the file cannot be read (api.check_path makes that an SW1022 diagnostic)."""
        key = self.key(location)
        known = self._cached(key, stop_after)
        if known is not None:
            return known
        return self._compile_bytes(self.reader(location), location, key, stop_after)

    def compile_source(self, source: SourceFile, *, location: str | None = None, stop_after: Stage = "lower",
                       level: int = 1, disabled: tuple[str, ...] = (), log: list[str] | None = None,
                       keep_syntax: bool = True) -> Compilation:
        """Compile a text given whole (not read through the project): the entry of a check of text, or
        of a document being edited. Its `use` lines are resolved from `location` (by default its path).

        The files it uses are compiled first, each before the files that use it, with a stack of our own
        (each file is parsed once, on the way down): a chain of files as long as a project can hold costs
        no recursion. `keep_syntax` is the pipeline's, for this file (the files it uses keep theirs)."""
        location = location if location is not None else source.path
        self._names.setdefault(self.key(location), source.path)
        frames = [_Frame(location, source, stop_after, level, tuple(disabled), log, keep_syntax)]
        compilation = None
        while frames:
            frame = frames[-1]
            key = self.key(frame.location)
            if not frame.entered:
                frame.entered = True
                self._active.append(key)
            below = self._next_used(frame) if _stage_index(frame.stop_after) >= _stage_index("check") else None
            if below is not None:
                frames.append(below)
                continue
            frames.pop()
            try:
                compilation = self._compile_frame(frame)
            finally:
                self._active.pop()
            self._units[key] = compilation
            self._stages[key] = _stage_index(frame.stop_after)
        assert compilation is not None
        return compilation

    def _compile_frame(self, frame: _Frame) -> Compilation:
        # the tree parsed on the way down is handed to the pipeline through the project, not as an
        # argument: a caller's frame would hold it for the whole compilation, where the pipeline may let
        # it go before generating and loading the machine (keep_syntax False)
        if frame.parsed is not None:
            self._handed[self.key(frame.location)] = frame.parsed
            frame.parsed = None
        return self.compile_file(frame.source, stop_after=frame.stop_after, level=frame.level, disabled=frame.disabled,
                                 log=frame.log, project=self, location=frame.location, keep_syntax=frame.keep_syntax)

    def take_parsed(self, location: str) -> ParseResult | None:
        """The parse of the file at `location` made on the way down, if there is one; the caller's alone
        from here."""
        return self._handed.pop(self.key(location), None)

    def _next_used(self, frame: _Frame) -> _Frame | None:
        """The next file `frame`'s file uses that is still to be compiled (read and decoded here; one that
        cannot be read is left to the `use` line's check, which reports it)."""
        from ..grammar import parse_source
        from ..grammar.parser import paused_gc, read_source
        if frame.parsed is None:
            with paused_gc():
                frame.parsed = parse_source(frame.source)
        machine = frame.parsed.machine
        for decl in machine.uses if machine is not None else ():
            there = _joined(frame.location, decl.path.value)
            key = self.key(there)
            if not decl.path.value.strip() or key in frame.tried or key in self._active:
                continue
            frame.tried.add(key)
            if self._cached(key, "lower") is not None:
                continue
            try:
                data = self.reader(there)
            except OSError:
                continue
            name = self._names.setdefault(key, self._display(there, frame.source.path, decl.path.value))
            diagnostics = Diagnostics()
            source = read_source(name, data, diagnostics)
            if source is None:  # not UTF-8: that file's own diagnostic, and an error at the `use` line
                self._units[key] = Compilation(None, None, [], None, diagnostics.sorted())
                continue
            return _Frame(there, source, "lower")
        return None

    def _cached(self, key: str, stop_after: Stage) -> Compilation | None:
        """The file's compilation, when it was compiled as far as `stop_after` (a file that did not parse
        or could not be decoded is as far as it will get)."""
        known = self._units.get(key)
        if known is None or (self._stages.get(key, 0) < _stage_index(stop_after) and known.ast is not None):
            return None
        return known

    def _compile_bytes(self, data: bytes, location: str, key: str, stop_after: Stage) -> Compilation:
        from ..grammar.parser import read_source
        name = self._names.get(key) or (self.namer(location) if self.namer is not None else location)
        self._names[key] = name
        diagnostics = Diagnostics()
        source = read_source(name, data, diagnostics)
        if source is None:
            compilation = Compilation(None, None, [], None, diagnostics.sorted())
            self._units[key] = compilation
            return compilation
        return self.compile_source(source, location=location, stop_after=stop_after)

    # -- `use` lines

    def resolve_uses(self, machine: ast.Machine, source: SourceFile, location: str, diagnostics: Diagnostics,
                     stop_after: Stage) -> list[UsedFile]:
        """The files `machine`'s `use` lines name, compiled (to at least `stop_after`'s checks), each
        problem reported at its line."""
        user = self.key(location)
        found = []
        for decl in machine.uses:
            found.append(self._use(decl, user, location, source.path, diagnostics, stop_after))
        return found

    def _use(self, decl: ast.UseDecl, user: str, location: str, display: str, diagnostics: Diagnostics,
             stop_after: Stage) -> UsedFile:
        written = decl.path.value
        there = _joined(location, written)
        name = self._display(there, display, written)
        if not written.strip():
            diagnostics.report("SW2100", "the path of a 'use' is empty", decl.path.span, label="which file?",
                               help='name a .fsm file relative to this one: use "teams/research.fsm"')
            return UsedFile(decl, name, None, "", False)
        key = self.key(there)
        self._users.setdefault(key, set()).add(user)
        if key in self._active:
            self._cycle(decl, user, key, diagnostics)
            return UsedFile(decl, self._names.get(key, name), None, self._machine_name(key, decl), False)
        compilation = self._cached(key, stop_after)
        if compilation is None:
            self._names.setdefault(key, name)
            try:
                data = self.reader(there)
            except OSError as e:
                self._unreadable(decl, there, name, e, diagnostics, location)
                return UsedFile(decl, name, None, "", False)
            compilation = self._compile_bytes(data, there, key, stop_after)
        shown = self._names.get(key, name)
        callable_name = decl.alias.value if decl.alias is not None else (
            compilation.ast.name.value if compilation.ast is not None else "")
        chain = self._cycles.get((user, key))
        if chain is not None:
            self._report_cycle(decl, chain, user, diagnostics)
            return UsedFile(decl, shown, compilation, callable_name, False)
        if not compilation.ok:
            errors = sum(1 for d in compilation.diagnostics if d.severity.value == "error")
            diagnostics.report("SW2102", f"'{shown_text(written)}' has {errors or 'its'} "
                               f"error{'s' if errors != 1 else ''}", decl.path.span,
                               label="this file cannot be used until it checks",
                               help=f"fix the errors of {shown_text(shown)} first")
            return UsedFile(decl, shown, compilation, callable_name, False)
        return UsedFile(decl, shown, compilation, callable_name)

    def _display(self, location: str, user: str, written: str) -> str:
        """The name a used file is given: the namer's, or its path from the using file's name."""
        return self.namer(location) if self.namer is not None else _joined(user, written)

    def _unreadable(self, decl: ast.UseDecl, there: str, name: str, e: OSError, diagnostics: Diagnostics,
                    user: str) -> None:
        written = shown_text(decl.path.value)
        if isinstance(e, FileNotFoundError):
            folder, file = os.path.split(there)
            try:  # the .fsm files beside where it was looked for, but not the using file itself
                beside = [f for f in os.listdir(folder or os.curdir) if f.endswith(SPEC_SUFFIX)
                          and self.key(os.path.join(folder, f)) != self.key(user)]
            except OSError:
                beside = []
            hint = did_you_mean(file, beside)
            diagnostics.report("SW2100", f"no file '{written}'", decl.path.span,
                               label=f"{shown_text(name)} does not exist",
                               help=hint or "the path is relative to the folder of this file"
                                            + (f"; the .fsm files there are {', '.join(sorted(beside)[:8])}"
                                               if beside else ""))
            return
        reason = "it is a folder" if isinstance(e, IsADirectoryError) else (e.strerror or str(e))
        diagnostics.report("SW2101", f"cannot read '{written}': {reason}", decl.path.span,
                           label=f"{shown_text(name)} cannot be read",
                           help="name a .fsm file" if isinstance(e, IsADirectoryError)
                           or e.errno == errno.EINVAL else "check that the file exists and that you may read it")

    # -- cycles

    def _cycle(self, decl: ast.UseDecl, user: str, used: str, diagnostics: Diagnostics) -> None:
        """`user` uses `used`, which is being compiled: every file from `used` to `user` uses the next, so
        each is reported at its own `use` line (the others when their use of the next returns)."""
        start = self._active.index(used)
        chain = (*self._active[start:], used)
        for a, b in itertools.pairwise(chain):
            self._cycles[(a, b)] = chain
        self._report_cycle(decl, chain, user, diagnostics)

    def _report_cycle(self, decl: ast.UseDecl, chain: tuple[str, ...], user: str, diagnostics: Diagnostics
                      ) -> None:
        """The cycle, from the file reporting it back to that file: as machines when each runs the next
        (SW3100), else as files (SW2103)."""
        keys = list(chain[:-1])
        i = keys.index(user) if user in keys else 0
        rotated = keys[i:] + keys[:i] + [keys[i]]
        runs = self._cycle_is_recursion(rotated)
        if runs is not None:
            diagnostics.report("SW3100", f"machine '{runs[0]}' runs itself: {' -> '.join(runs)}", decl.path.span,
                               label="a machine cannot run itself, directly or through others",
                               help="break the chain: a machine that must repeat work loops over its own states "
                                    "(with a bound), or calls a third machine that does the repeated part")
            return
        files = [shown_text(self._names.get(k, k)) for k in rotated]
        diagnostics.report("SW2103", f"files that use each other: {' -> '.join(files)}",
                           decl.path.span, label="files cannot use each other in a cycle",
                           help="move what they share into a third file that both use")

    def _cycle_is_recursion(self, keys: list[str]) -> list[str] | None:
        """The machines of a cycle of files, by the names each runs the next by, when each runs the next;
        None when some file only imports declarations from the next."""
        first = self._parsed.get(keys[0])
        if first is None:
            return None
        names = [first.name.value]
        for a, b in itertools.pairwise(keys):
            machine = self._parsed.get(a)
            target = self._parsed.get(b)
            if machine is None or target is None:
                return None
            use = next((u for u in machine.uses if self.key(_joined(self._locations.get(a, a), u.path.value)) == b),
                       None)
            if use is None:
                return None
            called = use.alias.value if use.alias is not None else target.name.value
            if not _runs(machine, called):
                return None
            names.append(called)
        return names

    def _machine_name(self, key: str, decl: ast.UseDecl) -> str:
        if decl.alias is not None:
            return decl.alias.value
        parsed = self._parsed.get(key)
        return parsed.name.value if parsed is not None else ""

    def parsed(self, location: str, machine: ast.Machine) -> None:
        """The pipeline has parsed the file at `location` (a cycle back to it is named from its text)."""
        key = self.key(location)
        self._parsed[key] = machine
        self._locations[key] = location

    def forget_parsed(self, location: str) -> None:
        """The pipeline lets go of the syntax tree of the file at `location` (no file compiled after it
        names a cycle back to it: its own uses are compiled)."""
        self._parsed.pop(self.key(location), None)


class _Frame:
    """One file on the way down a project: compiled once the files it uses are."""

    def __init__(self, location: str, source: SourceFile, stop_after: Stage, level: int = 1,
                 disabled: tuple[str, ...] = (), log: list[str] | None = None, keep_syntax: bool = True) -> None:
        self.location, self.source, self.stop_after = location, source, stop_after
        self.level, self.disabled, self.log, self.keep_syntax = level, disabled, log, keep_syntax
        self.parsed: ParseResult | None = None
        self.entered = False
        self.tried: set[str] = set()


def shown_text(text: str) -> str:
    """A path as a message shows it: a character that could act on a terminal (an escape, a bell, a line
    break) written as its escape, so a hostile path cannot reach a sink raw."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _stage_index(stage: Stage) -> int:
    return STAGES.index(stage)


def _runs(machine: ast.Machine, name: str) -> bool:
    return any(isinstance(item, ast.RunCall) and item.machine.value == name
               for state in machine.items if isinstance(state, ast.StateDecl) for item in state.items)


def iter_used(compilation: Compilation) -> Iterator[Compilation]:
    """Every compilation `compilation` uses, directly or through others, each once, callees first."""
    seen: set[int] = set()
    order: list[Compilation] = []
    stack: list[tuple[Compilation, bool]] = [(compilation, False)]
    while stack:
        unit, done = stack.pop()
        if done:
            order.append(unit)
            continue
        if id(unit) in seen:
            continue
        seen.add(id(unit))
        stack.append((unit, True))
        for used in reversed(unit.uses):  # (a file with errors too: its diagnostics are its own to show)
            if used.compilation is not None and id(used.compilation) not in seen:
                stack.append((used.compilation, False))
    return iter(order[:-1])


def overlay_reader(texts: Mapping[str, str], fallback: Reader = read_file) -> Reader:
    """A reader that takes the text of a file from `texts` (by real path) when it is there: a language
    server's open documents, which may differ from the disk."""

    def read(location: str) -> bytes:
        text = texts.get(Project.key(location))
        return text.encode("utf-8") if text is not None else fallback(location)

    return read
