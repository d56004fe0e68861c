"""The runtime, inlined: its modules concatenated into every generated runner, and the rules that allow it."""

from __future__ import annotations

import textwrap

import pytest

from statewright.compiler.codegen.inline_runtime import (
    RuntimeInlineError,
    dependency_order,
    inline_runtime,
    installed_runtime_index,
    runtime_index,
    runtime_rule_violations,
    runtime_sources,
)


def module(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_every_runtime_module_keeps_the_rules_for_inlined_code() -> None:
    # single-line top-level imports, no name defined twice across modules, no statewright imports,
    # docstring and `from __future__ import annotations`, only stdlib/pydantic/jinja2 (+ litellm lazily)
    assert runtime_rule_violations(runtime_sources()) == []


def test_the_installed_runtime_inlines_into_code_that_compiles() -> None:
    inlined = inline_runtime(runtime_sources())
    compile(inlined.body, "<runtime>", "exec")
    assert "from ." not in inlined.body
    assert set(inlined.modules) == set(runtime_sources())
    assert {"MachineSpec", "Engine", "main", "guard_attribute"} <= set(inlined.names)
    index = installed_runtime_index()  # the cheap way the in-memory machine modules learn them
    assert index.names == inlined.names
    assert index == runtime_index(runtime_sources())  # a cached index is the index
    assert {index.defined_in[n] for n in ("MachineSpec", "Engine", "RunCore", "main")} == {
        "spec", "engine", "core", "runner_cli"}


SPEC = module('''
    """The spec."""

    from __future__ import annotations

    from dataclasses import dataclass


    @dataclass
    class Scope:
        output: object
''')

ENGINE = module('''
    """The engine."""

    from __future__ import annotations

    import json
    from dataclasses import dataclass
    from typing import TYPE_CHECKING

    from .spec import Scope

    if TYPE_CHECKING:
        from .trace import Trace

    PROMPT = """first


    after two blank lines"""


    def step(scope: Scope, trace: Trace | None) -> str:
        from .trace import emit

        emit(trace)
        return json.dumps(scope.output)


    def lazily() -> None:
        if True:
            from .trace import emit
        emit(None)
''')

TRACE = module('''
    """The trace."""

    from __future__ import annotations

    import json


    class Trace:
        pass


    def emit(trace: Trace | None) -> None:
        json.dumps(None)
''')


def test_modules_come_after_the_modules_they_import_and_lose_docstrings_and_runtime_imports() -> None:
    inlined = inline_runtime({"engine": ENGINE, "spec": SPEC, "trace": TRACE})
    assert inlined.modules == ("spec", "engine", "trace")  # trace is imported lazily: no ordering needed
    body = inlined.body
    assert '"""The engine."""' not in body and "__future__" not in body
    assert "from ." not in body and "import json" not in body and "TYPE_CHECKING:" not in body
    assert "        pass\n    emit(None)" in body  # a lazy import that was alone in its block
    assert 'PROMPT = """first\n\n\nafter two blank lines"""' in body  # strings are never touched
    compile(body, "<runtime>", "exec")


def test_top_level_imports_are_hoisted_once_each() -> None:
    inlined = inline_runtime({"engine": ENGINE, "spec": SPEC, "trace": TRACE})
    hoisted = [(i.module, i.name) for i in inlined.imports]
    assert hoisted == [("dataclasses", "dataclass"), ("json", None), ("typing", "TYPE_CHECKING")]


def test_two_modules_defining_one_name_cannot_be_inlined() -> None:
    other = module('''
        """Another."""

        from __future__ import annotations


        def emit() -> None:
            pass
    ''')
    with pytest.raises(RuntimeInlineError, match="'emit' is also defined in"):
        inline_runtime({"trace": TRACE, "other": other})


@pytest.mark.parametrize("source, message", [
    ('"""D."""\n\nfrom __future__ import annotations\n\nfrom typing import (\n    Any,\n)\n',
     "spans lines"),
    ('"""D."""\n\nfrom __future__ import annotations\n\nimport statewright\n', "imports statewright"),
    ('"""D."""\n\nfrom __future__ import annotations\n\nfrom . import spec\n', "must name a runtime module"),
    ('"""D."""\n\nfrom __future__ import annotations\n\n__all__ = ["x"]\n', "__all__"),
    ('"""D."""\n\nfrom __future__ import annotations\n\nif __name__ == "__main__":\n    pass\n', "__main__"),
])
def test_a_module_that_breaks_a_rule_stops_inlining_with_a_clear_error(source: str, message: str) -> None:
    with pytest.raises(RuntimeInlineError, match=message):
        inline_runtime({"spec": SPEC, "bad": source})


def test_untidy_modules_are_reported_by_the_rule_check() -> None:
    lazy_top = '"""D."""\n\nfrom __future__ import annotations\n\nimport litellm\n'
    no_docstring = "from __future__ import annotations\n\nimport requests\n"
    problems = runtime_rule_violations({"a": lazy_top, "b": no_docstring})
    assert any("a.py:5: top-level import of 'litellm'" in p for p in problems)
    assert any("b.py: no module docstring" in p for p in problems)
    assert any("b.py:3: top-level import of 'requests'" in p for p in problems)


def test_an_import_cycle_between_modules_is_an_error() -> None:
    with pytest.raises(RuntimeInlineError, match="cycle: a, b"):
        dependency_order({"a": ["b"], "b": ["a"], "c": []})


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


def test_a_stale_or_broken_runtime_index_cache_is_never_trusted(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("STATEWRIGHT_CACHE_DIR", str(tmp_path))
    fresh = installed_runtime_index.__wrapped__()  # writes the cache file
    [cache] = list(tmp_path.glob(".statewright-runtime-index-*.json"))
    assert installed_runtime_index.__wrapped__() == fresh  # read back from the file
    cache.write_text('{"names": ["only-this"', encoding="utf-8")  # cut short
    assert installed_runtime_index.__wrapped__() == fresh
    cache.write_text('{"names": 3}', encoding="utf-8")
    assert installed_runtime_index.__wrapped__() == fresh
