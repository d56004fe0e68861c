"""Importers: other systems' machine specs (MetaAgent FSM JSON, AutoAgent workflow XML, CrewAI projects) as
`.fsm` files.

The pipeline for every format: decode the file, read it with positions (errors are diagnostics on the
input), lint it, build a small model of the machine, repair it if asked, add a test skeleton and the
header, print it and pass it through the formatter, so that the result is canonical by construction.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..diagnostics import Diagnostic, Diagnostics, Severity
from ..grammar.parser import read_source  # which refuses a file over the size limit (SW1021)
from .autoagent import import_autoagent
from .emit import render_machine
from .header import Header
from .metaagent import import_metaagent
from .model import Machine
from .names import file_stem

FORMATS = ("metaagent", "autoagent", "crewai")
FILE_FORMATS = ("metaagent", "autoagent")  # formats whose input is one file; a CrewAI project is a folder
DEFAULT_BOUND = 2


@dataclass
class ImportOutcome:
    """The imported `.fsm` text (None when the input has errors) and the diagnostics on the input.

    An AutoAgent agent form with several agents is several machines: `text` is the one the input becomes,
    and `files` the machines it runs, each as (its path from the folder of `text`'s file, its text)."""

    text: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)  # what --repair changed, as listed in the header
    files: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.text is not None


def import_spec(source_format: str, data: bytes, path: str, *, repair: bool = False,
                bound: int = DEFAULT_BOUND, output: str | None = None) -> ImportOutcome:
    """Import one file of `source_format` ("metaagent" or "autoagent"); problems come back as diagnostics.

    `output` is where the result will be written: the header names the input by its path from there (by
    its file name without one). The machines an AutoAgent agent form's machine runs go to a folder beside it,
    named after `output` without its extension (`OUT.fsm` runs `OUT/NAME.fsm`; without `output`, after the
    input's file name)."""
    if source_format not in FILE_FORMATS:
        if source_format in FORMATS:
            raise ValueError(f"a {source_format} import reads a project folder: use import_project")
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
    header = Header(source_format, header_path(path, output), hashlib.sha256(data).hexdigest(), repair, bound)
    if source_format == "metaagent":
        machine = import_metaagent(source, diags, repair_mode=repair, bound=bound, header=header)
    else:
        machine = import_autoagent(source, diags, repair_mode=repair, bound=bound, header=header,
                                   folder=called_folder(path, output))
    return _finish(machine, diags, header, path, output)


def import_project(source_format: str, path: str, *, repair: bool = False, bound: int = DEFAULT_BOUND,
                   output: str | None = None) -> ImportOutcome:
    """Import a project folder of `source_format` ("crewai"). A path that holds no such project is a
    FileNotFoundError; a missing optional dependency (PyYAML) a MissingYamlReader."""
    if source_format != "crewai":
        raise ValueError(f"a {source_format} import reads one file: use import_spec")
    if bound < 1:
        raise ValueError(f"a loop bound must be at least 1, not {bound}")
    from .crewai import import_crewai
    from .crewai_spec import locate
    from .yaml_source import require_yaml

    require_yaml()  # before anything is read: without PyYAML nothing can be
    files = locate(path)
    digest = hashlib.sha256()
    read = [file for file in (files.agents, files.tasks, files.crew) if file is not None]
    for file in read:  # in blocks: a file of any size is hashed in little memory (it is refused when read)
        with file.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    diags = Diagnostics()
    header = Header(source_format, header_path(path, output), digest.hexdigest(), repair, bound)
    base = files.crew.parent if files.crew is not None else read[0].parent
    header.sources = [Path(os.path.relpath(file, base)).as_posix() for file in read]
    machine = import_crewai(path, diags, repair_mode=repair, bound=bound, header=header)
    return _finish(machine, diags, header, path, output)


def _finish(machine: Machine | None, diags: Diagnostics, header: Header, path: str, output: str | None
            ) -> ImportOutcome:
    if machine is None or diags.has_errors:
        return ImportOutcome(None, diags.sorted())
    notes = diags.sorted()
    header.notes += [f"{_where(d, path, header.path)}: {d.message} [{d.code}]" for d in notes
                     if d.severity is Severity.WARNING]
    machine.header = header.lines()
    files = []
    for called in machine.called:
        beside = None if output is None or output == "-" or output.startswith("<") else (
            os.path.join(os.path.dirname(output), called.path))
        called.header.path = header_path(path, beside)
        called.machine.header = called.header.lines()
        files.append((called.path, render_machine(called.machine, called.path)))
    return ImportOutcome(render_machine(machine, path), notes, header.repairs, files)


def called_folder(path: str, output: str | None) -> str:
    """The folder, beside the imported machine's file, that holds the machines it runs: named after that
    file without its extension (or, without a file, after the input), `NAME_machines` when the name has no
    extension to drop (a folder cannot take its file's name), and never `.` or `..`."""
    named = output if output is not None and output != "-" and not output.startswith("<") else path
    name = named.replace("\\", "/").rsplit("/", 1)[-1]
    stem = file_stem(named)
    if stem in ("", ".", ".."):
        return "imported"
    return f"{stem}_machines" if stem == name else stem


def _where(d: Diagnostic, path: str, shown: str) -> str:
    """A note's position, with the input named as the header names it (never an absolute path)."""
    if d.span is None:
        return shown
    pos = d.span.start_pos
    name = d.span.path
    if name == path:
        name = shown
    elif os.path.isabs(name):
        name = os.path.basename(name)
    return f"{name}:{pos.line}:{pos.column}"


def header_path(path: str, output: str | None) -> str:
    """The input as a header names it: its path from the output's folder, or its file name (a header
    travels with the file: an absolute path, or one from wherever the command ran, says nothing there)."""
    if path.startswith("<"):
        return path
    name = Path(path).name or os.path.basename(os.path.abspath(path))
    if output is None or output == "-" or output.startswith("<"):
        return name
    source, folder = os.path.abspath(path), os.path.dirname(os.path.abspath(output))
    try:
        common = os.path.commonpath([source, folder])
    except ValueError:  # two drives
        return name
    if common == os.path.dirname(common):  # nothing shared but the root: a path up to it is an absolute path
        return name
    return Path(os.path.relpath(source, folder)).as_posix()


__all__ = ["DEFAULT_BOUND", "FILE_FORMATS", "FORMATS", "ImportOutcome", "called_folder", "header_path",
           "import_project", "import_spec"]
