"""How guards and tool-call arguments read a field: of a typed output (a pydantic model) or of a tool's dict.

Both faces go through `guard_attribute` wherever the field's owner is not statically a declared type, so a
guard behaves the same (values and errors alike) in `statewright run` and in a generated runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel


def guard_attribute(value: Any, name: str) -> Any:
    """`value.name` as the language means it: a key of a dict (tool results), else a model's field.

    A model field whose name cannot be a Python attribute (`class`, `_id`, `json`) is stored under another
    attribute with the spec's name as its alias; it is found here by that alias.
    """
    if isinstance(value, Mapping):
        if name in value:
            return value[name]
        fields = ", ".join(repr(str(k)) for k in value)
        raise AttributeError(f"no field {name!r} in the value (its fields: {fields or 'none'})")
    if isinstance(value, BaseModel):
        for attribute, info in type(value).model_fields.items():
            if info.alias == name:
                return getattr(value, attribute)
    return getattr(value, name)
