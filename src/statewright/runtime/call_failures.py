"""What can go wrong with a model call, whichever transport makes it: the failures every client knows,
which of them a retry can fix, a Retry-After header read, and a reply's body held to the reply cap as it
arrives."""

from __future__ import annotations

import time
import zlib
from typing import Any


class EmptyReply(Exception):
    """A reply with a 200 status and nothing in it; worth another try."""


class ReplyTooLarge(Exception):
    """A reply's body passed the reply cap (a runaway or hostile server, a gzip bomb); not retried."""


class CallDeadline(TimeoutError):
    """An attempt ran out of the time its call had left (a stalled or trickling server)."""


def call_cause(error: BaseException, kind: type[Any]) -> Any:
    """`error` or the first error of its chain that is a `kind` (an SDK wraps what its HTTP client
    raises, and litellm wraps that), else None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def call_status(error: BaseException) -> int | None:
    """The HTTP status a failed attempt's error carries, if any."""
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


def call_retryable(error: BaseException) -> bool:
    """What is worth another try whoever raised it: 408, 409, 429 and 5xx answers, connection errors,
    timeouts and replies with nothing in them; other 4xx answers are mistakes a retry repeats."""
    if isinstance(error, (TimeoutError, ConnectionError, EmptyReply)):
        return True
    status = call_status(error)
    return status is not None and (status in (408, 409, 429) or status >= 500)


def retry_after_seconds(value: Any) -> float | None:
    """A Retry-After header's value in seconds from now: a number of seconds, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        import email.utils  # an HTTP date, rarely sent

        parsed = email.utils.parsedate_to_datetime(value) if isinstance(value, str) else None
    except (TypeError, ValueError):
        return None
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - time.time())


class CappedBody:
    """A reply's body as it arrives, decompressed, refused (ReplyTooLarge) once it passes `cap` bytes.
    gzip and deflate are inflated here, never more than the cap allows at a time (a compressed megabyte
    can hold a gigabyte); a broken compressed stream is a ValueError."""

    def __init__(self, cap: int, encoding: str = "") -> None:
        self.cap = cap
        self.encoding = encoding.strip().lower()
        compressed = self.encoding in ("gzip", "x-gzip", "deflate")
        self.inflate = zlib.decompressobj(47) if compressed else None  # 47: a gzip or a zlib header
        self.parts: list[bytes] = []
        self.size = 0

    @property
    def done(self) -> bool:
        """Whether a compressed stream has ended (bytes after it are not part of the body)."""
        return self.inflate is not None and self.inflate.eof

    def feed(self, chunk: bytes) -> None:
        pending = chunk
        while pending and not self.done:
            if self.inflate is None:
                data, pending = pending, b""
            else:
                try:
                    data = self.inflate.decompress(pending, self.cap + 1 - self.size)
                except zlib.error as exc:
                    raise ValueError(f"the reply's {self.encoding} body is broken: {exc}") from None
                pending = self.inflate.unconsumed_tail
            self.size += len(data)
            if self.size > self.cap:
                raise ReplyTooLarge(f"the reply is larger than the cap of {self.cap:,} bytes (decompressed); "
                                    "it was not read further")
            self.parts.append(data)

    def whole(self) -> bytes:
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
