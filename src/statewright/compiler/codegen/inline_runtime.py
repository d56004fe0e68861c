"""The runtime as one block of source, for generated runners: the runtime package's modules concatenated.

Modules come in dependency order (read from their `from .x import` lines); module docstrings, `__future__`
imports and imports between runtime modules are dropped, and the remaining top-level imports are returned
separately so the generated module can hoist them, deduplicated, to its top. This only works because the
runtime keeps the rules in `runtime_rule_violations`; a module that breaks one stops code generation with
a clear error instead of producing a runner that fails later.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import sys
import tokenize
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


class RuntimeInlineError(Exception):
    """A runtime module breaks a rule that concatenation relies on."""


@dataclass(frozen=True)
class HoistedImport:
    """One name bound by a top-level import: `from module import name as bound` or `import module as bound`."""

    module: str
    name: str | None  # None for `import module`
    bound: str  # the name it binds in the module namespace

    @property
    def key(self) -> tuple[str, str | None, str]:
        return (self.module, self.name, self.bound)


@dataclass(frozen=True)
class InlinedRuntime:
    modules: tuple[str, ...]  # module names, in the order their code appears
    imports: tuple[HoistedImport, ...]  # deduplicated, in first-seen order
    body: str  # the modules' code, each under a banner comment
    names: tuple[str, ...]  # every top-level name the runtime binds (definitions and imports), sorted


# What the machine's part of a runner imports beside the runtime's imports, and the names it defines: the
# classes and functions generated for a spec must not take any of them.
SPEC_IMPORTS = (
    HoistedImport("collections.abc", "Callable", "Callable"),
    HoistedImport("collections.abc", "Mapping", "Mapping"),
    HoistedImport("collections.abc", "Sequence", "Sequence"),
    HoistedImport("typing", "Annotated", "Annotated"),
    HoistedImport("typing", "Any", "Any"),
    HoistedImport("typing", "Literal", "Literal"),
    HoistedImport("pydantic", "BaseModel", "BaseModel"),
    HoistedImport("pydantic", "ConfigDict", "ConfigDict"),
    HoistedImport("pydantic", "Field", "Field"),
)
RUNNER_NAMES = ("MACHINE", "SOURCE_MAP", "run", "arun")


def reserved_names(runtime_names: tuple[str, ...]) -> tuple[str, ...]:
    """Every name a runner binds before the spec's own classes and functions are named."""
    return (*runtime_names, *(i.bound for i in SPEC_IMPORTS), *RUNNER_NAMES)


def runtime_sources() -> dict[str, str]:
    """The installed runtime modules' source, by module name (sorted), `__init__` excluded."""
    package = resources.files(RUNTIME_PACKAGE)
    sources = {}
    for entry in sorted(package.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py") and entry.name != "__init__.py":
            sources[entry.name[:-3]] = entry.read_text(encoding="utf-8")
    return sources


@lru_cache(maxsize=1)
def installed_runtime() -> InlinedRuntime:
    """The installed runtime, inlined: read back from the cache (cache_dir.py) when this runtime and this
    inliner made it before, which spares `compile` parsing ~5,000 lines; inlined and cached otherwise."""
    sources = runtime_sources()
    cache = _cache_file("inline", sources)
    data = _read_cache(cache)
    if _inlined_shape(data):
        return InlinedRuntime(modules=tuple(data["modules"]), imports=tuple(HoistedImport(*i) for i in data["imports"]),
                              body=data["body"], names=tuple(data["names"]))
    inlined = inline_runtime(sources)
    _write_cache(cache, {"modules": inlined.modules, "imports": [list(i.key) for i in inlined.imports],
                         "body": inlined.body, "names": inlined.names})
    return inlined


@dataclass(frozen=True)
class RuntimeIndex:
    """What the machine part of a module needs to know about the runtime it runs on."""

    names: tuple[str, ...]  # every top-level name the runtime binds (definitions and imports), sorted
    defined_in: Mapping[str, str]  # each name a runtime module defines -> that module


@lru_cache(maxsize=1)
def installed_runtime_index() -> RuntimeIndex:
    """The installed runtime's names, at a fraction of the cost of inlining it.

    Parsing the runtime's ~5,000 lines takes longer than everything else `statewright test` does before
    its first test, so the index is kept in a cache file beside the grammar's, keyed by a hash of the
    sources it was read from (a changed runtime is simply indexed again)."""
    sources = runtime_sources()
    cache = _cache_file("index", sources)
    data = _read_cache(cache)
    try:
        if data is not None:
            return RuntimeIndex(tuple(data["names"]), dict(data["defined_in"]))
    except (KeyError, TypeError, ValueError):
        pass  # a cache that cannot be used: index the sources
    index = runtime_index(sources)
    _write_cache(cache, {"names": index.names, "defined_in": dict(index.defined_in)})
    return index


def _inlined_shape(data: Any) -> bool:
    """Whether a cached inlined runtime has the shape `installed_runtime` writes (else it is inlined again)."""
    def strings(items: Any) -> bool:
        return isinstance(items, list) and all(isinstance(i, str) for i in items)

    return (isinstance(data, dict) and isinstance(data.get("body"), str) and strings(data.get("modules"))
            and strings(data.get("names")) and isinstance(data.get("imports"), list)
            and all(isinstance(i, list) and len(i) == 3 and isinstance(i[0], str) and isinstance(i[2], str)
                    and (i[1] is None or isinstance(i[1], str)) for i in data["imports"]))


def _cache_file(kind: str, sources: Mapping[str, str]) -> Path | None:
    """The cache file of `kind` for these runtime sources, named by a hash of them and of this module's
    own code (a changed inliner never reads what an older one wrote); None without a cache directory."""
    directory = cache_dir()
    if directory is None:
        return None
    text = Path(__file__).read_text(encoding="utf-8") + "".join(f"\0{n}\0{t}" for n, t in sources.items())
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return directory / f".statewright-runtime-{kind}-{digest}.json"


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


def runtime_index(sources: Mapping[str, str]) -> RuntimeIndex:
    trees = {name: _parse(name, text) for name, text in sources.items()}
    names = tuple(sorted({n for tree in trees.values() for n in _top_level_names(tree)}))
    defined_in = {bound: module for module in sorted(trees) for bound in _defined_names(trees[module])}
    return RuntimeIndex(names, defined_in)


def inline_runtime(sources: Mapping[str, str]) -> InlinedRuntime:
    trees = {name: _parse(name, text) for name, text in sources.items()}
    problems = [p for name in sorted(trees) for p in _blocking_violations(name, trees[name], trees)]
    problems += _name_clashes(trees)
    if problems:
        raise RuntimeInlineError("the runtime cannot be inlined:\n  " + "\n  ".join(problems))
    order = dependency_order({name: _runtime_deps(tree) for name, tree in trees.items()})
    imports: dict[tuple[str, str | None, str], HoistedImport] = {}
    bodies = []
    for name in order:
        for imp in _hoisted_imports(trees[name]):
            imports.setdefault(imp.key, imp)
        body = _strip(sources[name], trees[name])
        bodies.append(f"# ---- runtime/{name}.py " + "-" * max(4, 80 - len(name)) + "\n\n" + body)
    return InlinedRuntime(
        modules=tuple(order),
        imports=tuple(imports.values()),
        body="\n\n\n".join(bodies),
        names=tuple(sorted({n for tree in trees.values() for n in _top_level_names(tree)})),
    )


def dependency_order(deps: Mapping[str, list[str]]) -> list[str]:
    """Modules so that each comes after the modules it imports; alphabetical where the order is free."""
    remaining = {name: sorted(set(d) & deps.keys()) for name, d in deps.items()}
    order: list[str] = []
    while remaining:
        ready = sorted(name for name, d in remaining.items() if not d)
        if not ready:
            raise RuntimeInlineError("runtime modules import each other in a cycle: " + ", ".join(sorted(remaining)))
        name = ready[0]
        order.append(name)
        del remaining[name]
        for d in remaining.values():
            if name in d:
                d.remove(name)
    return order


# ---- the rules ---------------------------------------------------------------------------------------


def runtime_rule_violations(sources: Mapping[str, str]) -> list[str]:
    """Every way the runtime breaks the rules for code that generated runners carry (see the team brief)."""
    trees = {name: _parse(name, text) for name, text in sources.items()}
    problems: list[str] = []
    for name in sorted(trees):
        tree = trees[name]
        problems += _blocking_violations(name, tree, trees)
        body = tree.body
        if not (body and _is_docstring(body[0])):
            problems.append(f"{name}.py: no module docstring")
        if not any(isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in body):
            problems.append(f"{name}.py: no `from __future__ import annotations`")
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and not getattr(stmt, "level", 0):
                top = _top_package(stmt)
                if top != "__future__" and not _allowed_at_top_level(top):
                    problems.append(f"{name}.py:{stmt.lineno}: top-level import of {top!r}")
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
                top = _top_package(node)
                if top != "__future__" and not _allowed_at_top_level(top) and top not in LAZY_PACKAGES:
                    problems.append(f"{name}.py:{node.lineno}: imports {top!r}")
    try:
        dependency_order({name: _runtime_deps(tree) for name, tree in trees.items()})
    except RuntimeInlineError as e:
        problems.append(str(e))
    return problems + _name_clashes(trees)


def _allowed_at_top_level(top: str) -> bool:
    return top in sys.stdlib_module_names or top in ALLOWED_PACKAGES


def _blocking_violations(name: str, tree: ast.Module, trees: Mapping[str, ast.Module]) -> list[str]:
    """The rule breaks that would make the concatenated module wrong, not just untidy."""
    problems = []
    for stmt in tree.body:
        if (isinstance(stmt, (ast.Import, ast.ImportFrom)) and not getattr(stmt, "level", 0)
                and stmt.lineno != stmt.end_lineno):  # (imports of runtime modules are dropped whole)
            problems.append(f"{name}.py:{stmt.lineno}: a top-level import spans lines; keep it on one line")
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and "__all__" in _assigned_names(stmt):
            problems.append(f"{name}.py:{stmt.lineno}: __all__ is not used in runtime modules")
        if isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test):
            problems.append(f"{name}.py:{stmt.lineno}: a `__main__` block would run inside every runner")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if _top_package(node) == "statewright":
                problems.append(f"{name}.py:{node.lineno}: imports statewright; runners must not need it")
            if isinstance(node, ast.ImportFrom) and node.level:
                if node.level != 1 or not node.module or node.module not in trees:
                    problems.append(
                        f"{name}.py:{node.lineno}: relative imports must name a runtime module: "
                        "`from .spec import StateSpec`"
                    )
                elif any(a.asname and a.asname != a.name for a in node.names):
                    problems.append(f"{name}.py:{node.lineno}: a runtime name imported under another name")
    return problems


def _name_clashes(trees: Mapping[str, ast.Module]) -> list[str]:
    """Top-level names two modules both define, or bind differently."""
    defined: dict[str, str] = {}  # name -> module that defines it
    imported: dict[str, tuple[str, tuple[str, str | None]]] = {}  # name -> (module, import source)
    problems = []
    for name in sorted(trees):
        tree = trees[name]
        for bound in _defined_names(tree):
            if bound in defined and defined[bound] != name:
                problems.append(f"{name}.py: top-level name {bound!r} is also defined in {defined[bound]}.py")
            defined.setdefault(bound, name)
        for imp in _hoisted_imports(tree):
            # `import email` and `import email.utils` both bind `email`, harmlessly
            source = (imp.module.split(".")[0] if imp.name is None else imp.module, imp.name)
            if imp.bound in imported and imported[imp.bound][1] != source:
                other = imported[imp.bound][0]
                problems.append(f"{name}.py: {imp.bound!r} is imported from elsewhere in {other}.py")
            imported.setdefault(imp.bound, (name, source))
    for bound, (module, _) in sorted(imported.items()):
        if bound in defined:
            problems.append(f"{module}.py: imports {bound!r}, which {defined[bound]}.py defines")
    return problems


# ---- reading modules ---------------------------------------------------------------------------------


def _parse(name: str, text: str) -> ast.Module:
    try:
        return ast.parse(text, filename=f"{name}.py")
    except SyntaxError as e:
        raise RuntimeInlineError(f"{name}.py does not parse: {e}") from None


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _top_package(node: ast.Import | ast.ImportFrom) -> str:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0]
    return node.names[0].name.split(".")[0]


def _runtime_deps(tree: ast.Module) -> list[str]:
    return [s.module for s in tree.body if isinstance(s, ast.ImportFrom) and s.level == 1 and s.module]


def _is_type_checking_block(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test) and not stmt.orelse


def _hoisted_imports(tree: ast.Module) -> list[HoistedImport]:
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                out.append(HoistedImport(a.name, None, a.asname or a.name.split(".")[0]))
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module != "__future__":
            for a in stmt.names:
                out.append(HoistedImport(stmt.module or "", a.name, a.asname or a.name))
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
    return _defined_names(tree) + [imp.bound for imp in _hoisted_imports(tree)]


# ---- rewriting ---------------------------------------------------------------------------------------


def _strip(text: str, tree: ast.Module) -> str:
    """The module without docstring, top-level imports and relative imports anywhere.

    A relative import inside a function is dropped too: in the concatenated module the name it imported is
    already global. If it was the only statement of its block, `pass` takes its place; a top-level
    `if TYPE_CHECKING:` block that held only runtime imports goes entirely.
    """
    lines = text.splitlines()
    replace: dict[int, str | None] = {}  # 0-based first line -> replacement (None: drop)
    drop: set[int] = set()

    def remove(node: ast.stmt, placeholder: bool = False) -> None:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
        replace[first] = f"{indent}pass" if placeholder else None
        drop.update(range(first + 1, last + 1))

    body = tree.body
    if body and _is_docstring(body[0]):
        remove(body[0])
    for stmt in body:
        runtime_only = _is_type_checking_block(stmt) and all(
            isinstance(s, ast.ImportFrom) and s.level for s in stmt.body  # type: ignore[attr-defined]
        )
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or runtime_only:
            remove(stmt)
    for node in ast.walk(tree):
        if node is tree or (isinstance(node, ast.stmt) and node.lineno - 1 in replace):
            continue
        for block_name in ("body", "orelse", "finalbody"):
            block = getattr(node, block_name, None)
            if not isinstance(block, list):
                continue
            relative = [s for s in block if isinstance(s, ast.ImportFrom) and s.level]
            for stmt in relative:
                remove(stmt, placeholder=len(relative) == len(block) and stmt is block[0])
    protected = _lines_inside_strings(text)
    out: list[str] = []
    blank_run = 0
    for i, line in enumerate(lines):
        if i in drop or (i in replace and replace[i] is None):
            continue
        line = replace.get(i) or line
        # Removed lines leave runs of blank lines behind: keep at most two (none at the start), but never
        # touch a line inside a string literal, where blank lines are content.
        if not line.strip() and i not in protected:
            blank_run += 1
            if not out or blank_run > 2:
                continue
        else:
            blank_run = 0
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def _lines_inside_strings(text: str) -> set[int]:
    """0-based lines that lie inside a multi-line string literal (their blank lines are content)."""
    inside: set[int] = set()
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    string_kinds = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)}
    for tok in tokens:
        if tok.type in string_kinds and tok.end[0] > tok.start[0]:
            inside.update(range(tok.start[0], tok.end[0]))  # rows after the first, 0-based
    return inside
