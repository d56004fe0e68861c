"""Untrusted JSON and values where they enter: a depth limit and a size limit, checked without recursion.

Model replies, tool results, a person's answers, a run's inputs, batch case lines, checkpoint rows, trace
lines, script and input files, imported specs: each is checked here before anything that recurses sees it
(`json.loads`, pydantic, redaction, templates, `json.dumps`). The check of JSON text is one iterative scan
that follows JSON's grammar as far as `json` would read (a superset of it: it accepts what `json` accepts,
and stops no earlier), counting how deep arrays and objects nest; the check of a Python value walks it with
a stack. Neither recurses, so a value nested a million levels deep is refused like one nested 101 levels.

A refusal is a `BorderError`, a ValueError whose message names what was read and the limit it broke, so
each border turns it into its own typed outcome: a reply is sent back and re-asked (then the step fails
with kind `output`), a batch case fails with kind `input`, an answer is refused and the run keeps waiting,
a checkpoint is damaged, a trace line is unreadable.

For a caller at a new border (a model client reading a provider's body, say):

    value = read_json(text, "the provider's reply")      # BorderError or json's ValueError
    check_value(result, "the tool's result")              # BorderError
    for line in read_lines(handle, MAX_RECORD_CHARS): ... # None for a line over the limit
"""

from __future__ import annotations

import json
import math
import operator
import os
import re
import sys
from array import array
from collections.abc import Callable, Iterator
from itertools import accumulate, repeat
from typing import IO, Any

# How deep arrays and objects may nest in a value that enters a run: far more than any schema a person
# writes, far less than what exhausts Python's stack in the code that reads it (json, pydantic, redaction).
MAX_DEPTH = 100
# Characters of one value (a reply, an answer, a tool's result, a case line, a script or inputs file).
MAX_VALUE_CHARS = 64 * 1024 * 1024
# The whitespace JSON allows around a value (RFC 8259). A line of JSON Lines that holds nothing else is
# blank; str.strip() takes more (the separators \x1c-\x1f, \x85, \x0b, \x0c and Unicode's spaces), and a
# line of those is text that is not JSON, to be reported, never skipped as if it were empty.
JSON_SPACE = " \t\n\r"
# What the runtime wrote itself and reads back (a checkpoint row, a trace line, a batch's result line):
# a value at the limits above, with the record around it.
MAX_RECORD_DEPTH = 2 * MAX_DEPTH
MAX_RECORD_CHARS = 256 * 1024 * 1024

# In UTF-8 no byte of a character other than the quote and the backslash is one of them, so JSON's strings
# are found in the bytes exactly as json finds them in the text.
_NOT_QUOTES_OR_BRACKETS = bytes(set(range(256)) - set(b'"[]{}'))  # the bytes to drop, to keep only those
_QUOTE = ord('"')
# of those kept: an opening bracket as the signed byte 1, a closing one as -1, a quote as 0
_BRACKETS = bytes.maketrans(b'[{]}"', b"\x01\x01\xff\xff\x00")
# For a value inside other text (a reply's prose), JSON's tokens as json reads them with strict=False
# (control characters allowed inside strings): whitespace, strings, numbers, literals, punctuation
_WS = r"[ \t\n\r]*"
# (unrolled — plain runs, then an escape and a plain run — so a long string keeps no state per character)
_STRING = r'"[^"\\]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\]*)*"'
_SCALAR = (rf"(?:{_STRING}|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
                     r"|true|false|null|NaN|Infinity|-Infinity)")
_TOKEN = re.compile(rf"{_WS}(?:(?P<atom>{_SCALAR})|(?P<punct>[\[\]{{}},:]))")
_KEY = re.compile(_STRING)
# the rest of a run of scalar members in one match: `, 1, "a"` in an array, `, "k": 1` in an object
_ARRAY_RUN = re.compile(rf"(?:{_WS},{_WS}{_SCALAR})*")
_OBJECT_RUN = re.compile(rf"(?:{_WS},{_WS}{_STRING}{_WS}:"
                                   rf"{_WS}{_SCALAR})*")
# what the scan of a value expects next
_VALUE, _FIRST, _NAME, _FIRST_NAME, _COLON, _NEXT = range(6)
_SKIP_CHUNK = 1024 * 1024


class BorderError(ValueError):
    """Untrusted data refused where it enters: nested too deep or too large, or (`check_value(...,
    finite=True)`) holding a number JSON has not. `what` names what was read ("the reply", "line 7 of
    cases.jsonl"), `limit` is "depth", "size" or "number"; the message says both, and how far the limit
    is, in words a person or a model can act on."""

    def __init__(self, what: str, limit: str, message: str) -> None:
        super().__init__(message)
        self.what = what
        self.limit = limit


def check_text(text: str | bytes, what: str, max_chars: int = MAX_VALUE_CHARS) -> None:
    """BorderError when `text` is longer than `max_chars` characters (bytes, for bytes)."""
    if len(text) > max_chars:
        raise BorderError(what, "size", f"{what} is too large: {len(text):,} characters, and at most "
                                        f"{max_chars:,} are read")


def _too_deep(what: str, max_depth: int) -> BorderError:
    return BorderError(what, "depth", f"{what} is nested too deeply: more than {max_depth} levels of lists and "
                                      f"objects, and at most {max_depth} are read")


def json_depth_problem(text: str | bytes, what: str, max_depth: int = MAX_DEPTH) -> BorderError | None:
    """The BorderError for JSON text that nests deeper than `max_depth` arrays and objects; None when it
    does not. Text that is not JSON may be refused too (json would refuse it anyway).

    Without a loop in Python per character, and in memory a small multiple of the text's: escaped
    backslashes are cut out, then escaped quotes (left to right, as json pairs them, so every quote left
    opens or closes a string); then everything but quotes and brackets is dropped (bytes.translate). What
    remains is read by a chain of C iterators: a running xor of the quotes says which brackets are inside
    a string, and the deepest level is the largest running sum of +1 per opening and -1 per closing bracket
    outside strings (itertools.accumulate). Where json reads a value its brackets are balanced up to where
    it stops, so no level it reaches is deeper than that sum.
    """
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return None  # too few brackets to nest that deep
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = data.translate(None, _NOT_QUOTES_OR_BRACKETS)
    inside = accumulate(map(operator.eq, kept, repeat(_QUOTE)), operator.xor)
    steps = map(operator.mul, array("b", kept.translate(_BRACKETS)), map(operator.not_, inside))
    if max(accumulate(steps), default=0) <= max_depth:
        return None
    return _too_deep(what, max_depth)


def scan_json_value(text: str, start: int, what: str, max_depth: int = MAX_DEPTH) -> int | None:
    """Where the JSON value at `start` in other text (a reply's prose) ends, as json's `raw_decode` with
    strict=False would read it; None when there is no JSON value there; BorderError when it nests deeper
    than `max_depth` arrays and objects.

    One loop over JSON's tokens with an explicit stack (a run of scalar members is one regex match): it
    reads exactly as far as json would, so trying every bracket of a text costs no more than json's own
    tries — less, as a failed try builds no error (a JSONDecodeError counts the lines before it)."""
    if text[start:start + 1] in ("", " ", "\t", "\n", "\r"):
        return None  # raw_decode reads a value right at `start`, not after whitespace
    stack: list[str] = []
    expect = _VALUE
    pos = start
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            return None
        atom, punct = match.group("atom"), match.group("punct")
        pos = match.end()
        if expect == _VALUE or expect == _FIRST:
            if punct == "[" or punct == "{":
                if len(stack) >= max_depth:
                    raise _too_deep(what, max_depth)
                stack.append(punct)
                expect = _FIRST if punct == "[" else _FIRST_NAME
                continue
            if atom is None and not (punct == "]" and expect == _FIRST):
                return None
            if atom is None:
                stack.pop()
        elif expect == _NAME or expect == _FIRST_NAME:
            if atom is not None and _KEY.fullmatch(atom):
                expect = _COLON
                continue
            if not (punct == "}" and expect == _FIRST_NAME):
                return None
            stack.pop()
        elif expect == _COLON:
            if punct != ":":
                return None
            expect = _VALUE
            continue
        else:  # after a member: a comma, or the end of its container
            if punct == ",":
                expect = _VALUE if stack[-1] == "[" else _NAME
                continue
            if punct != ("]" if stack[-1] == "[" else "}"):
                return None
            stack.pop()
        # a value ended
        if not stack:
            return pos
        run = _ARRAY_RUN if stack[-1] == "[" else _OBJECT_RUN
        pos = run.match(text, pos).end()  # type: ignore[union-attr]  # `*` always matches
        expect = _NEXT


class NotAJsonNumber(ValueError):
    """`NaN`, `Infinity` or `-Infinity` in JSON text: Python's json reads them, JSON (RFC 8259) has no such
    numbers. A value from outside that holds one is not JSON: let in, a NaN would make every comparison of
    a guard false, and every JSON sink after it (a result line, stdout) text that strict readers refuse.
    So is a number beyond a float's range (`1e400`, which Python reads as infinity) and one of more digits
    than Python converts (RFC 8259 lets a reader limit the range of its numbers)."""


def refuse_constant(name: str) -> Any:
    """json's `parse_constant`: NotAJsonNumber for the name it read."""
    raise NotAJsonNumber(f"{name} is not a JSON number (JSON has no NaN or Infinity): write a number, or null")


def _number_shown(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-10:]} ({len(text):,} characters)"


def int_digits_limit() -> int:
    """The most digits Python converts between an int and its text (sys.get_int_max_str_digits, 4300
    unless set otherwise); 0 when there is no limit (or no such limit on this Python)."""
    get = getattr(sys, "get_int_max_str_digits", None)
    return get() if get is not None else 0


def read_float(text: str) -> float:
    """json's `parse_float`: the number, or NotAJsonNumber for one beyond a float's range (`1e400`), which
    Python reads as infinity: let in, it would be an Infinity by another name."""
    value = float(text)
    if math.isinf(value):
        raise NotAJsonNumber(f"{_number_shown(text)} is too large a number (it would read as infinity, and JSON "
                             "has no Infinity; a number is at most about 1.8e308): write a smaller number, or null")
    return value


def read_int(text: str) -> int:
    """json's `parse_int`: the number, or NotAJsonNumber for one of more digits than Python converts (4300):
    said as such, not as Python's advice to raise its limit."""
    limit = int_digits_limit()
    digits = len(text) - text.startswith("-")
    if limit and digits > limit:
        raise NotAJsonNumber(f"{_number_shown(text)} is too long a number: {digits:,} digits, and at most "
                             f"{limit:,} are read; write a smaller number, or the digits as text")
    return int(text)


# Where text may hold a number `read_float` or `read_int` refuses: a run of 300 digits (from its start, so
# a long run costs one pass), or an exponent of three digits. Only such text pays for json calling them back
# for every number; the rest is read by json's own C code, and holds no number beyond a float's range.
_LONG_NUMBER = re.compile(r"(?<![0-9])[0-9]{300}|[eE][-+]?[0-9]{3}")
_NUMBER_HOOKS: dict[str, Any] = {"parse_float": read_float, "parse_int": read_int}
_DECODERS = {(strict, hooked): json.JSONDecoder(strict=strict, parse_constant=refuse_constant,
                                                **(_NUMBER_HOOKS if hooked else {}))
             for strict in (True, False) for hooked in (True, False)}


def json_decoder(text: str, *, strict: bool = True) -> json.JSONDecoder:
    """The decoder of JSON from outside for `text`: NaN and Infinity refused (NotAJsonNumber), and so is a
    number that would read as infinity (`1e400`) or has too many digits for Python to read. `strict=False`
    allows control characters inside strings. Made once; chosen by whether `text` may hold such a number."""
    return _DECODERS[strict, _LONG_NUMBER.search(text) is not None]


def read_json(text: str | bytes, what: str, *, max_depth: int = MAX_DEPTH, max_chars: int = MAX_VALUE_CHARS,
              strict: bool = True, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
              constants: bool = False) -> Any:
    """`json.loads(text)` for untrusted text: BorderError when it is too large or nested too deeply, json's
    own ValueError when it is not JSON (NotAJsonNumber for a NaN or an Infinity, a number beyond a float's
    range or one of more digits than Python reads, unless `constants`: a record the runtime wrote itself,
    which keeps what a Python caller gave it). `strict=False` allows
    control characters inside strings; `object_pairs_hook` is json's (each object as it is read: what a
    large file keeps of it)."""
    check_text(text, what, max_chars)
    problem = json_depth_problem(text, what, max_depth)
    if problem is not None:
        raise problem
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if constants:
        return json.loads(text, strict=strict, object_pairs_hook=object_pairs_hook)
    if object_pairs_hook is None:
        return json_decoder(text, strict=strict).decode(text)
    hooks = _NUMBER_HOOKS if _LONG_NUMBER.search(text) else {}
    return json.loads(text, strict=strict, object_pairs_hook=object_pairs_hook, parse_constant=refuse_constant,
                      **hooks)


def read_record(text: str | bytes, what: str) -> Any:
    """`read_json` with the limits of a record the runtime wrote itself and reads back (a checkpoint row, a
    trace line, a batch's result line, a Temporal run's event): a NaN a Python caller gave a run reads back
    as it was written."""
    return read_json(text, what, max_depth=MAX_RECORD_DEPTH, max_chars=MAX_RECORD_CHARS, constants=True)


def read_json_file(path: str, what: str, *, max_depth: int = MAX_DEPTH, max_chars: int = MAX_VALUE_CHARS,
                   object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """The JSON value of a file: OSError when it cannot be read, BorderError when it is too large (told by
    its size, before it is read) or nested too deeply, ValueError when it is not JSON."""
    with open(path, encoding="utf-8") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > 4 * max_chars:  # UTF-8: at most four bytes a character, so this many cannot fit
            raise BorderError(what, "size", f"{what} is too large: {size:,} bytes, and at most {max_chars:,} "
                                            "characters are read")
        text = handle.read()
    return read_json(text, what, max_depth=max_depth, max_chars=max_chars, object_pairs_hook=object_pairs_hook)


def check_value(value: Any, what: str, *, max_depth: int = MAX_DEPTH, max_chars: int = MAX_VALUE_CHARS,
                finite: bool = False) -> None:
    """BorderError when a Python value (a tool's result, an answer or an input given as data) nests deeper
    than `max_depth` containers, or holds more than `max_chars` characters of text and items in all, or a
    whole number of more digits than Python writes as text (`int_too_long`: a guard's `n * n`, say), or,
    with `finite`, a float that is NaN or infinite (for a value bound for JSON sinks: a tool's result).
    Mappings, sequences, sets and pydantic models are walked with a stack; anything else counts as one."""
    if isinstance(value, str):
        check_text(value, what, max_chars)
        return
    size = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (str, bytes, bytearray)):
            size += len(item)
        elif isinstance(item, (dict, list, tuple, set, frozenset)) or _is_model(item):
            depth += 1
            if depth > max_depth:
                raise _too_deep(what, max_depth)
            members = vars(item) if _is_model(item) else item
            size += len(members)
            if isinstance(members, dict):
                for key, member in members.items():
                    stack.append((key, depth))
                    stack.append((member, depth))
            else:
                stack.extend((member, depth) for member in members)
        else:
            if finite and isinstance(item, float) and not math.isfinite(item):
                shown = "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
                raise BorderError(what, "number", f"{what} holds {shown}, which JSON cannot carry (JSON has no NaN "
                                                  "or Infinity)")
            if isinstance(item, int) and item.bit_length() > _SHORT_INT_BITS and int_too_long(item):
                limit = int_digits_limit()
                raise BorderError(what, "size", f"{what} holds a whole number of more than {limit:,} digits, and "
                                                f"at most {limit:,} can be written (as JSON, or as text)")
            size += 1
        if size > max_chars:
            raise BorderError(what, "size", f"{what} is too large: more than {max_chars:,} characters and items, "
                                            f"and at most {max_chars:,} are read")


# An int of at most this many bits has fewer digits than any limit Python allows (640, its least but 0)
_SHORT_INT_BITS = 2000


def int_too_long(value: int) -> bool:
    """Whether `value` has more digits than Python converts to text (int_digits_limit): such an int cannot
    be written as JSON (a checkpoint, a trace, a result) or rendered, so a run never holds one."""
    limit = int_digits_limit()
    return bool(limit) and abs(value) >= 10 ** limit


def refused_values(values: dict[str, Any]) -> dict[str, str]:
    """Why `check_value` refuses each of `values` it refuses, by name."""
    refused = {}
    for name, value in values.items():
        try:
            check_value(value, "the value")
        except BorderError as exc:
            refused[name] = str(exc)
    return refused


def shown_within_limits(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each one `check_value` refuses replaced by a note saying why: what a run that was
    refused its inputs records of them (its trace, its result) without reading what it refused."""
    refused = refused_values(values)
    return {name: f"[not shown: {refused[name]}]" if name in refused else value for name, value in values.items()}


def _is_model(item: Any) -> bool:
    return hasattr(item, "model_dump") and not isinstance(item, type) and hasattr(item, "__dict__")


def read_lines(handle: IO[str], max_chars: int) -> Iterator[str | None]:
    """The lines of a text file, each at most `max_chars` characters long (its line break aside); None in
    place of a longer line, whose text is skipped a chunk at a time, never held whole."""
    while True:
        line = handle.readline(max_chars + 1)
        if not line:
            return
        if len(line) <= max_chars or line.endswith("\n"):
            yield line
            continue
        while True:
            rest = handle.readline(_SKIP_CHUNK)
            if not rest or rest.endswith("\n"):
                break
        yield None
