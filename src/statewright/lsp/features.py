"""The language features as LSP types, each a function of one document's Analysis.

Diagnostics, hover, definition, references, completion, rename, formatting, outline, folding and code
actions.

Everything here reads what the front door produced: the diagnostics as `statewright check` reports
them, the syntax tree, the checks' symbol tables and the index built from them. Nothing parses or checks
a text on its own; rename checks its result through the front door too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from lsprotocol import types

from .. import api
from ..compiler.checks.resolve import BUILTIN_TYPES, JINJA_NAMES, AgentView, StateView, Symbols
from ..diagnostics import Diagnostic, SourceFile
from ..diagnostics.explain import explain
from ..grammar import ast
from ..runtime.tool_signatures import STD_TOOLS
from .analysis import Analysis, uri_of
from .completion import completion
from .index import Key, Occurrence

EXPLAIN_COMMAND = "statewright.explainCode"
# No link unless the client names one (initializationOptions.explainLink): a `command:` URI works in one
# editor only, and there is no published documentation site to point at. The VS Code extension names its
# own explain command.
DEFAULT_EXPLAIN_LINK = ""
SOURCE = "statewright"


def lsp_range(a: Analysis, start: int, end: int) -> types.Range:
    (l1, c1), (l2, c2) = a.lines.position(start), a.lines.position(end)
    return types.Range(types.Position(l1, c1), types.Position(l2, c2))


def offset_of(a: Analysis, position: types.Position) -> int:
    return a.lines.offset(position.line, position.character)


# ---- diagnostics ---------------------------------------------------------------------------------


def diagnostics(a: Analysis, explain_link: str = DEFAULT_EXPLAIN_LINK) -> list[types.Diagnostic]:
    """Every diagnostic of the document, as `statewright check` reports it: code, exact range, severity,
    the label, help and notes, a link to the code's explanation (when the client names one), and the
    fixes its help names."""
    out = []
    for d in a.compilation.diagnostics:
        start, end = (d.span.start, d.span.end) if d.span is not None else (0, 0)
        lines = [d.message + (f": {d.label}" if d.label else "")]
        lines += [f"help: {d.help}"] if d.help else []
        lines += [f"note: {note}" for note in d.notes]
        fixes = [{"title": title, "newText": text} for title, text in fixes_for(d)]
        out.append(types.Diagnostic(
            range=lsp_range(a, start, end),
            message="\n".join(lines),
            severity=(types.DiagnosticSeverity.Error if d.severity.value == "error"
                      else types.DiagnosticSeverity.Warning),
            code=d.code,
            code_description=(types.CodeDescription(href=explain_link.replace("{code}", d.code)) if explain_link
                              else None),
            source=SOURCE,
            data={"fixes": fixes} if fixes else None,
        ))
    return out


_DID_YOU_MEAN = re.compile(r"did you mean (?:one of )?((?:'[^']+'(?:, )?)+)\?")
_SYNTAX_FIXES = {  # code and message -> the text that replaces the diagnostic's span
    ("SW1010", "'=' used as a comparison"): "==",
    ("SW1014", "'=>' is not an arrow"): "->",
    ("SW1011", "'else' is not a keyword"): "otherwise",
    ("SW1012", "'&&' is not an operator here"): "and",
    ("SW1012", "'||' is not an operator here"): "or",
    ("SW1001", "unexpected character ';'"): "",
}


def fixes_for(d: Diagnostic) -> list[tuple[str, str]]:
    """The fixes a diagnostic names itself, as (title, replacement of its span)."""
    if d.span is None:
        return []
    text = d.span.text
    fixed = _SYNTAX_FIXES.get((d.code, d.message))
    if fixed is not None:
        return [(f"Remove '{text}'" if not fixed else f"Replace '{text}' with '{fixed}'", fixed)]
    if d.code == "SW1013":
        return [(f"Write 'state {text}'", f"state {text}")]
    if d.code == "SW1014" and d.message.startswith("missing '->'"):
        return [(f"Write '-> {text}'", f"-> {text}")]
    m = _DID_YOU_MEAN.search(d.help)
    if m is None or not re.fullmatch(r"[A-Za-z_][\w.]*", text):
        return []
    return [(f"Replace '{text}' with '{name}'", name) for name in re.findall(r"'([^']+)'", m.group(1))]


def code_actions(a: Analysis, uri: str, wanted: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
    """Quick fixes for the diagnostics the client sends back (each carries its fixes in `data`)."""
    actions = []
    for d in wanted:
        data = d.data if isinstance(d.data, dict) else {}
        for i, fix in enumerate(data.get("fixes", ())):
            edit = types.TextEdit(range=d.range, new_text=fix["newText"])
            actions.append(types.CodeAction(
                title=fix["title"], kind=types.CodeActionKind.QuickFix, diagnostics=[d],
                is_preferred=i == 0, edit=types.WorkspaceEdit(changes={uri: [edit]})))
    return actions


# ---- navigation ----------------------------------------------------------------------------------


def _occurrence(a: Analysis, position: types.Position) -> Occurrence | None:
    return a.index.at(offset_of(a, position)) if a.index is not None else None


def _home(a: Analysis, key: Key) -> tuple[Analysis, Key] | None:
    """The file that declares `key` (as seen from `a`), and the key as that file names it."""
    if not key.file or key.file == a.path:
        return a, Key(key.kind, key.name)
    view = a.view_of(key.file)
    return (view, Key(key.kind, key.name)) if view is not None else None


def definition(a: Analysis, uri: str, position: types.Position) -> list[types.Location] | None:
    """Where the name under the cursor is declared: in this file, or in the file it comes from (an
    imported type, agent or tool; the machine a `run` names; a called machine's state in a test path;
    the file a `use` line names)."""
    found = _occurrence(a, position)
    if found is None:
        return None
    if found.key.kind == "file":
        view = a.view_of(found.key.name)
        return [types.Location(view.uri if view is not None else uri_of(found.key.name),
                               types.Range(types.Position(0, 0), types.Position(0, 0)))]
    home = _home(a, found.key)
    if home is None or home[0].index is None:
        return None
    view, key = home
    target = view.index.definition(key)  # type: ignore[union-attr]
    if target is None:
        return None
    return [types.Location(uri if view is a else view.uri, lsp_range(view, target.start, target.end))]


def _everywhere(a: Analysis, key: Key) -> list[tuple[Analysis, Occurrence]]:
    """Every occurrence of the thing `key` (as `a` names it) in every file of the project: in the file
    that declares it, and where other files import, run or script it."""
    want = key.of(a.path)
    found = []
    for view in a.views() if want.kind not in ("input", "variable", "field", "callee") else [a]:
        if view.index is None:
            continue
        local = Key(want.kind, want.name) if want.file == view.path else want
        found += [(view, o) for o in view.index.references(local)]
    return found


def references(a: Analysis, uri: str, position: types.Position, include_declaration: bool
               ) -> list[types.Location] | None:
    found = _occurrence(a, position)
    if found is None or a.index is None:
        return None
    return [types.Location(uri if view is a else view.uri, lsp_range(view, o.start, o.end))
            for view, o in _everywhere(a, found.key) if include_declaration or not o.definition]


# ---- hover ---------------------------------------------------------------------------------------


def hover(a: Analysis, position: types.Position) -> types.Hover | None:
    """What the name under the cursor is (a state's agent, output and transitions; a field's type and
    doc; ...), and the explanation of any diagnostic there."""
    offset = offset_of(a, position)
    parts: list[str] = []
    span: tuple[int, int] | None = None
    found = _occurrence(a, position)
    if found is not None:
        text = describe(found.key, a)
        if text:
            parts.append(text)
            span = (found.start, found.end)
    for d in a.compilation.diagnostics:
        if d.span is not None and d.span.start <= offset <= max(d.span.end, d.span.start + 1):
            parts.append(_diagnostic_text(d))
            span = span or (d.span.start, d.span.end)
    if not parts:
        return None
    content = types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts))
    return types.Hover(contents=content, range=lsp_range(a, *span) if span else None)


def _diagnostic_text(d: Diagnostic) -> str:
    lines = [f"**{d.severity.value}[{d.code}]**: {d.message}"]
    if d.help:
        lines.append(f"help: {d.help}")
    long = explain(d.code)
    if long:
        lines.append(_fence(long.rstrip()))
    return "\n\n".join(lines)


def _fence(text: str, lang: str = "text") -> str:
    return f"```{lang}\n{text}\n```"


def describe(key: Key, a: Analysis) -> str:
    """A Markdown description of one declared thing, read from the syntax tree and the symbol tables (of
    the file that declares it, for a thing of another file: that file is named too)."""
    home = _home(a, key)
    if home is not None and home[0] is not a:
        text = describe(home[1], home[0])
        return f"{text}\n\n*from* `{home[0].path}`" if text else ""
    symbols = a.compilation.symbols
    if symbols is None:
        return ""
    if key.kind in ("machine", "callee", "file"):
        return _describe_machine(key, symbols)
    if key.kind == "state" and key.name in symbols.states:
        return _describe_state(key.name, symbols.states[key.name])
    if key.kind == "agent" and key.name in symbols.agents:
        return _describe_agent(key.name, symbols.agents[key.name])
    if key.kind == "type" and key.name in symbols.types:
        decl = symbols.types[key.name]
        rows = [f"{f.name.value}: {f.type.span.text}" + (f"  # {f.doc.value}" if f.doc else "") for f in decl.fields]
        return f"**type** `{key.name}`\n\n" + _fence("\n".join(rows) or "(no fields)", "fsm")
    if key.kind == "field":
        return _describe_field(key.name, symbols)
    if key.kind == "input" and key.name in symbols.inputs:
        return "**input**\n\n" + _fence(symbols.inputs[key.name].span.text, "fsm")
    if key.kind == "variable" and key.name in symbols.variables:
        updates = [f"{view.name}: {u.span.text}" for view in symbols.states.values() for u in view.updates
                   if u.var.value == key.name]
        body = "**run variable**\n\n" + _fence(symbols.variables[key.name].span.text, "fsm")
        if updates:
            body += "\n\nupdated by\n\n" + _fence("\n".join(updates), "fsm")
        else:
            body += "\n\nno state updates it"
        return body
    if key.kind == "tool":
        return _describe_tool(key.name, symbols)
    return ""


def _describe_state(name: str, view: StateView) -> str:
    """A state: its kind, agent or call, output, listeners, bound, and its transitions as written."""
    kind = " ".join(w for w, on in (("start", view.decl.start), ("final", view.decl.final)) if on)
    lines = [f"**{kind + ' ' if kind else ''}state** `{name}`"]
    if view.agent is not None:
        lines.append(f"agent: `{view.agent.name.value}`")
    if view.call is not None:
        lines.append(f"calls: `{view.call.span.text}`")
    lines.append(f"output: `{view.output.type.span.text}`" if view.output is not None
                 else "output: plain text" if view.agent is not None else "")
    if view.tell is not None:
        lines.append(f"tells: {', '.join(f'`{n.value}`' for n in view.tell.agents)}")
    if view.visits is not None:
        count = view.visits.count
        lines.append(f"visits: at most {count.value}" + (" (an input)" if isinstance(count, ast.Name) else ""))
    body = "  \n".join(line for line in lines if line)
    if view.transitions:
        body += "\n\n" + _fence("\n".join(t.span.text for t in view.transitions), "fsm")
    return body


def _describe_agent(name: str, agent: AgentView) -> str:
    """An agent: its model, tools and memory, and the start of its prompt."""
    lines = [f"**agent** `{name}`"]
    if agent.model is not None:
        lines.append(f"model: `{agent.model.model.value}`")
    if agent.tools is not None:
        lines.append(f"tools: {', '.join(f'`{t.dotted}`' for t in agent.tools.tools)}")
    if agent.memory is not None:
        lines.append(f"memory: `{agent.memory.span.text.removeprefix('memory ').strip()}`")
    body = "  \n".join(lines)
    if agent.prompt is not None:
        body += "\n\n" + _fence(agent.prompt.text.value.strip()[:600])
    return body


def _describe_field(dotted: str, symbols: Symbols) -> str:
    """A field of a declared type (`TYPE.FIELD`): its type and what its doc string says."""
    owner, _, name = dotted.partition(".")
    owner_decl = symbols.types.get(owner)
    field_decl = next((f for f in owner_decl.fields if f.name.value == name), None) if owner_decl else None
    if field_decl is None:
        return ""
    doc = f"\n\n{field_decl.doc.value}" if field_decl.doc else ""
    return f"**field** `{owner}.{name}`: `{field_decl.type.span.text}`{doc}"


def _describe_machine(key: Key, symbols: Symbols) -> str:
    """A machine: its inputs and result (for a file a `use` line names, or a name it is run by: the
    machine that file declares)."""
    if key.kind == "machine":
        own = symbols
    else:
        used = next((u for u in symbols.uses if (u.path == key.name if key.kind == "file" else u.name == key.name)), None)
        if used is None or used.compilation is None or used.compilation.symbols is None:
            return f"**file** `{key.name}`" if key.kind == "file" else ""
        own = used.compilation.symbols
    inputs = ", ".join(f"{n}: {d.type.span.text}" for n, d in own.inputs.items()) if own.inputs else ""
    returns = f" -> {own.machine.returns.type.span.text}" if own.machine.returns is not None else ""
    finals = ", ".join(f"`{n}`" for n, v in own.states.items() if v.decl.final)
    return f"**machine** `{own.machine_name}({inputs}){returns}`" + (f"  \nends in {finals}" if finals else "")


def _describe_tool(name: str, symbols: Symbols) -> str:
    decl = symbols.tools.get(name)
    if decl is not None and decl.import_path is not None:
        return f"**tool** `{name}` = `{decl.import_path.value}`"
    std = STD_TOOLS.get(name)
    if std is None:
        return f"**tool** `{name}`"
    params = ", ".join(f"{p}: {t}{'' if required else '?'}" for p, (t, required) in std["params"].items())
    enabled = "" if std["enabled_by_default"] else "\n\nDeclare it (`tool " + name + "`) to enable it."
    return f"**standard tool** `{name}({params})`\n\n{std['doc']}{enabled}"


# ---- rename --------------------------------------------------------------------------------------

RENAMABLE = ("state", "agent", "type", "input", "variable", "machine")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RenameRefused(Exception):
    """A rename that cannot be done; the message says why."""


def prepare_rename(a: Analysis, position: types.Position) -> types.Range | None:
    found = _occurrence(a, position)
    if found is None or found.key.kind not in RENAMABLE:
        return None
    return lsp_range(a, found.start, found.end)


def rename(a: Analysis, uri: str, position: types.Position, new_name: str) -> types.WorkspaceEdit:
    """Rename a state, agent, type, input, run variable or machine everywhere it is named: declarations,
    references, guards, templates and test blocks, in its own file and in the files that import, run or
    script it. Each renamed file must check no worse than before."""
    found = _occurrence(a, position)
    if found is None or a.index is None or found.key.kind not in RENAMABLE:
        raise RenameRefused("only a state, an agent, a type, an input, a run variable or a machine can be renamed")
    key = found.key
    if not _IDENTIFIER.fullmatch(new_name):
        raise RenameRefused(f"'{new_name}' is not a name: use letters, digits and '_', not starting with a digit")
    if new_name == key.name:
        return types.WorkspaceEdit(changes={uri: []})
    if key.kind in ("state", "input", "variable") and (new_name in JINJA_NAMES or new_name == "output"):
        raise RenameRefused(f"'{new_name}' is reserved: templates or guards could not read it")
    if key.kind == "type" and new_name in BUILTIN_TYPES:
        raise RenameRefused(f"'{new_name}' is a built-in type")
    occurrences = _everywhere(a, key)
    by_view: dict[str, tuple[Analysis, list[Occurrence]]] = {}
    for view, o in occurrences:
        by_view.setdefault(view.path, (view, []))[1].append(o)
    for view, _ in by_view.values():
        _refuse_taken(a, view, key.kind, new_name)
    texts = {path: _apply(view.text, [(o.start, o.end, new_name) for o in found_here])
             for path, (view, found_here) in by_view.items()}
    _refuse_worse(a, by_view, texts)
    changes = {(uri if view is a else view.uri): [types.TextEdit(range=lsp_range(view, o.start, o.end),
                                                                 new_text=new_name) for o in found_here]
               for view, found_here in by_view.values()}
    return types.WorkspaceEdit(changes=changes)


def _refuse_taken(a: Analysis, view: Analysis, kind: str, new_name: str) -> None:
    symbols = view.compilation.symbols
    if symbols is None:
        return
    tables: dict[str, list[dict[str, Any]]] = {
        "state": [symbols.states, symbols.inputs, symbols.variables],
        "input": [symbols.states, symbols.inputs, symbols.variables],
        "variable": [symbols.states, symbols.inputs, symbols.variables],
        "agent": [symbols.agents], "type": [symbols.types], "machine": [symbols.callees]}
    if any(new_name in table for table in tables[kind]) or (kind == "machine" and new_name == symbols.machine_name):
        raise RenameRefused(f"the machine already declares '{new_name}'" if view is a
                            else f"{view.path} already declares '{new_name}'")


def _refuse_worse(a: Analysis, by_view: dict[str, tuple[Analysis, list[Occurrence]]], texts: dict[str, str]) -> None:
    """Check every renamed file with the others renamed too; refuse when one would have a new kind of error."""
    if a.project is None:
        after = {a.path: api.check_source(SourceFile(a.path, texts[a.path])).diagnostics}
    else:
        from ..compiler.project import Project, overlay_reader

        project = api.new_project(reader=overlay_reader({Project.key(p): t for p, t in texts.items()},
                                                        a.project.reader))
        after = {path: project.compile_source(SourceFile(path, text), location=path).diagnostics
                 for path, text in texts.items()}
    for path, (view, _) in by_view.items():
        before = {d.code for d in view.compilation.diagnostics if d.severity.value == "error"}
        worse = sorted({d.code for d in after[path] if d.severity.value == "error"} - before)
        if worse:
            shown = "the file" if view is a else path
            raise RenameRefused(f"renamed, {shown} would not check ({', '.join(worse)})")


def _apply(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    out, pos = [], 0
    for start, end, new in sorted(edits):
        out += [text[pos:start], new]
        pos = end
    return "".join(out) + text[pos:]


# ---- formatting ----------------------------------------------------------------------------------


def formatting(a: Analysis) -> list[types.TextEdit] | None:
    """The canonical layout (`statewright fmt`) as one edit; None when the text cannot be formatted
    (a syntax error) or already is."""
    formatted = api.format_text(a.text, a.path).text
    if formatted is None or formatted == a.text:
        return None if formatted is None else []
    return [types.TextEdit(range=lsp_range(a, 0, len(a.text)), new_text=formatted)]


# ---- the outline ---------------------------------------------------------------------------------


def document_symbols(a: Analysis) -> list[types.DocumentSymbol]:
    machine = a.compilation.ast
    if machine is None:
        return []
    K = types.SymbolKind

    def symbol(name: str, kind: types.SymbolKind, node: Any, name_span: Any, detail: str = "",
               children: list[types.DocumentSymbol] | None = None) -> types.DocumentSymbol:
        return types.DocumentSymbol(name=name, kind=kind, detail=detail or None,
                                    range=lsp_range(a, node.span.start, node.span.end),
                                    selection_range=lsp_range(a, name_span.start, name_span.end),
                                    children=children)

    children = []
    for item in machine.items:
        if isinstance(item, ast.InputDecl):
            children.append(symbol(item.name.value, K.Variable, item, item.name.span, item.type.span.text))
        elif isinstance(item, ast.TypeDecl):
            fields = [symbol(f.name.value, K.Field, f, f.name.span, f.type.span.text) for f in item.fields]
            children.append(symbol(item.name.value, K.Struct, item, item.name.span, "type", fields))
        elif isinstance(item, ast.ToolDecl):
            children.append(symbol(item.name.dotted, K.Function, item, item.name.span, "tool"))
        elif isinstance(item, ast.AgentDecl):
            children.append(symbol(item.name.value, K.Class, item, item.name.span, "agent"))
        elif isinstance(item, ast.StateDecl):
            detail = " ".join(w for w, on in (("start", item.start), ("final", item.final)) if on) + " state"
            children.append(symbol(item.name.value, K.Event if item.final else K.Function, item,
                                   item.name.span, detail.strip()))
        elif isinstance(item, ast.TestDecl):
            children.append(symbol(f'test "{item.name.value}"', K.Method, item, item.name.span, "test"))
    return [symbol(machine.name.value, K.Module, machine, machine.name.span, "machine", children)]


# ---- folding -------------------------------------------------------------------------------------

_FOLD_TOKENS = re.compile(r'"""[^"]*(?:"(?!"")[^"]*)*(?:"""|\Z)|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|#[^\n]*|[{}]')


def folding_ranges(a: Analysis) -> list[types.FoldingRange]:
    """Blocks, triple-quoted strings and runs of comment lines; read from the text, so a file with a
    syntax error still folds."""
    out: list[types.FoldingRange] = []
    opened: list[int] = []
    comments: list[int] = []

    def line(offset: int) -> int:
        return a.lines.position(offset)[0]

    def end_comments() -> None:
        if len(comments) > 1:
            out.append(types.FoldingRange(comments[0], comments[-1], kind=types.FoldingRangeKind.Comment))
        comments.clear()

    for m in _FOLD_TOKENS.finditer(a.text):
        token = m.group()
        if token.startswith("#"):
            n = line(m.start())
            if comments and n != comments[-1] + 1:
                end_comments()
            if a.text[a.text.rfind("\n", 0, m.start()) + 1 : m.start()].strip() == "":
                comments.append(n)
            continue
        end_comments()
        if token == "{":
            opened.append(line(m.start()))
        elif token == "}":
            if opened:
                start, end = opened.pop(), line(m.start()) - 1
                if end > start:
                    out.append(types.FoldingRange(start, end, kind=types.FoldingRangeKind.Region))
        elif token.startswith('"""'):
            start, end = line(m.start()), line(m.end()) - 1
            if end > start:
                out.append(types.FoldingRange(start, end, kind=types.FoldingRangeKind.Region))
    end_comments()
    return out


def explain_code(code: str) -> str:
    """The long explanation of a code, for the `statewright.explainCode` command."""
    return explain(code) or f"{code} is not a statewright diagnostic code"


__all__ = ["DEFAULT_EXPLAIN_LINK", "EXPLAIN_COMMAND", "RenameRefused", "code_actions", "completion", "definition",
           "describe", "diagnostics", "document_symbols", "explain_code", "folding_ranges", "formatting", "hover",
           "prepare_rename", "references", "rename"]
