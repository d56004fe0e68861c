"""Model prices and capabilities without importing litellm: litellm's own price table, read as the JSON file
its package ships (found with `importlib.util.find_spec`, which does not import it), and a file of the same
shape named by STATEWRIGHT_MODEL_PRICES, whose entries win (for a runner without litellm, or your own
prices). The litellm path prices the same calls from the same table, so both paths cost a call alike.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache

from .untrusted import read_json_file

MODEL_PRICES_ENV = "STATEWRIGHT_MODEL_PRICES"
_LITELLM_FILE = "model_prices_and_context_window_backup.json"
# a JSON file larger than this is not a price table (litellm's is a few megabytes)
_MAX_BYTES = 64 * 1024 * 1024


class ModelPrice:
    """What one model costs per token, and what it supports (None: the table does not say)."""

    __slots__ = ("cache_read", "function_calling", "input", "output", "response_schema")

    def __init__(self, entry: dict) -> None:
        self.input = _number(entry.get("input_cost_per_token"))
        self.output = _number(entry.get("output_cost_per_token"))
        cache_read = entry.get("cache_read_input_token_cost")
        self.cache_read = _number(cache_read) if cache_read is not None else self.input
        self.response_schema = entry.get("supports_response_schema") is True
        self.function_calling = entry.get("supports_function_calling") is True

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """The price of a call's tokens; `cached_tokens` of the prompt at the cached-input price."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cost = ((prompt_tokens - cached) * self.input + cached * self.cache_read
                + completion_tokens * self.output)
        return cost if cost > 0 else 0.0


def model_price(model: str) -> ModelPrice | None:
    """The table's entry for `model` ("provider/name"): under its whole name, else — for OpenAI and Azure,
    whose models the table lists without the provider — under its name alone."""
    table = model_price_table(os.environ.get(MODEL_PRICES_ENV) or "")
    found = table.get(model)
    if found is None and model.startswith(("openai/", "azure/")):
        found = table.get(model.split("/", 1)[1])
    return found


@lru_cache(maxsize=4)
def model_price_table(extra_file: str) -> dict[str, ModelPrice]:
    """Every priced model of litellm's table (when litellm is installed) and of `extra_file`, read once."""
    table: dict[str, ModelPrice] = {}
    for path in (_litellm_file(), extra_file or None):
        if path is None:
            continue
        for name, entry in _read(path).items():
            if isinstance(name, str) and isinstance(entry, (dict, ModelPrice)):
                table[name] = entry if isinstance(entry, ModelPrice) else ModelPrice(entry)
    return table


_PRICE_KEYS = ("input_cost_per_token", "output_cost_per_token", "litellm_provider")


def _priced(pairs: list[tuple[str, object]]) -> object:
    """An object of a price file as json reads it: a model's entry (it names a price or a provider) kept
    as its ModelPrice at once, anything else as a dict. So the file's thousands of entries are never all
    held as dicts (litellm's table of a few megabytes would take some twenty as dicts)."""
    entry = dict(pairs)
    return ModelPrice(entry) if any(key in entry for key in _PRICE_KEYS) else entry


def _litellm_file() -> str | None:
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for directory in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(directory, _LITELLM_FILE)
        if os.path.isfile(path):
            return path
    return None


def _read(path: str) -> dict:
    """A price file's entries; a file that cannot be read or is not a JSON object prices nothing (a cost
    is reported as 0.0 where no price is known, never as a failed call)."""
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return {}
        data = read_json_file(path, "the price file", object_pairs_hook=_priced)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _number(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1:
        return float(value)
    return 0.0
