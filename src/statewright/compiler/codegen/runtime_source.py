"""The runtime's sources as code generation reads them: modules, hashes, defined names and the rules.

Code generation reads the installed runtime package's modules, their sha256, the names each defines, and
checks the rules that let a runner carry them.

A runner carries the runtime's modules as they are, file by file: copied into the `statewright_runtime/`
package beside it (runtime_package.py), or kept verbatim in the one-file form (standalone.py). Nothing is
rewritten, so the rules are few: a module imports nothing from the rest of statewright, only the packages a
runner may need, and its siblings only as `from .module import name`; a public name is defined in one
module (the machine part imports it from there); and a module's source fits in the one-file form's marked
sections. `runtime_rule_violations` lists every break of them; code generation refuses a runtime that
breaks one instead of writing a runner that fails later.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ...cache_dir import cache_dir

RUNTIME_PACKAGE = "statewright.runtime"
# What a runner may import besides the standard library; litellm only inside a function (lazily), tqdm
# (which litellm brings) only inside a function that does without it when it is missing, and temporalio
# only inside the functions of the Temporal backend (runtime/temporal.py), which say how to install it, and
# opentelemetry only inside the functions that make spans and metrics (runtime/otel.py, otel_setup.py).
ALLOWED_PACKAGES = ("pydantic", "jinja2")
# httpx comes with litellm, used only with it
LAZY_PACKAGES = ("litellm", "httpx", "tqdm", "temporalio", "opentelemetry")
# The line that opens each module in the one-file form (standalone.py); no line of a module may start so.
SECTION_MARKER = "# ---- statewright_runtime/"


class RuntimeRuleError(Exception):
    """The installed runtime breaks a rule that runners rely on."""


@dataclass(frozen=True)
class ModuleImport:
    """One name bound by an import: `from module import name as bound`, or `import module as bound`."""

    module: str
    name: str | None  # None for `import module`
    bound: str  # the name it binds in the importing module


# What the machine's part of a runner imports beside the runtime's names, and the names its module binds
# besides: the classes and functions generated for a spec must not take any of them.
SPEC_IMPORTS = (
    ModuleImport("collections.abc", "Callable", "Callable"),
    ModuleImport("collections.abc", "Mapping", "Mapping"),
    ModuleImport("collections.abc", "Sequence", "Sequence"),
    ModuleImport("typing", "Annotated", "Annotated"),
    ModuleImport("typing", "Any", "Any"),
    ModuleImport("typing", "Literal", "Literal"),
    ModuleImport("pydantic", "BaseModel", "BaseModel"),
    ModuleImport("pydantic", "ConfigDict", "ConfigDict"),
    ModuleImport("pydantic", "Field", "Field"),
)
RUNNER_NAMES = ("MACHINE", "SOURCE_MAP", "AGENTS", "STATES", "TOOLS", "TESTS", "run", "arun", "RUNTIME_SHA256", "RUNTIME_VERSION", "_install_runtime")


def reserved_names(runtime_names: tuple[str, ...]) -> tuple[str, ...]:
    """Every name a runner binds, or may import from the runtime, before the spec's own are named."""
    return (*runtime_names, *(i.bound for i in SPEC_IMPORTS), *RUNNER_NAMES)


# ---- the sources -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeSources:
    """The runtime's modules as installed, by module name (sorted; `__init__` is not one: every form of
    the runtime writes its own), with the sha256 of each and of them all."""

    modules: Mapping[str, str]
    digests: Mapping[str, str]  # module -> sha256 of its source
    sha256: str  # of the manifest: "<digest>  <module>.py" a line, as sha256sum writes it


def runtime_sources() -> dict[str, str]:
    """The installed runtime modules' source, by module name (sorted), `__init__` excluded."""
    package = resources.files(RUNTIME_PACKAGE)
    sources = {}
    for entry in sorted(package.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py") and entry.name != "__init__.py":
            sources[entry.name[:-3]] = entry.read_text(encoding="utf-8")
    return sources


def sources_of(modules: Mapping[str, str]) -> RuntimeSources:
    digests = {name: sha256_text(text) for name, text in sorted(modules.items())}
    return RuntimeSources(dict(sorted(modules.items())), digests, sha256_text(manifest(digests)))


def manifest(digests: Mapping[str, str]) -> str:
    """The list a runtime's sha256 is taken of: one "<sha256>  <module>.py" line a module, sorted."""
    return "".join(f"{digest}  {name}.py\n" for name, digest in sorted(digests.items()))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def installed_sources() -> RuntimeSources:
    """The installed runtime, read once a process (about 600 kB: reading and hashing it takes a few ms)."""
    return sources_of(runtime_sources())


# ---- the index: the names the machine part may import ---------------------------------------------


@dataclass(frozen=True)
class RuntimeIndex:
    """What the machine part of a module needs to know about the runtime it runs on."""

    names: tuple[str, ...]  # every top-level name a runtime module binds (definitions and imports), sorted
    defined_in: Mapping[str, str]  # each public name a runtime module defines -> that module


@lru_cache(maxsize=1)
def installed_runtime_index() -> RuntimeIndex:
    """The installed runtime's names, checked against the rules that runners rely on.

    Parsing the runtime's ~15,000 lines takes longer than everything else `statewright test` does before
    its first test, so the index is kept in a cache file beside the grammar's, keyed by a hash of the
    sources it was read from and of this module (a changed runtime or reader is simply indexed again).
    Raises RuntimeRuleError when the runtime breaks a rule (a broken runtime is never cached)."""
    sources = installed_sources()
    cache = _cache_file(sources)
    data = _read_cache(cache)
    try:
        if data is not None:
            return RuntimeIndex(tuple(str(n) for n in data["names"]),
                                {str(k): str(v) for k, v in dict(data["defined_in"]).items()})
    except (KeyError, TypeError, ValueError):
        pass  # a cache that cannot be used: index the sources
    problems = runtime_rule_violations(sources.modules, blocking_only=True)
    if problems:
        raise RuntimeRuleError("the installed statewright runtime cannot be carried by a runner:\n  "
                               + "\n  ".join(problems))
    index = runtime_index(sources.modules)
    _write_cache(cache, {"names": index.names, "defined_in": dict(index.defined_in)})
    return index


def runtime_index(sources: Mapping[str, str]) -> RuntimeIndex:
    trees = {name: _parse(name, text) for name, text in sources.items()}
    names = tuple(sorted({n for tree in trees.values() for n in _top_level_names(tree)}))
    defined_in = {bound: module for module in sorted(trees) for bound in _defined_names(trees[module])
                  if not bound.startswith("_")}
    return RuntimeIndex(names, defined_in)


def _cache_file(sources: RuntimeSources) -> Path | None:
    """The index's cache file for these runtime sources, named by their hash and this module's own code
    (a changed reader never reads what an older one wrote); None without a cache directory."""
    directory = cache_dir()
    if directory is None:
        return None
    digest = sha256_text(Path(__file__).read_text(encoding="utf-8") + "\0" + sources.sha256)[:16]
    return directory / f".statewright-runtime-index-{digest}.json"


def _read_cache(cache: Path | None) -> Any:
    if cache is None:
        return None
    try:
        return json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no cache yet, or a broken one: computed again


def _write_cache(cache: Path | None, data: object) -> None:
    if cache is None:
        return
    try:
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass  # an unwritable cache directory only costs the work next time


# ---- the rules ---------------------------------------------------------------------------------------


def runtime_rule_violations(sources: Mapping[str, str], *, blocking_only: bool = False) -> list[str]:
    """Every way the runtime breaks the rules for code that generated runners carry (see the team brief);
    with `blocking_only`, only the breaks that would make a runner wrong, not just untidy."""
    problems: list[str] = []
    trees: dict[str, ast.Module] = {}
    for name in sorted(sources):
        try:
            trees[name] = ast.parse(sources[name], filename=f"{name}.py")
        except SyntaxError as e:
            problems.append(f"{name}.py does not parse: {e}")
    for name, tree in trees.items():
        problems += _import_violations(name, tree, trees)
        problems += _section_violations(name, sources[name])
        if not blocking_only:
            problems += _style_violations(name, tree)
    return problems + _defined_twice(trees)


def _import_violations(name: str, tree: ast.Module, trees: Mapping[str, ast.Module]) -> list[str]:
    """Imports a runner could not satisfy: statewright, a package it need not have, a sibling named wrongly."""
    problems = []
    top_level = {id(s) for s in tree.body}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level != 1 or not node.module or node.module not in trees:
                problems.append(f"{name}.py:{node.lineno}: relative imports must name a runtime module: "
                                "`from .spec import StateSpec`")
            continue
        top = _top_package(node)
        if top == "statewright":
            problems.append(f"{name}.py:{node.lineno}: imports statewright; runners must not need it")
        elif top == "__future__" or _allowed_at_top_level(top):
            continue
        elif id(node) in top_level:
            problems.append(f"{name}.py:{node.lineno}: top-level import of {top!r}")
        elif top not in LAZY_PACKAGES:
            problems.append(f"{name}.py:{node.lineno}: imports {top!r}")
    return problems


def _section_violations(name: str, text: str) -> list[str]:
    """What would stop the module's source from sitting verbatim in the one-file form: a raw string
    delimited by `'''` that a marker line of its own opens (standalone.py)."""
    problems = []
    if "'''" in text:
        problems.append(f"{name}.py: holds ''' (use \"\"\"): the one-file runner keeps each module in a '''-string")
    if "\r" in text or "\0" in text:
        problems.append(f"{name}.py: holds a carriage return or NUL character")
    if not text.endswith("\n"):
        problems.append(f"{name}.py: does not end with a line break")
    if text.startswith(SECTION_MARKER) or f"\n{SECTION_MARKER}" in text:
        problems.append(f"{name}.py: a line starts with {SECTION_MARKER!r}, the one-file runner's section marker")
    return problems


def _style_violations(name: str, tree: ast.Module) -> list[str]:
    body = tree.body
    problems = [f"{name}.py: {bound!r} need not carry its module's name: each module has a namespace of its own"
                for bound in _defined_names(tree) if _prefixed_by_module(name, bound)]
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        problems.append(f"{name}.py: no module docstring")
    if not any(isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in body):
        problems.append(f"{name}.py: no `from __future__ import annotations`")
    return problems


def _prefixed_by_module(module: str, bound: str) -> bool:
    """Whether a private name starts with its module's name (`_batch_line` in batch.py, `_HTTP_HOST`
    in http_get.py, `_approval_text` in approvals.py): once needed to keep names apart when the runtime was
    concatenated into one namespace, now only noise."""
    first = module.split("_")[0]
    words = {module, first, first.removesuffix("s"), module.removesuffix("s")}
    return any(bound.startswith((f"_{w}_", f"_{w.upper()}_")) for w in words)


def _defined_twice(trees: Mapping[str, ast.Module]) -> list[str]:
    """Public names two modules both define: the machine part imports each from the one module defining it."""
    defined: dict[str, str] = {}
    problems = []
    for name in sorted(trees):
        for bound in _defined_names(trees[name]):
            if bound.startswith("_"):
                continue
            if bound in defined and defined[bound] != name:
                problems.append(f"{name}.py: public name {bound!r} is also defined in {defined[bound]}.py")
            defined.setdefault(bound, name)
    return problems


def _allowed_at_top_level(top: str) -> bool:
    return top in sys.stdlib_module_names or top in ALLOWED_PACKAGES


# ---- reading modules ---------------------------------------------------------------------------------


def _parse(name: str, text: str) -> ast.Module:
    try:
        return ast.parse(text, filename=f"{name}.py")
    except SyntaxError as e:
        raise RuntimeRuleError(f"{name}.py does not parse: {e}") from None


def _top_package(node: ast.Import | ast.ImportFrom) -> str:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0]
    return node.names[0].name.split(".")[0]


def _imported_names(tree: ast.Module) -> list[str]:
    """The names the module's top-level imports bind (relative ones included)."""
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            out += [a.asname or a.name.split(".")[0] for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__":
            out += [a.asname or a.name for a in stmt.names]
    return out


def _assigned_names(stmt: ast.stmt) -> list[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    names = []
    for target in targets:
        for node in ast.walk(target) if target is not None else ():
            if isinstance(node, ast.Name):
                names.append(node.id)
    return names


def _defined_names(tree: ast.Module) -> list[str]:
    return _bindings(tree.body)


def _bindings(stmts: list[ast.stmt]) -> list[str]:
    """Names that statements bind in the namespace they run in (not inside functions or classes)."""
    names: list[str] = []
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            names.extend(_assigned_names(stmt))
        elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With)):
            if isinstance(stmt, ast.For):
                names.extend(n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name))
            names.extend(_bindings(stmt.body) + _bindings(getattr(stmt, "orelse", [])))
        elif isinstance(stmt, ast.Try):
            names.extend(_bindings(stmt.body) + _bindings(stmt.orelse) + _bindings(stmt.finalbody))
            for handler in stmt.handlers:
                names.extend(_bindings(handler.body))
    return names


def _top_level_names(tree: ast.Module) -> list[str]:
    return _defined_names(tree) + _imported_names(tree)
