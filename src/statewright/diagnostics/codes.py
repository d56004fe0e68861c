"""The registry of diagnostic codes. Codes are stable: never renumber, never reuse a retired code.

SW1xxx syntax · SW2xxx names · SW3xxx machine structure · SW4xxx types and guards ·
SW5xxx templates · SW6xxx test blocks · SW7xxx warnings about unused or dead parts ·
SW8xxx importers (`statewright import`: SW80xx errors in the input, SW81xx lint notes; an AutoAgent agent
form's own are SW8040-SW8049 errors and SW8050-SW8059 lint notes) · SW9xxx internal.
"""

from __future__ import annotations

from .registry import importers, internal, names, structure, syntax, templates_and_tests, types, variables
from .registry.entry import CodeInfo

_ALL = [*syntax.CODES, *names.CODES, *structure.CODES, *types.CODES, *templates_and_tests.CODES,
        *importers.CODES, *variables.CODES, *internal.CODES]

CODES: dict[str, CodeInfo] = {info.code: info for info in _ALL}
assert len(CODES) == len(_ALL), "duplicate diagnostic code in the registry"

__all__ = ["CODES", "CodeInfo"]
