"""A crew's Python source read statically with `ast`: never imported, never executed.

What `@CrewBase` binds: the `@agent`, `@task` and `@crew` methods in the order they are written, the
keywords of the `Agent(...)`, `Task(...)` and `Crew(...)` calls they return, the tools named in them, the
`@tool` functions, and the pydantic models a task may produce. Anything that is not a literal the reader
can follow (a value computed at run time) is left out, and the importer says so where it matters.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, SourceFile, Span


@dataclass
class PyCall:
    """A method decorated `@agent`, `@task` or `@crew`, and the keywords of the call it returns."""

    method: str
    span: Span  # the method's name where it is defined
    keywords: dict[str, ast.expr] = field(default_factory=dict)
    config_key: str | None = None  # `config=self.agents_config['KEY']`
    call: str = ""  # the called class: Agent, Task, Crew


@dataclass
class PySource:
    source: SourceFile
    tree: ast.Module
    class_name: str | None = None
    agents_config: str | None = None  # the path the class names, relative to the file
    tasks_config: str | None = None
    agents: list[PyCall] = field(default_factory=list)
    tasks: list[PyCall] = field(default_factory=list)
    crew: PyCall | None = None
    helpers: list[PyCall] = field(default_factory=list)  # undecorated methods (a manager agent may be one)
    tool_methods: set[str] = field(default_factory=set)  # methods decorated @tool in the crew class
    tool_functions: dict[str, str] = field(default_factory=dict)  # module `@tool("Name")` functions: name -> label
    assigned: dict[str, ast.expr] = field(default_factory=dict)  # module-level NAME = value

    def span(self, node: ast.AST) -> Span:
        return ast_span(self.source, node)


def ast_span(source: SourceFile, node: ast.AST) -> Span:
    """The span of `node` in `source` (ast columns count UTF-8 bytes; spans count characters)."""
    line = getattr(node, "lineno", 1)
    start = _offset(source, line, getattr(node, "col_offset", 0))
    end_line = getattr(node, "end_lineno", None) or line
    end = _offset(source, end_line, getattr(node, "end_col_offset", None) or 0)
    if end_line != line:  # keep a span on its first line: that is the line a diagnostic shows
        end = _offset(source, line, len(source.line_text(line).encode("utf-8")))
    return source.span(start, max(start, end))


def _offset(source: SourceFile, line: int, byte_col: int) -> int:
    line = max(1, min(line, source.line_count))
    text = source.line_text(line)
    return _line_start(source, line) + len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _line_start(source: SourceFile, line: int) -> int:
    """The offset where 1-based `line` starts (the position of its first character, worked out by search)."""
    low, high = 0, len(source.text)
    while low < high:  # the first offset whose position is on `line` or later
        mid = (low + high) // 2
        if source.position(mid).line < line:
            low = mid + 1
        else:
            high = mid
    return low


def parse_python(source: SourceFile, diagnostics: Diagnostics) -> PySource | None:
    """Read a crew's Python file; a file that does not parse is SW8011 at the place Python stopped."""
    try:
        tree = ast.parse(source.text, filename=source.path)
    except SyntaxError as e:
        line = e.lineno or 1
        col = max((e.offset or 1) - 1, 0)
        text = source.line_text(line)
        start = _line_start(source, line) + min(col, len(text))
        diagnostics.report("SW8011", f"the crew's Python source does not parse: {e.msg}",
                           source.span(start, start + 1), label="Python stopped here",
                           help="the importer reads crew.py as Python without running it: fix the syntax first")
        return None
    except (ValueError, RecursionError, MemoryError) as e:
        diagnostics.report("SW8011", f"the crew's Python source does not parse: {type(e).__name__}",
                           source.span(0, 1), label="Python stopped here")
        return None
    py = PySource(source, tree)
    for node in tree.body:
        _read_module_item(node, py)
    return py


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    names = []
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, ast.Attribute):
            names.append(target.attr)
    return names


def _read_module_item(node: ast.stmt, py: PySource) -> None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        py.assigned[node.targets[0].id] = node.value
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        py.assigned[node.target.id] = node.value
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "tool" in _decorator_names(node):
        py.tool_functions[node.name] = _tool_label(node) or node.name
    elif isinstance(node, ast.ClassDef) and "CrewBase" in _decorator_names(node) and py.class_name is None:
        py.class_name = node.name
        for item in node.body:
            _read_class_item(item, py)


def _tool_label(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    for d in node.decorator_list:
        if isinstance(d, ast.Call) and d.args and isinstance(d.args[0], ast.Constant) and isinstance(
                d.args[0].value, str):
            return d.args[0].value
    return None


def _read_class_item(item: ast.stmt, py: PySource) -> None:
    if isinstance(item, (ast.Assign, ast.AnnAssign)):
        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
        for target in targets:
            if isinstance(target, ast.Name) and isinstance(item.value, ast.Constant) and isinstance(
                    item.value.value, str):
                if target.id == "agents_config":
                    py.agents_config = item.value.value
                elif target.id == "tasks_config":
                    py.tasks_config = item.value.value
        return
    if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    decorators = _decorator_names(item)
    name_span = _def_name_span(py.source, item)
    kinds = [("agent", py.agents), ("task", py.tasks)]
    for kind, into in kinds:
        if kind in decorators:
            into.append(_returned_call(item, name_span))
            return
    if "crew" in decorators:
        py.crew = _returned_call(item, name_span)
    elif "tool" in decorators:
        py.tool_methods.add(item.name)
    elif not decorators:
        py.helpers.append(_returned_call(item, name_span))


def _def_name_span(source: SourceFile, item: ast.FunctionDef | ast.AsyncFunctionDef) -> Span:
    line = item.lineno
    text = source.line_text(line)
    col = text.find(item.name, text.find("def") + 3 if "def" in text else 0)
    start = _line_start(source, line) + max(col, 0)
    return source.span(start, start + len(item.name))


def _returned_call(item: ast.FunctionDef | ast.AsyncFunctionDef, span: Span) -> PyCall:
    """The keywords of the `Agent(...)`, `Task(...)` or `Crew(...)` call the method returns (the last
    return whose value is a call), following a local `x = Task(...)` returned as `x`."""
    found = PyCall(item.name, span)
    local: dict[str, ast.expr] = {}
    call: ast.Call | None = None
    for node in ast.walk(item):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            local[node.targets[0].id] = node.value
        if isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Name) and value.id in local:
                value = local[value.id]
            if isinstance(value, ast.Call):
                call = value
    if call is None:
        return found
    found.call = call_name(call) or ""
    for kw in call.keywords:
        if kw.arg is not None:
            found.keywords[kw.arg] = kw.value
    config = found.keywords.get("config")
    if isinstance(config, ast.Subscript):
        key = config.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.config_key = key.value
    return found


def call_name(node: ast.expr) -> str | None:
    """The name a call calls: `SerperDevTool()` -> SerperDevTool, `tools.Search()` -> Search."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def self_method(node: ast.expr) -> str | None:
    """`self.research()` or `self.research` -> research; anything else -> None."""
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return target.attr
    return None


def literal(node: ast.expr | None) -> object:
    """The value of a constant (a string, number, bool, None), or `...` for anything computed."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return ...
    return ...
