"""The runtime as code generation reads it: its modules, the names the machine part may import from them,
and the rules that let a runner carry them as they are (runtime_source.py)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from statewright.compiler.codegen import runtime_source
from statewright.compiler.codegen.runtime_source import (
    RuntimeRuleError,
    installed_runtime_index,
    installed_sources,
    manifest,
    runtime_index,
    runtime_rule_violations,
    runtime_sources,
    sha256_text,
)


def module(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


SPEC = module('''
    """The spec."""

    from __future__ import annotations


    class Scope:
        pass


    def _private() -> None:
        pass
''')
HEAD = '"""D."""\n\nfrom __future__ import annotations\n\n'


def test_every_runtime_module_keeps_the_rules_runners_rely_on() -> None:
    # no statewright imports; only stdlib, pydantic and jinja2 at the top (litellm and the others lazily);
    # siblings as `from .module import`; each public name defined once; each module fit for a section of
    # the one-file runner; a docstring and `from __future__ import annotations`
    assert runtime_rule_violations(runtime_sources()) == []


def test_the_runtime_package_init_holds_only_its_docstring() -> None:
    """Every form of the runtime writes its own __init__ (the record of the package beside a runner, the
    loader's empty package in a one-file runner): code in the installed one would reach no runner."""
    import statewright.runtime

    tree = ast.parse(Path(statewright.runtime.__file__).read_text(encoding="utf-8"))
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)


def test_the_index_names_each_public_name_by_the_module_defining_it() -> None:
    index = installed_runtime_index()
    assert index == runtime_index(runtime_sources())  # a cached index is the index
    assert {index.defined_in[n] for n in ("MachineSpec", "Engine", "RunCore", "main")} == {
        "spec", "engine", "core", "runner_cli"}
    assert not [name for name in index.defined_in if name.startswith("_")]
    assert {"MachineSpec", "json", "dataclass"} <= set(index.names)  # what the spec's names must not take


def test_the_runtimes_sha256_is_of_the_list_of_its_modules_sha256() -> None:
    sources = installed_sources()
    assert sources.digests == {name: sha256_text(text) for name, text in runtime_sources().items()}
    assert sources.sha256 == sha256_text(manifest(sources.digests))
    assert manifest({"b": "2" * 64, "a": "1" * 64}) == f"{'1' * 64}  a.py\n{'2' * 64}  b.py\n"


@pytest.mark.parametrize(("source", "message"), [
    (HEAD + "import statewright\n", "imports statewright"),
    (HEAD + "from . import spec\n", "must name a runtime module"),
    (HEAD + "from ..x import y\n", "must name a runtime module"),
    (HEAD + "import requests\n", "top-level import of 'requests'"),
    (HEAD + "X = " + "'" * 3 + "a" + "'" * 3 + "\n", "holds '''"),
    (HEAD + "X = 1\r\n", "carriage return"),
    (HEAD + "X = 1", "does not end with a line break"),
    (HEAD + "# ---- statewright_runtime/x.py\n", "section marker"),
    (HEAD + "\nclass Scope:\n    pass\n", "'Scope' is also defined"),
    (HEAD + "def f(:\n", "does not parse"),
])
def test_a_module_that_breaks_a_rule_runners_rely_on_is_reported(source: str, message: str) -> None:
    problems = runtime_rule_violations({"spec": SPEC, "bad": source}, blocking_only=True)
    assert any(message in p for p in problems), problems
    assert runtime_rule_violations({"spec": SPEC}) == []


def test_private_names_may_repeat_across_modules_each_keeping_its_own_namespace() -> None:
    one = SPEC.replace("class Scope", "class Other")
    assert runtime_rule_violations({"spec": SPEC, "one": one}) == []


def test_untidy_modules_are_reported_by_the_full_rule_check() -> None:
    lazy_top = HEAD + "import litellm\n"
    no_docstring = "from __future__ import annotations\n\n\ndef f() -> None:\n    import requests\n"
    prefixed = HEAD + "_HTTP_LIMIT = 1\n\n\ndef _http_open() -> None:\n    pass\n\n\ndef _open() -> None:\n    pass\n"
    problems = runtime_rule_violations({"a": lazy_top, "b": no_docstring, "http_get": prefixed,
                                        "approvals": HEAD + "_approval_count = 0\n"})
    assert any("a.py:5: top-level import of 'litellm'" in p for p in problems)
    assert any("b.py: no module docstring" in p for p in problems)
    assert any("b.py:5: imports 'requests'" in p for p in problems)
    assert [p.split(":")[0] + p.split("'")[1] for p in problems if "its module's name" in p] == [
        "approvals.py_approval_count", "http_get.py_HTTP_LIMIT", "http_get.py_http_open"]
    assert not any("docstring" in p for p in runtime_rule_violations({"b": no_docstring}, blocking_only=True))


def test_a_runtime_that_breaks_a_rule_stops_code_generation_and_is_never_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATEWRIGHT_CACHE_DIR", str(tmp_path))
    broken = runtime_source.sources_of({"bad": HEAD + "import statewright\n"})
    monkeypatch.setattr(runtime_source, "installed_sources", lambda: broken)
    with pytest.raises(RuntimeRuleError, match="bad.py:5: imports statewright"):
        installed_runtime_index.__wrapped__()
    assert not list(tmp_path.glob(".statewright-runtime-index-*.json"))


@pytest.mark.slow
def test_a_stale_or_broken_runtime_index_cache_is_never_trusted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATEWRIGHT_CACHE_DIR", str(tmp_path))
    fresh = installed_runtime_index.__wrapped__()  # writes the cache file
    [cache] = list(tmp_path.glob(".statewright-runtime-index-*.json"))
    assert installed_runtime_index.__wrapped__() == fresh  # read back from the file
    for broken in ('{"names": ["only-this"', '{"names": 3}', "[]", '{"names": [], "defined_in": 5}'):
        cache.write_text(broken, encoding="utf-8")
        assert installed_runtime_index.__wrapped__() == fresh


def test_a_changed_reader_never_reads_what_another_one_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATEWRIGHT_CACHE_DIR", str(tmp_path))
    before = runtime_source._cache_file(installed_sources())
    monkeypatch.setattr(runtime_source, "__file__", str(tmp_path / "another_reader.py"))
    (tmp_path / "another_reader.py").write_text("# another version\n", encoding="utf-8")
    assert runtime_source._cache_file(installed_sources()) != before


def test_the_runtime_keeps_no_module_level_mutable_state() -> None:
    """Everything a run uses is per run: no module-level caches, registries or counters in runtime/.

    A module-level table is allowed only as an UPPERCASE constant that no code in the runtime ever changes
    (no item assignment, no mutating method, no `global`)."""
    import ast

    mutators = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault",
                "add", "discard", "__setitem__"}
    problems = []
    sources = runtime_sources()
    tables: dict[str, str] = {}
    for name, text in sources.items():
        for stmt in ast.parse(text).body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
                stmt, ast.AnnAssign) else []
            value = getattr(stmt, "value", None)
            mutable = isinstance(value, (ast.Dict, ast.List, ast.Set)) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict"))
            for target in targets:
                if isinstance(target, ast.Name) and mutable:
                    if not target.id.lstrip("_").isupper():
                        problems.append(f"{name}.py: module-level mutable {target.id!r}")
                    tables[target.id] = name
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Global):
                problems.append(f"{name}.py:{node.lineno}: global {', '.join(node.names)}")
            target = None
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        target = t.value.id
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    node.func.attr in mutators and isinstance(node.func.value, ast.Name)):
                target = node.func.value.id
            if target in tables:
                problems.append(f"{name}.py:{node.lineno}: changes the module-level table {target!r}")
    assert problems == []
