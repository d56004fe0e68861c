"""The comment header of an imported file: where it came from, how, and how it differs from the original."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

_WIDTH = 104  # the text after '# ', so that a header line stays within the project's 110 columns

FORMAT_NAMES = {"metaagent": "MetaAgent", "autoagent": "AutoAgent", "crewai": "CrewAI"}
FORMAT_KINDS = {"metaagent": "file", "autoagent": "file", "crewai": "project"}


@dataclass
class Header:
    source_format: str  # "metaagent", "autoagent" or "crewai"
    path: str  # the input as the header names it: relative to the output, or its file name
    sha256: str
    repair: bool
    bound: int
    differences: list[str] = field(default_factory=list)  # what no importer can avoid
    stand_ins: list[str] = field(default_factory=list)  # fallbacks until the language has the construct
    repairs: list[str] = field(default_factory=list)  # what --repair changed
    notes: list[str] = field(default_factory=list)  # the notes the importer printed on the original
    sources: list[str] = field(default_factory=list)  # the files of a project the hash covers
    part: str = ""  # which part of the original this file holds, when the import wrote several files

    def lines(self) -> list[str]:
        """The header as comment lines, without the leading '# ' (an empty string is a bare '#')."""
        mode = (f"repair (--repair, loops bounded with max {self.bound})" if self.repair else
                "literal (nothing is repaired: `statewright check` reports the original's own problems)")
        out = _wrap(f"Imported from the {FORMAT_NAMES[self.source_format]} {FORMAT_KINDS[self.source_format]} "
                    f"{self.path} by `statewright import {self.source_format}`.")
        out.append(f"sha256 {self.sha256}")
        if self.sources:
            out += _wrap("(of " + ", ".join(self.sources) + ", in that order)")
        if self.part:
            out += _wrap(self.part)
        out += _wrap(f"Mode: {mode}.")
        sections = [
            ("Differences from the original that no importer can avoid:", self.differences),
            ("Stand-ins until the language has the construct:", self.stand_ins),
            ("Repairs:", self.repairs),
            ("Notes on the original (printed by the import too):", self.notes),
        ]
        for title, items in sections:
            if items:
                out += ["", title]
                for item in items:
                    out += _wrap(item, "- ", "  ")
        return out


def _wrap(text: str, first: str = "", rest: str = "  ") -> list[str]:
    return textwrap.wrap(text, _WIDTH, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False)
