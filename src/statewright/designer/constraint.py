"""Whether the designer's drafts are constrained to the grammar at decoding time, and how that is asked for.

With a constraint the server's decoder can only emit text the statewright grammar allows, so a draft
cannot have a syntax error and every repair round goes to meaning. Only some servers take a grammar; `auto`
uses one for the models listed as served by one (GRAMMAR_MODEL_PREFIXES, or $STATEWRIGHT_GRAMMAR_MODELS),
`grammar` always sends one, `none` never does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CONSTRAIN_MODES = ("auto", "grammar", "none")

# litellm model prefixes whose servers take a GBNF grammar in the `grammar` field of a chat completion
# request: `llamafile/` is litellm's route to llama.cpp's OpenAI-compatible server.
GRAMMAR_MODEL_PREFIXES: tuple[str, ...] = ("llamafile/",)
GRAMMAR_MODELS_ENV = "STATEWRIGHT_GRAMMAR_MODELS"


@dataclass(frozen=True)
class Constraint:
    """What a design session does: `mode` is "grammar" or "none"; `reason` says why, for the log and trace."""

    mode: str
    requested: str
    reason: str

    @property
    def grammar(self) -> bool:
        return self.mode == "grammar"


def grammar_model_prefixes() -> tuple[str, ...]:
    """The model prefixes `auto` sends a grammar to: $STATEWRIGHT_GRAMMAR_MODELS (comma-separated) when
    set, else GRAMMAR_MODEL_PREFIXES."""
    configured = os.environ.get(GRAMMAR_MODELS_ENV)
    if configured is None:
        return GRAMMAR_MODEL_PREFIXES
    return tuple(p.strip() for p in configured.split(",") if p.strip())


def choose_constraint(requested: str, model: str, prefixes: Sequence[str] | None = None) -> Constraint:
    if requested not in CONSTRAIN_MODES:
        raise ValueError(f"constrain must be one of {', '.join(CONSTRAIN_MODES)}, not {requested!r}")
    if requested == "grammar":
        return Constraint("grammar", requested, "asked for")
    if requested == "none":
        return Constraint("none", requested, "asked for")
    known = tuple(prefixes) if prefixes is not None else grammar_model_prefixes()
    match = next((p for p in known if model.startswith(p)), None)
    if match is not None:
        return Constraint("grammar", requested, f"the model's server takes a grammar (prefix {match!r})")
    return Constraint("none", requested, f"no server known to take a grammar serves {model!r} "
                      f"(set {GRAMMAR_MODELS_ENV} or use --constrain grammar)")


def grammar_request_fields() -> dict[str, Any]:
    """The provider-specific request fields that carry the grammar: llama.cpp's `grammar`, with the GBNF in
    its draft layout (no comments, bounded whitespace: `statewright grammar --format gbnf --draft`)."""
    from ..grammar.decoding import export_constraint

    return {"grammar": export_constraint("gbnf", draft=True)}
