"""The text of a generated module as it is written and read back, never one str and never held whole.

UTF-8, in segments kept compressed (or as they are).

render.py writes a machine's module with a ModuleWriter as its template goes, leaving slots for what it
can only write at the end (the imports, SOURCE_MAP) and filling them then; load.py reads the ModuleText
back a chunk at a time, compiling statements as they come.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator

CHUNK_BYTES = 1 << 16  # what a module's text is read in


class ModuleText:
    """A module's UTF-8 text in segments, each kept compressed (zlib) or as it is: codegen renders a
    machine's module for loading into one (render.render_installed_module), compressed as it is written,
    so that its text is never held whole; `chunks` gives it back a piece at a time, in order."""

    __slots__ = ("segments",)

    def __init__(self) -> None:
        self.segments: list[tuple[bool, bytes]] = []  # (compressed, data)

    @classmethod
    def of(cls, data: bytes | bytearray) -> ModuleText:
        text = cls()
        text.segments.append((True, zlib.compress(data)))
        return text

    def chunks(self) -> Iterator[bytes]:
        """The text, CHUNK_BYTES at most at a time."""
        for compressed, data in self.segments:
            if not compressed:
                yield from (data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES))
                continue
            unpacker = zlib.decompressobj()
            rest = data
            while rest:
                yield unpacker.decompress(rest, CHUNK_BYTES)
                rest = unpacker.unconsumed_tail
            yield unpacker.flush()

    def digest(self) -> str:
        hashed = hashlib.sha256()
        for chunk in self.chunks():
            hashed.update(chunk)
        return hashed.hexdigest()

    def __bytes__(self) -> bytes:
        return b"".join(self.chunks())

    def text(self) -> str:
        return bytes(self).decode("utf-8")


class ModuleWriter:
    """The module's text as it is written: UTF-8, in segments (compressed, or as they are), with empty
    segments for the slots."""

    def __init__(self, compressed: bool) -> None:
        self.compressed = compressed
        self.module = ModuleText()
        self.pending = bytearray()
        self.packed: list[bytes] = []
        self.packer = zlib.compressobj() if compressed else None

    def write(self, text: str) -> None:
        self.pending += text.encode("utf-8")
        if len(self.pending) >= CHUNK_BYTES:
            self._spill()

    def _spill(self) -> None:
        data = bytes(self.pending)
        self.pending.clear()
        self.packed.append(self.packer.compress(data) if self.packer is not None else data)

    def _close_segment(self) -> None:
        self._spill()
        if self.packer is not None:
            self.packed.append(self.packer.flush())
            self.packer = zlib.compressobj()
        data = b"".join(self.packed)
        self.packed = []
        if data:
            self.module.segments.append((self.compressed, data))

    def slot(self) -> int:
        self._close_segment()
        self.module.segments.append((False, b""))
        return len(self.module.segments) - 1

    def fill(self, index: int, lines: Iterable[str]) -> None:
        """The slot's text: `lines`, a line break between each two."""
        packer = zlib.compressobj() if self.compressed else None
        packed = []
        for i, line in enumerate(lines):
            data = (b"\n" if i else b"") + line.encode("utf-8")
            packed.append(packer.compress(data) if packer is not None else data)
        if packer is not None:
            packed.append(packer.flush())
        self.module.segments[index] = (self.compressed, b"".join(packed))

    def close(self) -> ModuleText:
        self._close_segment()
        return self.module
