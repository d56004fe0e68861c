"""A design session on a terminal: the runtime's progress lines, each attempt with what it fixed.

The runtime's Progress (which generated runners carry) shows a design's calls as it shows a run's; an
attempt's line is the designer's own summary (`attempt 2: 3 errors -> 1 error (fixed SW2002, SW4001;
still SW3008)`), the same line the session's log keeps.
"""

from __future__ import annotations

from typing import Any

from ..runtime.progress import Progress, printable


class DesignProgress(Progress):
    def line(self, event: str, fields: dict[str, Any]) -> str | None:
        if event == "designer_attempt" and fields.get("summary"):
            style = "ok" if fields.get("ok") else "fail"
            return self.paint(style, f"attempt {fields.get('attempt')}: {printable(fields['summary'], 300)}")
        return super().line(event, fields)
