"""One entry of the registry: a code, its title, its severity and how `statewright explain` teaches it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class _Sev(str, Enum):  # mirrors diagnostic.Severity without importing it (avoids a cycle)
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class CodeInfo:
    code: str
    title: str
    severity: _Sev
    explanation: str
    wrong: str = ""
    right: str = ""


def _e(code: str, title: str, explanation: str, wrong: str = "", right: str = "") -> CodeInfo:
    return CodeInfo(code, title, _Sev.ERROR, explanation, wrong, right)


def _w(code: str, title: str, explanation: str, wrong: str = "", right: str = "") -> CodeInfo:
    return CodeInfo(code, title, _Sev.WARNING, explanation, wrong, right)
