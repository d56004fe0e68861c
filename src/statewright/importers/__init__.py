"""Importers: other systems' machine specs (MetaAgent FSM JSON, AutoAgent workflow XML) as `.fsm` files.

The pipeline for every format: decode the file, read it with positions (errors are diagnostics on the
input), lint it, build a small model of the machine, repair it if asked, add a test skeleton and the
header, print it and pass it through the formatter, so that the result is canonical by construction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..diagnostics import Diagnostic, Diagnostics
from ..grammar.parser import read_source  # which refuses a file over the size limit (SW1021)
from .autoagent import import_autoagent
from .emit import render_machine
from .header import Header
from .metaagent import import_metaagent

FORMATS = ("metaagent", "autoagent")
DEFAULT_BOUND = 2


@dataclass
class ImportOutcome:
    """The imported `.fsm` text (None when the input has errors) and the diagnostics on the input."""

    text: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)  # what --repair changed, as listed in the header

    @property
    def ok(self) -> bool:
        return self.text is not None


def import_spec(source_format: str, data: bytes, path: str, *, repair: bool = False,
                bound: int = DEFAULT_BOUND) -> ImportOutcome:
    """Import one file of `source_format` ("metaagent" or "autoagent"); problems come back as diagnostics."""
    if source_format not in FORMATS:
        raise ValueError(f"unknown import format {source_format!r}; the formats are {', '.join(FORMATS)}")
    if bound < 1:
        raise ValueError(f"a loop bound must be at least 1, not {bound}")
    diags = Diagnostics()
    source = read_source(path, data, diags)
    if source is None:
        return ImportOutcome(None, diags.sorted())
    if not source.text.strip():
        diags.report("SW8003", "the file is empty", source.span(0, len(source.text)), label="nothing here",
                     help="a MetaAgent FSM is a JSON object" if source_format == "metaagent" else
                          "an AutoAgent workflow form is a <workflow> element")
        return ImportOutcome(None, diags.sorted())
    header = Header(source_format, path, hashlib.sha256(data).hexdigest(), repair, bound)
    build = import_metaagent if source_format == "metaagent" else import_autoagent
    machine = build(source, diags, repair_mode=repair, bound=bound, header=header)
    if machine is None or diags.has_errors:
        return ImportOutcome(None, diags.sorted())
    machine.header = header.lines()
    return ImportOutcome(render_machine(machine, path), diags.sorted(), header.repairs)


__all__ = ["DEFAULT_BOUND", "FORMATS", "ImportOutcome", "import_spec"]
