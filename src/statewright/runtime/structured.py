"""Structured replies: find the JSON in what a model wrote, validate it, and convert typed values to JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .client import ModelResponse

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript)?[ \t]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_DECODER = json.JSONDecoder()


class ReplyError(Exception):
    """A reply stayed unusable after every retry; `last_error` says what was wrong with the last one."""

    def __init__(self, last_error: str, attempts: int) -> None:
        super().__init__(last_error)
        self.last_error = last_error
        self.attempts = attempts


def extract_json(text: str) -> tuple[Any, list[str]]:
    """The JSON value in a reply, and the repairs it took to get it ("fence", "prose", "trailing_comma").

    Raises ValueError with a message meant for the model when the reply holds no JSON value.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the reply was empty; a JSON value was expected")
    try:
        return json.loads(stripped), []
    except ValueError:
        pass
    without_commas = _TRAILING_COMMA.sub(r"\1", stripped)
    if without_commas != stripped:
        try:
            return json.loads(without_commas), ["trailing_comma"]
        except ValueError:
            pass
    fence = _FENCE.search(stripped)
    if fence is not None:
        inner = fence.group(1).strip()
        try:
            return json.loads(inner), ["fence"]
        except ValueError:
            repaired = _TRAILING_COMMA.sub(r"\1", inner)
            try:
                return json.loads(repaired), ["fence", "trailing_comma"]
            except ValueError:
                pass
    found = _structured_first_embedded(stripped)
    if found is not None:
        return found
    raise ValueError("the reply holds no JSON value; reply with the JSON object only")


def _structured_first_embedded(text: str) -> tuple[Any, list[str]] | None:
    """The first JSON object or array embedded in prose, trying each opening bracket left to right."""
    candidates = [(text, ["prose"])]
    repaired_text = _TRAILING_COMMA.sub(r"\1", text)
    if repaired_text != text:
        candidates.append((repaired_text, ["prose", "trailing_comma"]))
    for candidate, repairs in candidates:
        for match in re.finditer(r"[{\[]", candidate):
            try:
                value, _end = _DECODER.raw_decode(candidate, match.start())
            except ValueError:
                continue
            if isinstance(value, (dict, list)):
                return value, repairs
    return None


def validate_typed(model: type, data: Any, wrapped: bool) -> Any:
    """Validate `data` against a pydantic model; a wrapped model yields its `value` field.

    Raises ValueError with the validation errors spelled out for the model that produced `data`.
    """
    from pydantic import ValidationError

    from .variants import VariantOutput, validate_variant

    if isinstance(model, type) and issubclass(model, VariantOutput):
        return validate_variant(model, data)
    if wrapped and not (isinstance(data, dict) and set(data) == {"value"}):
        data = {"value": data}
    try:
        instance = model.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise ValueError(describe_validation_errors(exc, wrapped)) from None
    return instance.value if wrapped else instance


def describe_validation_errors(exc: Any, wrapped: bool = False) -> str:
    lines = []
    for error in exc.errors()[:12]:
        loc = [str(part) for part in error.get("loc", ())]
        if wrapped and loc and loc[0] == "value":
            loc = loc[1:]
        where = ".".join(loc) or "the value"
        got = _structured_short(error.get("input"))
        lines.append(f"- {where}: {error.get('msg', 'invalid')} (got {got})")
    return "the JSON does not match the required schema:\n" + "\n".join(lines)


def _structured_short(value: Any) -> str:
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
    exact = _structured_strict(model, data, wrapped)
    if exact is not None:
        return exact, repairs
    return validate_typed(model, data, wrapped), [*repairs, "coerced"]


def _structured_strict(model: type, data: Any, wrapped: bool) -> Any:
    """The validated value when `data` fits the type with no conversion at all; None when it does not."""
    from pydantic import ValidationError

    from .variants import VariantOutput, validate_variant

    if isinstance(model, type) and issubclass(model, VariantOutput):
        try:
            return validate_variant(model, data, strict=True)
        except ValueError:
            return None
    if wrapped and not (isinstance(data, dict) and set(data) == {"value"}):
        data = {"value": data}
    try:
        instance = model.model_validate(data, strict=True)  # type: ignore[attr-defined]
    except ValidationError:
        return None
    return instance.value if wrapped else instance


def ask_until_valid(
    call: Callable[[list[dict[str, Any]]], ModelResponse],
    messages: list[dict[str, Any]],
    parse: Callable[[str], tuple[Any, list[str]]],
    retries: int,
    on_repair: Callable[[list[str]], None] | None = None,
    on_reask: Callable[[int, str], None] | None = None,
) -> tuple[Any, ModelResponse]:
    """Call, parse, and on a bad reply feed the error back and ask again, `retries` more times at most.

    The bad reply and the error message go into the conversation of the retry only; the caller decides
    what to keep. `on_reask(attempt, error)` hears of each reply sent back (attempt counts from 1).
    Raises ReplyError when every attempt failed.
    """
    conversation = messages
    last_error = ""
    for attempt in range(retries + 1):
        response = call(conversation)
        try:
            value, repairs = parse(response.content)
        except ValueError as exc:
            last_error = str(exc)
            if attempt == retries:
                break
            if on_reask is not None:
                on_reask(attempt + 1, last_error)
            conversation = conversation + [
                {"role": "assistant", "content": response.content},
                {"role": "user", "content": f"Your reply could not be used: {last_error}\n"
                                            "Reply again with only the JSON value, matching the schema."},
            ]
            continue
        if repairs and on_repair is not None:
            on_repair(repairs)
        return value, response
    raise ReplyError(last_error, retries + 1)


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


def safe_json_dumps(value: Any, **options: Any) -> str:
    """JSON text that any sink can take: text stays readable (not \\u-escaped) unless it holds a lone
    surrogate — a half of a UTF-16 pair, which no encoding can write — in which case the whole value is
    written with ASCII escapes, losslessly. Anything not JSON-able goes through `to_jsonable`."""
    text = json.dumps(value, ensure_ascii=False, default=to_jsonable, **options)
    if _SURROGATE.search(text):
        text = json.dumps(value, ensure_ascii=True, default=to_jsonable, **options)
    return text


def to_text(value: Any) -> str:
    """How an output reads inside a message: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable(value), ensure_ascii=False)
