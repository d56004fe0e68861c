"""Structured replies: find the JSON in what a model wrote, validate it, and convert typed values to JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json import encoder as json_encoder
from typing import Any

from .untrusted import NotAJsonNumber, check_text, json_decoder, json_depth_problem, scan_json_value

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript)?[ \t]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class ReplyError(Exception):
    """A reply stayed unusable after every retry; `last_error` says what was wrong with the last one."""

    def __init__(self, last_error: str, attempts: int) -> None:
        super().__init__(last_error)
        self.last_error = last_error
        self.attempts = attempts


def extract_json(text: str) -> tuple[Any, list[str]]:
    """The JSON value in a reply, and the repairs it took to get it ("fence", "prose", "trailing_comma",
    "control_characters": a line break or another control character written raw inside a string, which
    strict JSON forbids and small models often emit).

    Raises ValueError with a message meant for the model when the reply holds no JSON value — a
    BorderError when the reply is too large or its JSON nests too deeply (untrusted.py: checked before
    json reads it, so no reply can exhaust the stack).
    """
    check_text(text, "the reply")
    stripped = text.strip()
    if not stripped:
        raise ValueError("the reply was empty; a JSON value was expected")
    found = _loads(stripped)
    if found is not None:
        return found
    without_commas = _TRAILING_COMMA.sub(r"\1", stripped)
    if without_commas != stripped:
        found = _loads(without_commas, ["trailing_comma"])
        if found is not None:
            return found
    fence = _FENCE.search(stripped)
    if fence is not None:
        inner = fence.group(1).strip()
        found = _loads(inner, ["fence"]) or _loads(
            _TRAILING_COMMA.sub(r"\1", inner), ["fence", "trailing_comma"])
        if found is not None:
            return found
    found = _first_embedded(stripped)
    if found is not None:
        return found
    raise _not_json(fence.group(1).strip() if fence is not None else stripped)


def _loads(text: str, repairs: list[str] | None = None) -> tuple[Any, list[str]] | None:
    """`text` read as one JSON value: strictly, else with control characters allowed inside strings. None
    when it is not one, or nests too deeply to be read whole (the search in prose then says so)."""
    repairs = repairs or []
    if json_depth_problem(text, "the reply's JSON") is not None:
        return None
    try:
        return json_decoder(text).decode(text), repairs
    except ValueError:
        pass
    try:
        return json_decoder(text, strict=False).decode(text), [*repairs, "control_characters"]
    except ValueError:
        return None


def _not_json(text: str) -> ValueError:
    """What to tell a model whose reply has no usable JSON: where its JSON breaks, when it wrote some."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return ValueError("the reply holds no JSON value; reply with the JSON object only")
    try:
        scan_json_value(text, start, "the reply's JSON")  # raw_decode below reads no deeper than this did
    except ValueError as too_deep:
        return too_deep
    try:
        json_decoder(text, strict=False).raw_decode(text, start)
    except json.JSONDecodeError as exc:
        return ValueError(f"the reply's JSON is not valid: {exc.msg} at line {exc.lineno}, column {exc.colno}; "
                          "reply with the JSON object only")
    except NotAJsonNumber as exc:
        return ValueError(f"the reply's JSON is not valid: {exc}; reply with the JSON object only")
    return ValueError("the reply holds no JSON object or array; reply with the JSON object only")


def _first_embedded(text: str) -> tuple[Any, list[str]] | None:
    """The first JSON object or array embedded in prose, trying each opening bracket left to right. A value
    there that nests too deeply is the reply's JSON, refused (BorderError): the search does not go on into
    the brackets inside it. Each bracket is scanned first (untrusted.scan_json_value), and json reads only
    where a value starts, so a reply of many brackets costs linear time, not a failed decode per bracket."""
    candidates = [(text, ["prose"])]
    repaired_text = _TRAILING_COMMA.sub(r"\1", text)
    if repaired_text != text:
        candidates.append((repaired_text, ["prose", "trailing_comma"]))
    for candidate, repairs in candidates:
        # NaN and Infinity refused, and numbers too large (untrusted.json_decoder): chosen once per candidate
        decoders: tuple[tuple[json.JSONDecoder, list[str]], ...] = (
            (json_decoder(candidate), []), (json_decoder(candidate, strict=False), ["control_characters"]))
        for match in re.finditer(r"[{\[]", candidate):
            if scan_json_value(candidate, match.start(), "the reply's JSON") is None:
                continue  # no JSON value starts here: json would say so, at the cost of counting lines
            # strictly first, then leniently, at each bracket: an object whose string holds a raw line break
            # must not give way to a smaller object nested inside it
            for decoder, extra in decoders:
                try:
                    value, _end = decoder.raw_decode(candidate, match.start())
                except ValueError:
                    continue
                if isinstance(value, (dict, list)):
                    return value, [*repairs, *extra]
                break
    return None


def output_type_name(model: type) -> str:
    """The name the spec gives an output's type (its schema title), not the Python class that may carry
    another name (`VerdictType` for a `type Verdict`, which would clash with a name of the runtime)."""
    config = getattr(model, "model_config", None)
    title = config.get("title") if isinstance(config, dict) else None
    return title if isinstance(title, str) and title else model.__name__


# pydantic writes a JSON schema with about twenty Python frames per level of nesting; the deepest type a
# spec may declare (100 levels of records and lists, SW1020 and SW4015) needs more than the default limit
_SCHEMA_FRAMES = 25 * 100 + 500


def json_schema(model: type) -> dict[str, Any]:
    """The JSON schema of an output's pydantic model, for a type nested as deep as a spec allows: the
    recursion limit is raised while pydantic writes it (and put back), never lowered."""
    import sys

    limit = sys.getrecursionlimit()
    if limit < _SCHEMA_FRAMES:
        sys.setrecursionlimit(_SCHEMA_FRAMES)
    try:
        return model.model_json_schema()  # type: ignore[attr-defined,no-any-return]
    finally:
        if limit < _SCHEMA_FRAMES:
            sys.setrecursionlimit(limit)


def validate_typed(model: type, data: Any, wrapped: bool, *, strict: bool = False) -> Any:
    """Validate `data` against a pydantic model; a wrapped model yields its `value` field. `strict` takes
    no conversion at all (a person's answer: "yes" is no bool, 5 is no text); without it pydantic's lax mode
    converts what it can ("90" for an int: a model's reply, reported as the repair `coerced`).

    Raises ValueError with the validation errors spelled out for the model that produced `data`.
    """
    from pydantic import ValidationError

    variant = _variant_validator(model)
    if variant is not None:
        return variant(data, strict=strict, infer_name=True)
    if wrapped and not (isinstance(data, dict) and set(data) == {"value"}):
        data = {"value": data}
    try:
        instance = model.model_validate(data, strict=strict)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise ValueError(describe_validation_errors(exc, wrapped)) from None
    return instance.value if wrapped else instance


def type_adapter(annotation: Any) -> Any:
    """pydantic's TypeAdapter for a value of a declared annotation (an input's, a run variable's), taking
    no NaN or infinity for a float, as the models of declared types take none (a float is a finite number:
    the text "nan" or "1e400" pydantic's lax mode would convert is refused). A declared type's model has
    its own configuration, which a TypeAdapter may not override."""
    from pydantic import BaseModel, ConfigDict, TypeAdapter

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return TypeAdapter(annotation)
    return TypeAdapter(annotation, config=ConfigDict(allow_inf_nan=False))


def _variant_validator(model: Any) -> Any:
    """A variant output class's own validation (variants.VariantOutput), found on the class, so that this
    module need not import variants.py, which reads its errors from here."""
    return getattr(model, "__statewright_validate__", None) if isinstance(model, type) else None


# errors spelled out in full; past these, the other places that do not fit are only named
_DETAILED_ERRORS = 12


def describe_validation_errors(exc: Any, wrapped: bool = False) -> str:
    """Every place the value does not fit: the first few with what is wrong there, the rest by name."""
    lines: list[str] = []
    others = []
    for error in exc.errors():
        loc = [str(part) for part in error.get("loc", ())]
        if wrapped and loc and loc[0] == "value":
            loc = loc[1:]
        where = ".".join(loc) or "the value"
        if len(lines) == _DETAILED_ERRORS:
            others.append(where)
            continue
        got = _short(error.get("input"))
        lines.append(f"- {where}: {error.get('msg', 'invalid')} (got {got})")
    if others:
        lines.append(f"- and {len(others)} more that do not fit: {', '.join(others)}")
    return "the JSON does not match the required schema:\n" + "\n".join(lines)


def _short(value: Any) -> str:
    text = json.dumps(to_jsonable(value), ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_typed_reply(model: type, wrapped: bool, text: str) -> tuple[Any, list[str]]:
    """Extract and validate a typed reply; a wrapped scalar may come as bare text.

    A value that fits the type only after conversion ("90" for an int, 90.0 for an int) is accepted, and
    the conversion is reported as the repair "coerced"."""
    try:
        data, repairs = extract_json(text)
    except ValueError:
        if not wrapped:
            raise
        data, repairs = text.strip(), ["bare_text"]
    exact = _strict(model, data, wrapped)
    if exact is not None:
        return exact, repairs
    return validate_typed(model, data, wrapped), [*repairs, "coerced"]


def _strict(model: type, data: Any, wrapped: bool) -> Any:
    """The validated value when `data` fits the type with no conversion at all; None when it does not."""
    from pydantic import ValidationError

    variant = _variant_validator(model)
    if variant is not None:
        try:
            return variant(data, strict=True)
        except ValueError:
            return None
    if wrapped and not (isinstance(data, dict) and set(data) == {"value"}):
        data = {"value": data}
    try:
        instance = model.model_validate(data, strict=True)  # type: ignore[attr-defined]
    except ValidationError:
        return None
    return instance.value if wrapped else instance


def to_jsonable(value: Any) -> Any:
    """Plain JSON data for a value: pydantic models are dumped, tuples become lists, the rest is str()."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    dump = getattr(value, "model_dump", None)
    if dump is not None and not isinstance(value, type):
        return dump(mode="json", by_alias=True)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return str(value)


_SURROGATE = re.compile("[\ud800-\udfff]")
# What JSON leaves raw with ensure_ascii=False but a terminal may act on: DEL and the C1 controls (0x9b is
# an escape sequence's introducer on some terminals), line and paragraph separators, bidi marks (U+061C,
# U+200E, U+200F: Unicode's Bidi_Control with the overrides and isolates) and overrides.
_UNSAFE = re.compile("[\x7f-\x9f\u061c\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _encoder() -> Callable[[Any], str]:
    """`json.dumps(value, ensure_ascii=False, default=to_jsonable)`, its C encoder made once (JSONEncoder
    makes one on every call, a quarter of the cost of a small record). Without circular-reference markers:
    the values written are trees (what a border lets in is checked to be), and a shared table of markers
    could not be used from two threads at once."""
    make = getattr(json_encoder, "c_make_encoder", None)  # (typeshed does not list it)
    if make is None:  # (an interpreter without the C accelerator)
        return json.JSONEncoder(ensure_ascii=False, default=to_jsonable).encode
    encode = make(None, to_jsonable, json_encoder.encode_basestring, None, ": ", ", ", False, False, True)
    return lambda value: "".join(encode(value, 0))


def safe_json_dumps(value: Any, **options: Any) -> str:
    """JSON text that any sink can take: text stays readable (not \\u-escaped) unless it holds a lone
    surrogate — a half of a UTF-16 pair, which no encoding can write — in which case the whole value is
    written with ASCII escapes, losslessly. Characters a terminal could act on (DEL, C1 controls, bidi
    overrides, line separators; JSON escapes the C0 controls itself) are written as \\u escapes too, so
    printing the text shows them instead of obeying them. Anything not JSON-able goes through `to_jsonable`."""
    text = (_SAFE_ENCODER(value) if not options
            else json.dumps(value, ensure_ascii=False, default=to_jsonable, **options))
    if (text.isascii() and "\x7f" not in text) or _UNSAFE.search(text) is None:
        return text  # (every character the pattern finds but DEL is beyond ASCII; isascii() costs nothing)
    if _SURROGATE.search(text):
        return json.dumps(value, ensure_ascii=True, default=to_jsonable, **options)
    # outside strings JSON text is ASCII, so every match is inside a string, where \\uXXXX means the same
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def to_text(value: Any) -> str:
    """How an output reads inside a message: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable(value), ensure_ascii=False)


_SAFE_ENCODER = _encoder()  # one encoder for every call without options
