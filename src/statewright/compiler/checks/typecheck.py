"""Type checks over the machine: declarations, input defaults, tool options, guards and tool calls.

Type declarations (enums, recursive and too deeply nested types), input defaults, tool options, each
state's guards, tool calls, maps and joins; `check_types` runs them all. The types themselves are in
type_algebra.py, values against types in values.py and the expression checker in expressions.py.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...diagnostics import Diagnostics, did_you_mean, quoted_list
from ...grammar import ast
from ...runtime.tool_signatures import STD_TOOLS
from .. import ir
from .expression_hints import boolean_hint
from .expressions import ExprChecker
from .flow import EntryFacts, Flow
from .resolve import (
    StateView,
    Symbols,
)
from .type_algebra import (
    TypeLike,
    assignable,
    branch_output_type,
    common_type,
    is_bool,
    normalized,
    parse_signature_type,
    type_text,
    without_optional,
)
from .values import is_number_text, value_problems

# ---- checks over the machine ---------------------------------------------------------------------


def _type_refs(machine: ast.Machine) -> Iterator[ast.TypeRef]:
    for item in machine.items:
        if isinstance(item, ast.InputDecl):
            yield item.type
        elif isinstance(item, ast.TypeDecl):
            yield from (f.type for f in item.fields)
        elif isinstance(item, ast.StateDecl):
            yield from (i.type for i in item.items
                        if isinstance(i, ast.OutputDecl) and not isinstance(i.type, ast.VariantType))


def _check_enums(machine: ast.Machine, diags: Diagnostics) -> None:
    for ref in _type_refs(machine):
        for node in ast.iter_type_ref(ref):
            if not isinstance(node, ast.EnumType):
                continue
            seen: set[str] = set()
            for v in node.values:
                if v.value in seen:
                    diags.report("SW4010", f"enum value \"{v.value}\" is listed twice", v.span,
                                 label="repeated value", help="list each value once")
                elif v.value.strip() == "":
                    diags.report("SW4010", "an enum value may not be empty", v.span,
                                 label="empty value", help="give each choice a name: \"ok\" | \"failed\"")
                seen.add(v.value)


def _named_refs(ref: ast.TypeRef) -> Iterator[ast.NamedType]:
    return (node for node in ast.iter_type_ref(ref) if isinstance(node, ast.NamedType))


def _check_recursive_types(symbols: Symbols, diags: Diagnostics) -> None:
    """Report each cycle of types containing themselves once, at the field that closes it.

    Only a type on a cycle can contain itself: the types of the graph's strongly connected components
    that have a cycle are searched, each for its first path back to itself (depth first, fields in order),
    within its component. A chain of types as long as a spec can hold is linear to check."""
    edges: dict[str, list[tuple[str, ast.FieldDecl]]] = {}
    for name, decl in symbols.types.items():
        edges[name] = [(ref.name.value, f) for f in decl.fields for ref in _named_refs(f.type)
                       if ref.name.value in symbols.types]
    component = _cyclic_components(edges)
    reported: set[frozenset[str]] = set()
    for start in symbols.types:
        if start not in component:
            continue
        step = _path_back(start, edges, component)
        members = frozenset(n for n, _ in step)
        if members in reported:
            continue
        reported.add(members)
        chain = " -> ".join(f"{n}.{f.name.value}" for n, f in step) + f" -> {start}"
        diags.report("SW4009", f"type '{start}' contains itself", step[0][1].type.span, label=chain,
                     help="a structured output needs a finite schema; store references as str ids or flatten "
                          "the nesting")


def _check_type_depth(symbols: Symbols, diags: Diagnostics) -> None:
    """Report each type whose values nest more than MAX_NESTING levels of records and lists, counted through
    the types it uses (a chain of named types nests as deep as one type written out): a structured output's
    schema and its replies stay within what every face reads (the reply's depth limit, the JSON schema).

    Only the outermost type of a chain too deep is reported (those that use it are deeper still, and say
    nothing new). Depths are worked out once each, with a stack: a chain of thousands of types is linear and
    recursion-free. Types on a cycle are SW4009's and are left out."""
    from ...grammar.nesting import MAX_NESTING

    types = symbols.types
    # the named types each field refers to, with the levels of lists the field puts around it
    uses: dict[str, list[tuple[str, int]]] = {}
    for name, decl in types.items():
        refs = []
        for f in decl.fields:
            lists = 0
            for node in ast.iter_type_ref(f.type):
                if isinstance(node, ast.ListType):
                    lists += 1
                elif isinstance(node, ast.NamedType) and node.name.value in types:
                    refs.append((node.name.value, lists))
            refs.append(("", lists))  # the field's own lists, whatever it holds
        uses[name] = refs
    depth: dict[str, int] = {}
    deepest: dict[str, str] = {}  # type -> the type its depth comes through ("" for none)
    on_stack: set[str] = set()
    for root in types:
        stack = [root]
        while stack:
            name = stack[-1]
            if name in depth:
                stack.pop()
                continue
            pending = [used for used, _ in uses[name] if used and used not in depth]
            if pending and name not in on_stack:
                on_stack.add(name)
                stack.extend(u for u in pending if u not in on_stack)
                continue
            on_stack.discard(name)
            stack.pop()
            best, through = 0, ""
            for used, lists in uses[name]:
                d = lists + (depth.get(used, 0) if used else 0)  # a cycle's types count 0 here (SW4009)
                if d > best:
                    best, through = d, used
            depth[name], deepest[name] = 1 + best, through
    too_deep = {name for name, d in depth.items() if d > MAX_NESTING}
    inner = {deepest[name] for name in too_deep}
    for name in types:
        if name not in too_deep or name in inner:
            continue
        chain = [name]
        while deepest[chain[-1]] and len(chain) < 4:
            chain.append(deepest[chain[-1]])
        shown = " -> ".join(chain) + (" -> ..." if deepest[chain[-1]] else "")
        diags.report("SW4015", f"type '{name}' nests {depth[name]} levels of records and lists deep, through the "
                     f"types it uses; at most {MAX_NESTING} are allowed", types[name].name.span, label=shown,
                     help="flatten the nesting: a structured output this deep is no schema a model can fill; "
                          "refer to deeper parts by str ids or split them into states of their own")


def _path_back(start: str, edges: dict[str, list[tuple[str, ast.FieldDecl]]],
               component: dict[str, int]) -> list[tuple[str, ast.FieldDecl]]:
    """The first path from `start` back to itself that a depth-first search finds, as (type, field) steps;
    `start` is on a cycle, so there is one, and it stays in `start`'s component."""
    within = component[start]
    came_from: dict[str, tuple[str, ast.FieldDecl]] = {}
    stack = [start]
    while stack:
        node = stack.pop()
        for target, fld in edges[node]:
            if target == start:
                step = [(node, fld)]
                while node != start:
                    node, f = came_from[node]
                    step.append((node, f))
                return step[::-1]
            if target not in came_from and component.get(target) == within:
                came_from[target] = (node, fld)
                stack.append(target)
    raise AssertionError(f"type {start!r} is on no cycle")


def _cyclic_components(edges: dict[str, list[tuple[str, ast.FieldDecl]]]) -> dict[str, int]:
    """Each type on a cycle -> the number of its strongly connected component."""
    from .flow import strongly_connected_components

    names = list(edges)
    number = {name: i for i, name in enumerate(names)}
    successors = [[number[target] for target, _ in edges[name]] for name in names]
    component: dict[str, int] = {}
    for k, members in enumerate(strongly_connected_components(len(names), successors)):
        if len(members) > 1 or members[0] in successors[members[0]]:
            component.update((names[m], k) for m in members)
    return component


def _check_inputs(symbols: Symbols, diags: Diagnostics) -> None:
    for decl in symbols.inputs.values():
        if decl.default is None:
            continue
        want = symbols.resolve_type(decl.type)
        for p in value_problems(decl.default, want, symbols, decl.constraints):
            fits = "its constraints" if p.constraint else f"its type {type_text(want)}"
            diags.report("SW4006", f"the default of input '{decl.name.value}' does not fit {fits}", p.span,
                         label=p.message, help=p.help)


def _check_tool_options(symbols: Symbols, diags: Diagnostics) -> None:
    for name, decl in symbols.tools.items():
        if not decl.options:
            continue
        if name not in STD_TOOLS:
            if decl.name.parts[0] != "std":
                first = decl.options[0]
                diags.report("SW2011", f"user tool '{name}' takes no options", first.name.span,
                             label="not an option of a user tool",
                             help="configure a user tool in its own Python code")
            continue
        allowed: dict[str, str] = STD_TOOLS[name]["options"]
        seen: set[str] = set()
        for opt in decl.options:
            key = opt.name.value
            if key in seen:
                diags.report("SW2010", f"option '{key}' is given twice for '{name}'", opt.name.span,
                             label="second occurrence", help=f"keep one '{key}'; the first one is used")
                continue
            seen.add(key)
            if key not in allowed:
                diags.report("SW2011", f"'{name}' has no option '{key}'", opt.name.span,
                             label="unknown option",
                             help=did_you_mean(key, allowed) or (
                                 f"its options are {quoted_list(sorted(allowed))}" if allowed else
                                 f"'{name}' takes no options"))
                continue
            want = parse_signature_type(allowed[key])
            for p in value_problems(opt.value, want, symbols):
                diags.report("SW4006", f"option '{key}' of '{name}' must be {type_text(want)}", p.span,
                             label=p.message, help=p.help)


def _check_each(view: StateView, each: ast.ForEach, symbols: Symbols, diags: Diagnostics,
                flow: Flow | None, entered: EntryFacts) -> None:
    """The list a state maps over is a list; its element's type (and the index's) is noted for the state's
    tool call and templates."""
    checker = ExprChecker(symbols, diags, None, reader=view.name, flow=flow).knowing(entered)
    listed = without_optional(checker.present(checker.infer(each.items), each.items))
    element: TypeLike = ir.ANY
    if isinstance(listed, ir.ListOf):
        element = listed.item
    elif listed != ir.ANY:
        diags.report("SW4060", f"state '{view.name}' maps over {type_text(listed)}, not a list", each.items.span,
                     label=f"this is {type_text(listed)}",
                     help="map over a list: a list input, a list field of a state's output ('STATE.output.FIELD'), "
                          "or the output of a map or a parallel state")
    names: dict[str, TypeLike] = {each.item.value: element}
    if each.index is not None:
        names.setdefault(each.index.value, ir.INT)
    symbols.each_names[view.name] = names


def _check_join_guard(view: StateView, join: ast.Join, symbols: Symbols, diags: Diagnostics,
                      flow: Flow | None) -> None:
    """`join first where GUARD`: a boolean over one branch's output, as `output`."""
    if join.guard is None:
        return
    branch = common_type([branch_output_type(ends, symbols) for _, ends in symbols.branches.get(view.name, ())])
    checker = ExprChecker(symbols, diags, view, flow=flow, output=branch)
    result = checker.infer(join.guard)
    if not is_bool(result):
        diags.report("SW4004", f"the join guard is {type_text(normalized(result))}, not a boolean", join.guard.span,
                     label="not true/false", help=boolean_hint(join.guard.span.text, without_optional(result)))


def _check_guards_and_calls(symbols: Symbols, diags: Diagnostics, flow: Flow | None) -> None:
    facts: dict[str, EntryFacts] = symbols.entry_facts
    in_branch: dict[str, set[str]] = {}  # a branch's entry -> its states
    for state, entry in symbols.branch_of.items():
        in_branch.setdefault(entry, set()).add(state)
    for view in symbols.states.values():
        entered = facts.get(view.name, EntryFacts())
        branches = (frozenset().union(*(in_branch.get(e, ()) for e, _ in symbols.branches.get(view.name, ())))
                    if view.name in facts else frozenset())
        after = entered.after_step(view.name, branches)
        if view.each is not None:
            _check_each(view, view.each, symbols, diags, flow, entered)
        if view.parallel is not None and view.join is not None:
            _check_join_guard(view, view.join, symbols, diags, flow)
        if not view.decl.final:
            guards = ExprChecker(symbols, diags, view, flow=flow).knowing(after)
            for t in view.transitions:
                if t.kind == "guard" and t.guard is not None:
                    guards.guard = t
                    result = guards.infer(t.guard)
                    if not is_bool(result):
                        diags.report("SW4004", f"the guard is {type_text(normalized(result))}, not a boolean",
                                     t.guard.span, label="not true/false",
                                     help=boolean_hint(t.guard.span.text, without_optional(result)))
        if view.call is not None:
            args = ExprChecker(symbols, diags, None, reader=view.name, flow=flow,
                               local=symbols.each_names.get(view.name)).knowing(entered)
            _check_call(view.call, symbols, diags, args)



def _check_call(call: ast.ToolCall, symbols: Symbols, diags: Diagnostics, args: ExprChecker) -> None:
    name = call.tool.dotted
    params: dict[str, tuple[str, bool]] | None = None
    if name in STD_TOOLS:
        params = STD_TOOLS[name]["params"]
    given = {a.name.value for a in call.args}
    missing = [p for p, (_, required) in (params or {}).items() if required and p not in given]
    unknown = [a for a in call.args if params is not None and a.name.value not in params]
    seen: set[str] = set()
    for arg in call.args:
        t = args.infer(arg.value)
        key = arg.name.value
        if key in seen:
            diags.report("SW4011", f"argument '{key}' is given twice", arg.name.span,
                         label="second occurrence",
                         help=f"pass '{key}' once")
            continue
        seen.add(key)
        if params is None:
            continue  # user tools take any arguments; their own signature decides at run time
        if key not in params:
            hint = did_you_mean(key, params)
            if not hint and len(unknown) == 1 and len(missing) == 1:
                hint = f"did you mean '{missing[0]}'? ('{name}' needs it)"
            diags.report("SW4011", f"'{name}' has no parameter '{key}'", arg.name.span,
                         label="unknown parameter",
                         help=hint or f"its parameters are {quoted_list(params)}")
            continue
        want = parse_signature_type(params[key][0])
        if not isinstance(want, ir.Optional_):
            t = args.present(t, arg.value)
        if not assignable(t, want):
            diags.report("SW4006", f"argument '{key}' of '{name}' must be {type_text(want)}, "
                         f"not {type_text(normalized(t))}", arg.value.span, label=f"this is {type_text(normalized(t))}",
                         help=_argument_hint(key, arg.value, want))
    misspelled = len(unknown) == 1 and len(missing) == 1  # then reported above as a misspelling
    if missing and not misspelled:
        diags.report("SW4011", f"'{name}' needs the argument{'s' if len(missing) > 1 else ''} "
                     + ", ".join(f"'{m}'" for m in missing), call.tool.span,
                     label="missing " + ", ".join(missing),
                     help=f"write {name}(" + ", ".join(f"{m} = ..." for m in missing) + ")")


def _argument_hint(key: str, value: ast.Expr, want: ir.Type) -> str:
    """How to pass a value of the wanted type as argument `key`."""
    wanted = without_optional(want)
    if not isinstance(wanted, ir.Prim) or wanted.name not in _EXAMPLE_ARGUMENTS:
        return ""
    if (isinstance(value, ast.Literal) and isinstance(value.value, str)
            and is_number_text(value.value, wanted)):
        return f"write the number without quotes: {key} = {value.value.strip()}"
    return f"write e.g. {key} = {_EXAMPLE_ARGUMENTS[wanted.name]}"


_EXAMPLE_ARGUMENTS = {"int": "3", "float": "30", "bool": "true", "str": '"..."'}


def check_types(machine: ast.Machine, symbols: Symbols, diagnostics: Diagnostics,
                flow: Flow | None = None) -> None:
    """Type declarations, input defaults, tool options, guards and tool-call arguments.

    With `flow`, a state's output read where that state may not have run yet is reported (SW4014)."""
    _check_enums(machine, diagnostics)
    _check_recursive_types(symbols, diagnostics)
    _check_type_depth(symbols, diagnostics)
    _check_inputs(symbols, diagnostics)
    _check_tool_options(symbols, diagnostics)
    _check_guards_and_calls(symbols, diagnostics, flow)
