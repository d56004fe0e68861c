"""What compiling one file gives: the stages there are, and the Compilation each stage adds to."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Literal

from ..diagnostics import Diagnostic, SourceFile
from ..grammar import ast
from ..grammar.node import Node

if TYPE_CHECKING:
    from ..runtime.spec import MachineSpec
    from .checks.resolve import Symbols
    from .ir import Machine as IRMachine  # the `ir` field below shadows the module in the class body
    from .project import UsedFile

Stage = Literal["parse", "check", "lower", "passes", "load"]
STAGES: tuple[Stage, ...] = ("parse", "check", "lower", "passes", "load")

_Comment = ast.Comment  # the `ast` field below shadows the module inside the class body


class Compilation(Node, frozen=False):
    """Everything the stages learned about one file.

    `ast` and `comments` come from parsing; `diagnostics` from every stage, sorted; `symbols` (the
    declarations by kind, and what the checks recorded) from checking; `ir` from lowering, when no error
    was reported (let go once loaded, when the caller asked for the machine alone: pipeline.compile_source's
    `keep_syntax`); `optimized` from the passes and `machine` (the runtime MachineSpec) from loading, when
    those stages were asked for. `uses` are the files its `use` lines name, each compiled once by the
    project (their diagnostics are their own, not in this file's)."""

    source: SourceFile | None
    ast: ast.Machine | None
    comments: list[_Comment]
    ir: IRMachine | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    symbols: Symbols | None = field(default=None, compare=False, repr=False)
    optimized: IRMachine | None = field(default=None, compare=False, repr=False)
    machine: MachineSpec | None = field(default=None, compare=False, repr=False)
    uses: list[UsedFile] = field(default_factory=list, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        """Checked without an error, and lowered (loaded, for a compilation that let the IR go)."""
        return ((self.ir is not None or self.machine is not None)
                and not any(d.severity.value == "error" for d in self.diagnostics))
