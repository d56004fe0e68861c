"""Machine modules executed in memory: what `statewright run`, `test` and the Python API run.

The text is a runner's machine part importing the installed runtime (`statewright.runtime`); it is
compiled under a name that says where it came from, registered with linecache (so a traceback through a
guard shows the generated line),
and executed as a module of its own. Modules are kept per text: loading the same machine twice in a
process compiles it once. The text is kept as UTF-8 bytes, compressed (a ModuleText: codegen's
load_machine renders it so, compressing as it writes): a str holding one character past Latin-1 takes
two or four bytes a character, and every generated module has one in its first line; and the text of a
large machine's module, held whole, would take four times its spec beside the machine it makes.

A module is compiled and executed a few top-level statements at a time, in order, into one namespace:
the same code, but CPython builds a syntax tree only for the statements in hand, not for the whole
module at once (some 40 bytes of memory a byte of text, 180 MB for the runner of a 1 MB spec). The
generated module writes each state, agent, tool and test as a statement of its own (render.py), so no
piece grows with the machine. The text is read a chunk at a time: a statement is compiled once the line
after it has come.
"""

from __future__ import annotations
import __future__

import collections
import hashlib
import linecache
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator

from .module_text import ModuleText

_MODULE_PREFIX = "statewright.machines.m_"


def load_machine_module(text: str | bytes | bytearray | ModuleText, source_path: str) -> types.ModuleType:
    """The module of `text` (a str, its UTF-8 bytes, or a ModuleText), executed once in this process. A
    bytearray is emptied: the caller hands the text over."""
    if isinstance(text, ModuleText):
        digest = text.digest()[:20]
    else:
        data = text.encode("utf-8") if isinstance(text, str) else text
        digest = hashlib.sha256(data).hexdigest()[:20]  # the same digest, without reading the text back
        text = ModuleText.of(data)
        if isinstance(data, bytearray):
            data.clear()
        del data
    name = _MODULE_PREFIX + digest
    module = _LOADED.get(name)
    if module is not None:
        return module
    # one load at a time: a module is in sys.modules while its pieces run, and another thread must not
    # take it half made
    with _LOADING:
        module = _LOADED.get(name)
        if module is None:
            module = _LOADED[name] = _load(text, source_path, name, digest)
    return module


_LOADED: dict[str, types.ModuleType] = {}  # by name: the modules whose every statement has run
_LOADING = threading.Lock()


def _load(text: ModuleText, source_path: str, name: str, digest: str) -> types.ModuleType:
    # Not a <name>: linecache gives lines lazily only to other names. The text is kept compressed (a
    # generated module compresses to some twentieth of it), and decompressed, decoded and split into lines
    # when a traceback first asks (a list of lines takes three times the text's memory).
    # a NUL cannot stand in a code object's file name (a path given to the Python API may hold one)
    shown_path = source_path.replace("\0", "\\x00")
    filename = f"statewright-machine:{shown_path}:{digest[:12]}"
    whole = text.text
    linecache.cache[filename] = (whole,)
    module = _module(name, source_path, filename)
    try:
        try:
            for code in _Pieces(text.chunks(), filename, whole).compiled():
                exec(code, module.__dict__)  # noqa: S102 - the module statewright itself generated from a checked spec
        except UncutModule as uncut:
            module = _module(name, source_path, filename)
            exec(uncut.code, module.__dict__)  # noqa: S102 - as above
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _module(name: str, source_path: str, filename: str) -> types.ModuleType:
    module = types.ModuleType(name, f"The machine module of {source_path}, compiled in memory.")
    module.__file__ = filename
    # pydantic resolves the classes' annotations through sys.modules, so the module is there before it runs
    sys.modules[name] = module
    return module


# A top-level statement starts at a line that begins with a name or a decorator, and is not the rest of a
# compound statement (a comment at the start of a line may sit inside a block: it is no place to cut). The
# text before the module's `from __future__` line (its header comments and docstring) is one piece.
_STATEMENT_START = re.compile(rb"^(?=[A-Za-z_@])(?!(?:else|elif|except|finally)\b)", re.MULTILINE)
_FUTURE_LINE = b"\nfrom __future__ import annotations\n"
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
_MOST_MERGES = 64  # a piece that does not compile alone takes in the next ones, this many at most


class UncutModule(Exception):  # not an error: what to run instead
    """The module compiles whole but not in pieces (no generated module does that): run `code` instead, in
    a fresh namespace — the pieces before it have run already."""

    def __init__(self, code: types.CodeType) -> None:
        super().__init__("the module compiles only whole")
        self.code = code


def compiled_pieces(text: str | bytes | bytearray, filename: str,
                    whole: Callable[[], str] | None = None) -> Iterator[types.CodeType]:
    """The code of `text` (a str, or its UTF-8 bytes), a run of its top-level statements at a time, in
    order; executed one after another in one namespace they do what the whole module's code does. Line
    numbers are the module's. A bytearray is emptied as it goes (the text before the piece in hand is
    deleted), so that the text is not held beside the module it makes: `whole` then gives the whole
    text, should it be needed again (a module that compiles only whole). A module's loader reads a
    ModuleText the same way, a chunk at a time.

    A piece is cut where a line could start a statement; one that does not compile alone (a line of a
    string that starts like a statement) takes in the next piece until it does — only then is it
    whole, since a cut inside a string or a bracket leaves it unfinished — and past _MOST_MERGES the rest
    of the text is one piece. Future imports hold for the pieces after them, as in one module.

    The cuts are found in the bytes, each at the start of a line whose text has come; a piece is decoded
    before it is compiled (compiled as bytes, a comment in its first lines could name another encoding)."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    if whole is None:
        if isinstance(text, bytearray):
            raise ValueError("a bytearray is emptied as it is compiled: give `whole`")
        whole = bytes(text).decode
    if isinstance(text, bytearray):
        return _Pieces(iter(()), filename, whole, text).compiled()
    return _Pieces(iter((text,)), filename, whole).compiled()


class _Pieces:
    """The text of a module read a chunk at a time (into `buffer`, which may hold its start already), with
    the places a statement may start in it."""

    def __init__(self, chunks: Iterator[bytes], filename: str, whole: Callable[[], str],
                 buffer: bytearray | None = None) -> None:
        self.filename, self.whole = filename, whole
        self.chunks, self.buffer = chunks, buffer if buffer is not None else bytearray()
        self.base = 0  # the offset in the whole text of buffer[0] (the text before it is let go)
        self.cuts: collections.deque[int] = collections.deque()  # offsets in the whole text, ascending
        self.scanned = 0  # the cuts before this offset are found
        self.ended = False

    def more(self) -> bool:
        """Take in the next chunk; False at the end of the text."""
        for chunk in self.chunks:
            self.buffer += chunk
            return True
        self.ended = True
        return False

    @property
    def size(self) -> int:  # the offset of the end of the text come so far
        return self.base + len(self.buffer)

    def find_cuts(self) -> None:
        """The cuts in the lines come whole since the last look (all of them once the text has ended: a
        line's first word decides whether it starts a statement)."""
        buffer, base = self.buffer, self.base
        limit = len(buffer) if self.ended else buffer.rfind(b"\n", self.scanned - base) + 1
        if limit <= self.scanned - base:
            return
        self.cuts.extend(m.start() + base for m in _STATEMENT_START.finditer(buffer, self.scanned - base, limit))
        self.scanned = limit + base

    def cut_after(self, offset: int) -> int:
        """The first cut after `offset`, or the end of the text."""
        while True:
            cuts = self.cuts
            while cuts and cuts[0] <= offset:
                cuts.popleft()
            if cuts:
                return cuts[0]
            if self.ended:
                return self.size
            self.more()
            self.find_cuts()

    def compiled(self) -> Iterator[types.CodeType]:
        buffer = self.buffer
        # the head: the text through the module's `from __future__` line (its header comments and docstring)
        at = 0  # where the line may start that is not searched yet
        while (head := buffer.find(_FUTURE_LINE, at)) < 0:
            at = max(0, len(buffer) - len(_FUTURE_LINE) + 1)
            if not self.more():
                break
        if head < 0:
            yield compile(buffer.decode("utf-8"), self.filename, "exec", dont_inherit=True)
            buffer.clear()
            return
        start = line = flags = 0
        end = self.scanned = head + len(_FUTURE_LINE)
        self.find_cuts()
        while True:
            merges = 0
            while True:
                try:
                    code = compile(buffer[start - self.base:end - self.base].decode("utf-8"), self.filename, "exec",
                                   flags=flags, dont_inherit=True)
                    break
                except SyntaxError:
                    if self.ended and end == self.size:
                        # the module's own error, at its own positions; or, should the text compile whole
                        # where its pieces do not, its whole code for the caller to run afresh
                        raise UncutModule(compile(self.whole(), self.filename, "exec", dont_inherit=True)) from None
                    merges += 1
                    if merges == _MOST_MERGES:
                        while self.more():
                            pass
                        end = self.size
                    else:
                        end = self.cut_after(end)
            flags |= code.co_flags & _FUTURE_FLAGS
            yield _shifted(code, line)
            if self.ended and end == self.size:
                buffer.clear()
                return
            line += buffer.count(b"\n", start - self.base, end - self.base)
            start = end
            del buffer[: start - self.base]
            self.base = start
            end = self.cut_after(start)
            if end == start:  # the text ended with the piece before (known only once the last chunk was read)
                return


def _shifted(code: types.CodeType, lines: int) -> types.CodeType:
    """`code` (and the code inside it) as if its text began `lines` lines further down."""
    if lines == 0:
        return code
    consts = tuple(_shifted(c, lines) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + lines, co_consts=consts)
