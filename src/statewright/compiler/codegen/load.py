"""Machine modules executed in memory: what `statewright run`, `test` and the Python API run.

The text is a runner's machine part importing the installed runtime (`statewright.runtime`); it is
compiled under a name that says where it came from, registered with linecache (so a traceback through a
guard shows the generated line),
and executed as a module of its own. Modules are kept per text: loading the same machine twice in a
process compiles it once. The text is kept as UTF-8 bytes (codegen's load_machine renders it into bytes):
a str holding one character past Latin-1 takes two or four bytes a character, and every generated
module has one in its first line.

A module is compiled and executed a few top-level statements at a time, in order, into one namespace:
the same code, but CPython builds a syntax tree only for the statements in hand, not for the whole
module at once (some 40 bytes of memory a byte of text, 180 MB for the runner of a 1 MB spec). The
generated module writes each state, agent, tool and test as a statement of its own (render.py), so no
piece grows with the machine.
"""

from __future__ import annotations
import __future__

import hashlib
import linecache
import re
import sys
import threading
import types
import zlib
from collections.abc import Callable, Iterator

_MODULE_PREFIX = "statewright.machines.m_"


def load_machine_module(text: str | bytes | bytearray, source_path: str) -> types.ModuleType:
    """The module of `text` (a str, or its UTF-8 bytes), executed once in this process. A bytearray is
    let go of as its statements are compiled (it ends empty): the caller hands the text over."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    del text
    digest = hashlib.sha256(data).hexdigest()[:20]
    name = _MODULE_PREFIX + digest
    module = _LOADED.get(name)
    if module is not None:
        return module
    # one load at a time: a module is in sys.modules while its pieces run, and another thread must not
    # take it half made
    with _LOADING:
        module = _LOADED.get(name)
        if module is None:
            module = _LOADED[name] = _load(data, source_path, name, digest)
    return module


_LOADED: dict[str, types.ModuleType] = {}  # by name: the modules whose every statement has run
_LOADING = threading.Lock()


def _load(data: bytes | bytearray, source_path: str, name: str, digest: str) -> types.ModuleType:
    # Not a <name>: linecache gives lines lazily only to other names. The text is kept compressed (a
    # generated module compresses to some twentieth of it), and decompressed, decoded and split into lines
    # when a traceback first asks (a list of lines takes three times the text's memory).
    filename = f"statewright-machine:{source_path}:{digest[:12]}"
    kept = zlib.compress(data)

    def whole() -> str:
        return zlib.decompress(kept).decode("utf-8")

    linecache.cache[filename] = (whole,)
    module = _module(name, source_path, filename)
    try:
        try:
            for code in compiled_pieces(data, filename, whole):
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
    deleted), so that the text is not held beside the module it makes: `whole` then gives the whole text,
    should it be needed again (a module that compiles only whole).

    A piece is cut where a line could start a statement; one that does not compile alone (a line of a
    string that starts like a statement) takes in the next piece until it does — only then is it
    whole, since a cut inside a string or a bracket leaves it unfinished — and past _MOST_MERGES the rest
    of the text is one piece. Future imports hold for the pieces after them, as in one module.

    The cuts are found in the bytes, each at the start of a line; a piece is decoded before it is compiled
    (compiled as bytes, a comment in its first lines could name another encoding)."""
    text = text.encode("utf-8") if isinstance(text, str) else text
    if whole is None:
        if isinstance(text, bytearray):
            raise ValueError("a bytearray is emptied as it is compiled: give `whole`")
        whole = bytes(text).decode
    head = text.find(_FUTURE_LINE)
    if head < 0:
        yield compile(text.decode("utf-8"), filename, "exec", dont_inherit=True)
        return
    size = len(text)
    cuts = [m.start() for m in _STATEMENT_START.finditer(text, head + len(_FUTURE_LINE))]
    cuts.append(size)
    i = 0  # cuts[i]: the first cut after the piece in hand
    flags = start = line = 0
    base = 0  # the offset in the whole text of text[0] (a bytearray's consumed part is deleted)
    end = head + len(_FUTURE_LINE)
    while True:
        merges = 0
        while True:
            try:
                code = compile(text[start - base:end - base].decode("utf-8"), filename, "exec", flags=flags,
                               dont_inherit=True)
                break
            except SyntaxError:
                if end == size:
                    # the module's own error, at its own positions; or, should the text compile whole
                    # where its pieces do not, its whole code for the caller to run afresh
                    raise UncutModule(compile(whole(), filename, "exec", dont_inherit=True)) from None
                merges += 1
                if merges == _MOST_MERGES:
                    end = size
                else:
                    while cuts[i] <= end:
                        i += 1
                    end = cuts[i]
        flags |= code.co_flags & _FUTURE_FLAGS
        yield _shifted(code, line)
        if end == size:
            if isinstance(text, bytearray):
                text.clear()
            return
        line += text.count(b"\n", start - base, end - base)
        start = end
        if isinstance(text, bytearray):
            del text[: start - base]
            base = start
        while cuts[i] <= start:
            i += 1
        end = cuts[i]


def _shifted(code: types.CodeType, lines: int) -> types.CodeType:
    """`code` (and the code inside it) as if its text began `lines` lines further down."""
    if lines == 0:
        return code
    consts = tuple(_shifted(c, lines) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + lines, co_consts=consts)
