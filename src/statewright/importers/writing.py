"""Writing an import to disk: its machine, and the machines that one runs in the folder beside it.

An import writes only over files an import wrote (they begin with IMPORT_MARK), and only into the folder of
its own machines: every path in the way is found, and reported together, before anything is written.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import ImportOutcome

IMPORT_MARK = b"# Imported from the "  # how every file `statewright import` writes begins


class ImportInTheWay(FileExistsError):
    """Paths in the way of an import: files it did not write, or not files at all, where it would write.
    `problems` holds one line per path; nothing has been written."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def write_import(outcome: ImportOutcome, output: str) -> list[str]:
    """Write `outcome` to `output` and the machines it runs to their folder beside it, creating the folder;
    the paths written, `output` first. ImportInTheWay when a path is in the way (nothing written);
    ValueError when the outcome holds no machine or names a file outside its folder; other OSErrors."""
    if outcome.text is None:
        raise ValueError("the import failed: there is nothing to write")
    files = [(output, outcome.text), *((_beside(output, path), text) for path, text in outcome.files)]
    problems = _in_the_way(output, files)
    if problems:
        raise ImportInTheWay(problems)
    for path, text in files:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return [path for path, _ in files]


def _beside(output: str, path: str) -> str:
    """A called machine's file, `FOLDER/NAME.fsm` from `output`'s folder; anything else is refused, so that
    whatever names the input gives, nothing is written outside that folder."""
    parts = path.split("/")
    if len(parts) != 2 or not parts[1].endswith(".fsm") or any(
            part in ("", ".", "..") or "\\" in part or "\0" in part for part in parts):
        raise ValueError(f"{path!r} is not FOLDER/NAME.fsm: an import writes nowhere else")
    return os.path.join(os.path.dirname(output), *parts)


def _in_the_way(output: str, files: list[tuple[str, str]]) -> list[str]:
    problems = []
    folders = list(dict.fromkeys(os.path.dirname(path) for path, _ in files[1:]))
    for folder in folders:
        if os.path.normpath(folder) == os.path.normpath(output):
            problems.append(f"{output} would be both the machine's file and the folder of the machines it runs")
        elif os.path.islink(folder):
            problems.append(f"{folder} is a symbolic link, where the folder of the machines it runs goes")
        elif os.path.lexists(folder) and not os.path.isdir(folder):
            problems.append(f"{folder} is a file, where the folder of the machines it runs goes")
    for path, _ in files:
        if os.path.isdir(path):
            problems.append(f"{path} is a folder")
        elif path != output and os.path.islink(path):
            problems.append(f"{path} is a symbolic link (an import writes only files of its own there)")
        elif os.path.lexists(path) and not _written_by_import(path):
            problems.append(f"{path} was not written by `statewright import`")
    return problems


def _written_by_import(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(IMPORT_MARK)) == IMPORT_MARK
    except OSError:
        return False
