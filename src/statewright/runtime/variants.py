"""Variant outputs: a state whose output is exactly one of several declared types (`output Answer | Escalation`).

The model is asked for `{"value": {"Answer": {...}}}`: a root object (structured-output APIs want one, not
a bare `anyOf`) whose `value` is one of the variants, each an object with a single key naming its type, so
the variant is decided by the model before its fields and the schema offers exactly the variants. The value
a run keeps — what guards, templates, listeners and results see — is the variant itself, an instance of its
declared type; the name travels alongside it only where the value is stored (checkpoints) or shown to a model
(`tagged`).

Generated code declares one `VariantBranch` subclass per type used as a variant (`value: Answer =
Field(alias="Answer")`) and one `VariantOutput` subclass per state (`value: AnswerVariant | ...`).
"""

from __future__ import annotations

import typing
import weakref
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .structured import describe_validation_errors


class VariantBranch(BaseModel):
    """One variant as the model writes it: an object whose one key is the type's name."""

    model_config = ConfigDict(extra="forbid")


class VariantOutput(BaseModel):
    """A variant output as the model writes it: `{"value": <one VariantBranch>}`."""

    @classmethod
    def __statewright_validate__(cls, data: Any, *, strict: bool = False, infer_name: bool | None = None) -> Any:
        """How structured.validate_typed validates a variant output (see validate_variant)."""
        return validate_variant(cls, data, strict=strict, infer_name=infer_name)


_cache: weakref.WeakKeyDictionary[type, dict[str, type]] = weakref.WeakKeyDictionary()


def variant_branches(model: type) -> dict[str, type]:
    """The branch class of each variant of a VariantOutput class, by type name, in declaration order."""
    found = _cache.get(model)
    if found is None:
        annotation = model.model_fields["value"].annotation  # type: ignore[attr-defined]
        found = {}
        for branch in typing.get_args(annotation) or (annotation,):
            field = next(iter(branch.model_fields.values()))
            found[field.alias] = branch
        _cache[model] = found
    return found


def variant_name(value: Any) -> str | None:
    """The declared type a variant value is (the title of its model class); None for anything else."""
    if not isinstance(value, BaseModel):
        return None
    title = type(value).model_config.get("title")
    return title if isinstance(title, str) else type(value).__name__


def tagged(value: Any) -> Any:
    """A variant value with its type's name, `{"Answer": {...}}`: how it is stored and shown to models."""
    name = variant_name(value)
    if name is None:
        return value
    return {name: value.model_dump(mode="json", by_alias=True)}


def validate_variant(model: type, data: Any, *, strict: bool = False, infer_name: bool | None = None) -> Any:
    """The variant in `data` (`{"value": {"Answer": {...}}}`, or `{"Answer": {...}}`) as its declared type.

    Raises ValueError with what is wrong, worded for the model that wrote it: the errors of the one variant
    it names, or the variants it could name. A lax (not strict) reading also takes the fields of a variant
    without its name when they fit exactly one variant; `infer_name` decides that apart from `strict` (a
    person's answer: its fields are read strictly, its variant may go unnamed)."""
    branches = variant_branches(model)
    if isinstance(data, dict) and set(data) == {"value"}:
        data = data["value"]
    names = list(branches)
    shape = " or ".join(f'{{"value": {{"{n}": {{...}}}}}}' for n in names)
    if isinstance(data, dict) and len(data) == 1 and next(iter(data)) in branches:
        name = next(iter(data))
        try:
            branch = branches[name].model_validate(data, strict=strict)  # type: ignore[attr-defined]
        except ValidationError as exc:
            raise ValueError(_describe(exc, name)) from None
        return branch.value
    if (not strict if infer_name is None else infer_name) and isinstance(data, dict):
        fits = []
        for name, branch in branches.items():
            try:
                fits.append(branch.model_validate({name: data}, strict=strict).value)  # type: ignore[attr-defined]
            except ValidationError:
                continue
        if len(fits) == 1:
            return fits[0]
    raise ValueError(f"the JSON must name its variant: {shape}")


def _describe(exc: ValidationError, name: str) -> str:
    return describe_validation_errors(exc).replace("the JSON does not match the required schema",
                                                   f"the JSON does not match the schema of {name}", 1)
