"""File names made from names a run is given: a run id, a batch case's id, a test block's name.

Such a name is any text (`--run-id`, a case line's "id", a test's string), and becomes a directory
(`.statewright/runs/<run id>/workspace`), a checkpoint's run id and a trace file (`<case id>.jsonl`,
`<test name>.jsonl`). A name that is safe as it is (letters, digits, `_`, `-` and inner dots, at most 100
characters) is used unchanged; any other is cleaned and cut to fit, and keeps a short hash of the whole
name, so two names never share a file: `a/b` and `a b` had both become `a_b` (one case's run resumed as the
other's, one trace for two tests), and a name of 300 characters was a file name the system refused.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME_CHARS = 100  # well under the 255 bytes a file name may have, with room for ".jsonl"
_SAFE = re.compile(r"[A-Za-z0-9_-](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_HASH_CHARS = 10


def file_name_for(name: str, fallback: str, separator: str = "_") -> str:
    """`name` as one file name, the same every time: itself when it is safe, else cleaned (each run of
    other characters one `separator`), cut, and followed by `-` and a hash of `name` (`fallback` when
    nothing is left of it)."""
    if len(name) <= MAX_NAME_CHARS and _SAFE.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    cleaned = _UNSAFE.sub(separator, name).strip("." + separator)[: MAX_NAME_CHARS - _HASH_CHARS - 1]
    return f"{cleaned.rstrip('.') or fallback}-{digest}"
