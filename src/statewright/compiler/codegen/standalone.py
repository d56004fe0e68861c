"""The runtime of a one-file runner (`statewright compile --standalone`): marked sections and a loader.

Every runtime module's source is kept verbatim in marked sections of one string, with the loader that
makes them a package at import time.

Nothing is rewritten: each module keeps its own namespace, its imports of its siblings and its line
numbers (relative to the line its section starts on), so the one-file runner runs the very code the
runtime package beside a default runner holds, and `statewright run` executes. The loader is the marked
section of standalone_loader.py, copied as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .runtime_package import filled_imports
from .runtime_source import SECTION_MARKER, installed_sources
from .source_layout import WIDTH

# What render.py places where the runtime goes, to be replaced by `runtime_block`: a NUL character can
# appear nowhere else in a runner (every spec text is written escaped), so its place is the block's.
PLACEHOLDER = "\0"
_LOADER_START, _LOADER_END = "###{standalone\n", "###}\n"


@dataclass(frozen=True)
class StandaloneRuntime:
    version: str
    sha256: str
    package: str  # the private package the loader installs the modules as
    loader: str  # the loader function's source
    sections: str  # every module after its marker line


@lru_cache(maxsize=1)
def standalone_runtime() -> StandaloneRuntime:
    from ... import __version__

    sources = installed_sources()
    sections = "".join(f"{section_marker(name)}\n{text}" for name, text in sources.modules.items())
    return StandaloneRuntime(__version__, sources.sha256, f"_statewright_runtime_{sources.sha256[:16]}",
                             loader_source(), sections)


def section_marker(module: str) -> str:
    head = f"{SECTION_MARKER}{module}.py "
    return head + "-" * max(4, WIDTH - len(head))


def loader_source() -> str:
    """The marked section of standalone_loader.py: the loader every one-file runner carries."""
    text = (Path(__file__).parent / "standalone_loader.py").read_text(encoding="utf-8")
    start = text.index(_LOADER_START) + len(_LOADER_START)
    return text[start:text.index(_LOADER_END, start)].rstrip("\n")


def runtime_block(names: Mapping[str, Sequence[str]], first_line: int) -> str:
    """The one-file runner's runtime, to stand at line `first_line` of the runner: the loader, the modules'
    sections, and the imports of `names` (module -> the names the machine part uses from it)."""
    runtime = standalone_runtime()
    head = (
        f"# ==== statewright runtime {runtime.version} (sha256 {runtime.sha256[:12]}), standalone ====\n"
        "# The runtime's modules are in the string below, each verbatim after its marker line\n"
        f"# `{SECTION_MARKER}NAME.py`. _install_runtime makes them the package\n"
        f"# {runtime.package}: Python imports each module from it on first use, in a\n"
        "# namespace of its own, and a traceback through one shows the lines of this file. They are the modules\n"
        "# of the statewright_runtime/ package that `statewright compile` writes beside a runner without\n"
        "# --standalone.\n"
        "\n"
        "\n"
        f"{runtime.loader}\n"
        "\n"
        "\n"
    )
    call_line = first_line + head.count("\n")
    imports = filled_imports(dict(sorted(names.items())), runtime.package, indent="")
    return f"{head}_install_runtime(\"{runtime.package}\", {call_line}, r'''\n{runtime.sections}''')\n\n{imports}".rstrip("\n")


def fill_runtime(text: str, names: Mapping[str, Sequence[str]]) -> str:
    """A runner rendered with PLACEHOLDER where its runtime goes, with the runtime there."""
    at = text.index(PLACEHOLDER)
    if PLACEHOLDER in text[at + 1:]:  # a spec text written unescaped: a bug of code generation, caught here
        raise ValueError("a NUL character outside the place of the one-file runner's runtime")
    first_line = text.count("\n", 0, at) + 1
    return text[:at] + runtime_block(names, first_line) + text[at + 1:]
