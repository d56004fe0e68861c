"""What the tests around a template expression show: which values are surely there, which variant they are.

The narrowing rule of guards (typecheck.none_tests, ExprChecker.variant_tests), for Jinja's nodes: the
conditions of the `if` blocks and inline `if`s an expression sits in (negated in `elif` and `else`), and the
left side of an `and` or `or` it is the right side of. A macro's body is not narrowed by where the macro is
written. A test of a name the template binds counts only where no binding of that name lies inside the
narrowed part (a `set` between the test and the read would change what was tested), and a variant test
(`X is Answer`) also shows that X is there. What the transitions into the template's state show
(flow.EntryFacts) holds everywhere in its templates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from jinja2 import nodes

from .guard_facts import merge_variant_tests

# Jinja tests that are false for none: a value that passes one of them is there.
_NOT_NONE_TESTS = frozenset({"string", "number", "mapping", "sequence", "boolean", "integer", "float", "true",
                             "false"})


def jinja_path(node: nodes.Node) -> str | None:
    """A template expression as a path of names and fields (`tags`, `review.output.note`), or None;
    `x["f"]` is the path `x.f`, as in guards."""
    fields: list[str] = []
    while True:
        if isinstance(node, nodes.Getattr):
            fields.append(str(node.attr))
            node = node.node
        elif (isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const)
              and isinstance(node.arg.value, str)):
            fields.append(node.arg.value)
            node = node.node
        else:
            break
    if not (isinstance(node, nodes.Name) and node.ctx == "load"):
        return None
    return ".".join([node.name, *reversed(fields)])


def none_tests(node: nodes.Node, value: bool, variant_names: frozenset[str] = frozenset(),
               memo: dict[tuple[int, bool], set[str]] | None = None) -> set[str]:
    """The paths (`jinja_path`) surely not none when template expression `node` has the truth value
    `value`: the rule for guards (typecheck.none_tests) — `P != none` true or `P == none` false, through
    `and`, `or` and `not` — plus what only templates can write: `P` itself true, `P is none` false
    (`P is not none` true), and `P is T` true for a variant type T or a test that none never passes."""
    if memo is not None:
        key = (id(node), value)
        if key not in memo:
            memo[key] = none_tests(node, value, variant_names)
        return memo[key]
    if isinstance(node, nodes.Not):
        return none_tests(node.node, not value, variant_names)
    if isinstance(node, (nodes.And, nodes.Or)):
        left, right = none_tests(node.left, value, variant_names), none_tests(node.right, value, variant_names)
        both = isinstance(node, nodes.And) == value
        return left | right if both else left & right
    path = jinja_path(node)
    if path is not None:
        return {path} if value else set()
    if isinstance(node, nodes.Test) and not node.args:
        path = jinja_path(node.node)
        if path is None:
            return set()
        if node.name == "none":
            return {path} if not value else set()
        if value and (node.name in variant_names or node.name in _NOT_NONE_TESTS):
            return {path}
        return set()
    if isinstance(node, nodes.Compare) and len(node.ops) == 1 and node.ops[0].op in ("eq", "ne"):
        op = node.ops[0]
        for side, other in ((node.expr, op.expr), (op.expr, node.expr)):
            path = jinja_path(side)
            if path is not None and isinstance(other, nodes.Const) and other.value is None:
                return {path} if (op.op == "ne") == value else set()
    return set()


def variant_tests(node: nodes.Node, value: bool, options_of: Callable[[str], tuple[str, ...] | None]
                  ) -> dict[str, frozenset[str]]:
    """The paths whose variants are known when template expression `node` has the truth value `value`:
    `P is T` (and `P is not T`, `not`, `and`, `or`) for a path P of a variant value, whose variants are
    `options_of(P)` — the guards' rule (ExprChecker.variant_tests)."""
    if isinstance(node, nodes.Not):
        return variant_tests(node.node, not value, options_of)
    if isinstance(node, (nodes.And, nodes.Or)):
        left, right = variant_tests(node.left, value, options_of), variant_tests(node.right, value, options_of)
        if isinstance(node, nodes.And) == value:
            return merge_variant_tests(left, right)
        return {p: left[p] | right[p] for p in left.keys() & right.keys()}
    if isinstance(node, nodes.Test) and not node.args:
        path = jinja_path(node.node)
        options = options_of(path) if path is not None else None
        if path is not None and options is not None and node.name in options:
            return {path: frozenset({node.name} if value else set(options) - {node.name})}
    return {}


class IfBranches:
    """One `{% if %}` block's branches: which one each node directly inside it is in, and what the tests
    before a branch show once they are all false (worked out once per block, so that a read in the last
    of n `elif`s costs no walk over the n before it)."""

    def __init__(self, node: nodes.If) -> None:
        self.node = node
        self.tests = [node.test, *(e.test for e in node.elif_)]
        self.branch = {id(c): -1 for c in node.body}  # -1: the `if` body; k: `elif` k; else past them
        self.branch.update((id(e), k) for k, e in enumerate(node.elif_))
        self._none_false: list[set[str]] = []  # [k]: none_tests false of tests 0..k
        self._variants_false: list[dict[str, frozenset[str]]] = []

    def of(self, child: nodes.Node) -> int:
        """-1 for the `if` body, k for `elif` k, the number of `elif`s for the `else` body."""
        return self.branch.get(id(child), len(self.node.elif_))

    def none_false(self, upto: int, variant_names: frozenset[str],
                   memo: dict[tuple[int, bool], set[str]] | None) -> set[str]:
        """The paths shown there once tests 0..upto are all false."""
        while len(self._none_false) <= upto:
            before = self._none_false[-1] if self._none_false else set()
            test = self.tests[len(self._none_false)]
            self._none_false.append(before | none_tests(test, False, variant_names, memo))
        return self._none_false[upto]

    def variants_false(self, upto: int, options_of: Callable[[str], tuple[str, ...] | None]
                       ) -> dict[str, frozenset[str]]:
        """What tests 0..upto all false show about which variants paths are."""
        while len(self._variants_false) <= upto:
            before = self._variants_false[-1] if self._variants_false else {}
            test = self.tests[len(self._variants_false)]
            self._variants_false.append(merge_variant_tests(before, variant_tests(test, False, options_of)))
        return self._variants_false[upto]


class Narrowing:
    """What is known at each node of one template: `present` paths and `variants` of paths, from the tests
    around it and from what the transitions into the template's state show (`entry_present`,
    `entry_variants`)."""

    def __init__(self, parents: Mapping[int, nodes.Node], variant_names: frozenset[str],
                 options_of: Callable[[str], tuple[str, ...] | None], *,
                 bound_at: Mapping[str, list[nodes.Node]] | None = None,
                 entry_present: frozenset[str] = frozenset(),
                 entry_variants: Mapping[str, frozenset[str]] | None = None) -> None:
        self.parents = parents
        self.variant_names = variant_names
        self.options_of = options_of
        # a name the template binds -> the statements binding it; ".FIELD" -> those setting a namespace's FIELD
        self.bound_at = bound_at or {}
        self.entry_present = entry_present
        self.entry_variants = dict(entry_variants or {})
        self.memo: dict[tuple[int, bool], set[str]] = {}
        self.blocks: dict[int, IfBranches] = {}

    def _block(self, node: nodes.If) -> IfBranches:
        found = self.blocks.get(id(node))
        if found is None:
            found = self.blocks[id(node)] = IfBranches(node)
        return found

    def _holds(self, path: str, region: nodes.Node) -> bool:
        """Whether a test of `path` made at `region` still holds inside it: no binding of the path's name
        lies within the region (for a name the template binds)."""
        parts = path.split(".")
        sites = [*self.bound_at.get(parts[0], ()), *(self.bound_at.get("." + parts[1], ()) if len(parts) > 1 else ())]
        if not sites:
            return True
        for site in sites:
            node: nodes.Node | None = site
            while node is not None:
                if node is region:
                    return False
                node = self.parents.get(id(node))
        return True

    def _around(self, node: nodes.Node) -> list[tuple[nodes.Node, nodes.Node]]:
        """The (parent, child) pairs from `node` up to the template or the macro it is in."""
        out = []
        child = node
        parent = self.parents.get(id(child))
        while parent is not None and not isinstance(parent, (nodes.Macro, nodes.CallBlock)):
            out.append((parent, child))
            child, parent = parent, self.parents.get(id(parent))
        return out

    def present(self, node: nodes.Node) -> set[str]:
        """The paths the tests around `node` show to be there."""
        shown: set[str] = set(self.entry_present)
        names = self.variant_names
        for parent, child in self._around(node):
            found: set[str] = set()
            if isinstance(parent, nodes.If) and child is not parent.test:
                block = self._block(parent)
                branch = block.of(child)
                found = (none_tests(parent.test, True, names, self.memo) if branch < 0
                         else block.none_false(branch, names, self.memo))
            elif isinstance(parent, nodes.CondExpr) and child is not parent.test:
                found = none_tests(parent.test, child is parent.expr1, names, self.memo)
            elif isinstance(parent, nodes.And) and child is parent.right:
                found = none_tests(parent.left, True, names, self.memo)
            elif isinstance(parent, nodes.Or) and child is parent.right:
                found = none_tests(parent.left, False, names, self.memo)
            shown |= {p for p in found if self._holds(p, parent)}
        return shown

    def variants(self, node: nodes.Node) -> dict[str, frozenset[str]]:
        """What the `is` tests around `node` show about which variants paths are."""
        shown: dict[str, frozenset[str]] = dict(self.entry_variants)
        options = self.options_of
        for parent, child in self._around(node):
            found: dict[str, frozenset[str]] = {}
            if isinstance(parent, nodes.If) and child is not parent.test:
                block = self._block(parent)
                branch = block.of(child)
                found = (variant_tests(parent.test, True, options) if branch < 0
                         else block.variants_false(branch, options))
            elif isinstance(parent, nodes.CondExpr) and child is not parent.test:
                found = variant_tests(parent.test, child is parent.expr1, options)
            elif isinstance(parent, nodes.And) and child is parent.right:
                found = variant_tests(parent.left, True, options)
            elif isinstance(parent, nodes.Or) and child is parent.right:
                found = variant_tests(parent.left, False, options)
            if found:
                shown = merge_variant_tests(shown, {p: o for p, o in found.items() if self._holds(p, parent)})
        return shown
