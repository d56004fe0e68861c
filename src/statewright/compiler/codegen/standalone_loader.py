"""The loader a one-file runner carries, which makes the runtime's modules in it an importable package.

It installs the modules, kept verbatim in the runner, as a package Python imports like any other.

Code generation copies the function between the `###{standalone` and `###}` lines into every one-file
runner as it is (standalone.py), the way Lark's standalone generator copies its marked sections; this module
exists so that the code is linted, type-checked and tested where it is written.
"""

from __future__ import annotations


###{standalone
def _install_runtime(package: str, first_line: int, text: str) -> None:
    """Make the runtime modules in `text` importable as the package `package`.

    Each module's source follows its marker line `# ---- statewright_runtime/NAME.py ----` and runs as a
    module of its own, `package.NAME`, when something first imports it, so each keeps its own namespace
    and their imports of each other work as they do in the installed package. `text` starts on line
    `first_line` of this file, and each module is compiled so that its line numbers are this file's: a
    traceback through the runtime points at the very line below. Runners with the same runtime (the
    package is named by its hash) share one installed copy.
    """
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import re
    import sys
    from collections.abc import Sequence
    from types import CodeType, ModuleType

    if any(getattr(finder, "runtime_package", None) == package for finder in sys.meta_path):
        return
    origin = globals().get("__file__") or f"<{__name__}>"
    sources = {}
    line, offset = first_line, 0
    marks = list(re.finditer(r"^# ---- statewright_runtime/(\w+)\.py -*\n", text, re.MULTILINE))
    for mark, after in zip(marks, [*marks[1:], None]):
        line += text.count("\n", offset, mark.end())
        offset = mark.end()
        # blank lines before the module's code, so that its first line is line `line` of this file
        sources[mark.group(1)] = "\n" * (line - 1) + text[offset:after.start() if after else len(text)]

    class RuntimeImporter(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
        runtime_package = package

        def find_spec(self, fullname: str, path: Sequence[str] | None,
                      target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
            parent, _, name = fullname.rpartition(".")
            if fullname == package or (parent == package and name in sources):
                return importlib.util.spec_from_loader(fullname, self, origin=origin)
            return None

        def is_package(self, fullname: str) -> bool:
            return fullname == package

        def get_source(self, fullname: str) -> str:
            return "" if fullname == package else sources[fullname.rpartition(".")[2]]

        def get_code(self, fullname: str) -> CodeType:
            return compile(self.get_source(fullname), origin, "exec", dont_inherit=True)

    sys.meta_path.insert(0, RuntimeImporter())
###}
