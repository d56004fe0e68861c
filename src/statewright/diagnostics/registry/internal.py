"""Internal errors (SW9xxx)."""

from __future__ import annotations

from .entry import _e

CODES = [
    # --- internal ---------------------------------------------------------------------------------
    _e("SW9001", "internal compiler error",
       "The compiler hit a bug. Please report it with the input file.", "", ""),
]
