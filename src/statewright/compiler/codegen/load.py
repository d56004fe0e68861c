"""Machine modules executed in memory: what `statewright run`, `test` and the Python API run.

The text is a runner's machine part importing the installed runtime (`statewright.runtime`); it is compiled under a name that says
where it came from, registered with linecache (so a traceback through a guard shows the generated line),
and executed as a module of its own. Modules are kept per text: loading the same machine twice in a
process compiles it once.
"""

from __future__ import annotations

import hashlib
import linecache
import sys
import types

_MODULE_PREFIX = "statewright.machines.m_"


def load_machine_module(text: str, source_path: str) -> types.ModuleType:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]
    name = _MODULE_PREFIX + digest
    module = sys.modules.get(name)
    if module is not None:
        return module
    filename = f"<statewright machine {source_path} {digest[:12]}>"
    code = compile(text, filename, "exec", dont_inherit=True)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    module = types.ModuleType(name, f"The machine module of {source_path}, compiled in memory.")
    module.__file__ = filename
    # pydantic resolves the classes' annotations through sys.modules, so the module is there before it runs
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - the module statewright itself generated from a checked spec
    except BaseException:
        del sys.modules[name]
        raise
    return module
