"""Syntax-tree and IR nodes behave as frozen dataclasses would, without generating code at import."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
from dataclasses import field

import pytest

from statewright.compiler import ir
from statewright.diagnostics import SourceFile, Span
from statewright.grammar import ast
from statewright.grammar.node import Node, field_names

SOURCE = SourceFile("a.fsm", "draft review")


class Pair(Node):
    left: str
    right: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)
    note: str = field(default="", compare=False, repr=False)


def test_construction_by_position_keyword_and_default() -> None:
    assert Pair("a", 1).right == 1
    assert Pair(left="a").right == 0
    assert Pair("a", tags=("x",)).tags == ("x",)
    assert Pair("a").tags == ()


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {}, "missing 1 required positional argument: 'left'"),
    (("a", 1, (), "", "extra"), {}, "takes from 2 to 5 positional arguments"),
    (("a",), {"left": "b"}, "multiple values for argument 'left'"),
    (("a",), {"colour": "red"}, "unexpected keyword argument 'colour'"),
])
def test_wrong_arguments_are_a_type_error(args: tuple[object, ...], kwargs: dict[str, object],
                                          message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Pair(*args, **kwargs)


def test_equality_and_hash_ignore_fields_that_are_not_compared() -> None:
    assert Pair("a", 1, note="x") == Pair("a", 1, note="y")
    assert hash(Pair("a", 1, note="x")) == hash(Pair("a", 1, note="y"))
    assert Pair("a", 1) != Pair("a", 2)
    assert len({Pair("a"), Pair("a"), Pair("b")}) == 2


def test_nodes_of_different_classes_are_never_equal() -> None:
    assert ast.ModelSetting(ast.String("m")) != ast.VerifierModelSetting(ast.String("m"))
    assert ast.Name("x").__eq__("x") is NotImplemented


def test_spans_stay_out_of_equality_in_the_syntax_tree_and_the_ir() -> None:
    assert ast.Name("draft", SOURCE.span(0, 5)) == ast.Name("draft", SOURCE.span(6, 12))
    assert ast.String("x", triple=True) == ast.String("x", triple=False)
    assert ir.State("a", "final", origin=SOURCE.span(0, 5)) == ir.State("a", "final")


def test_assignment_and_deletion_are_refused() -> None:
    name = ast.Name("draft")
    with pytest.raises(dataclasses.FrozenInstanceError):
        name.value = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del name.value  # type: ignore[misc]
    assert name.value == "draft"


def test_repr_shows_the_fields_a_dataclass_would_show() -> None:
    assert repr(Pair("a", 1, note="hidden")) == "Pair(left='a', right=1, tags=())"
    assert repr(ast.Name("draft", SOURCE.span(0, 5))) == "Name(value='draft')"


def test_dataclasses_functions_see_the_fields() -> None:
    state = ir.State("a", "agent", agent="w", origin=SOURCE.span(0, 5))
    assert dataclasses.is_dataclass(state) and dataclasses.is_dataclass(ir.State)
    assert [f.name for f in dataclasses.fields(state)] == list(field_names(state))
    assert [f.name for f in dataclasses.fields(ast.String)] == ["value", "triple", "span"]
    moved = dataclasses.replace(state, name="b")
    assert (moved.name, moved.agent, moved.origin) == ("b", "w", state.origin)
    assert dataclasses.asdict(Pair("a", 1)) == {"left": "a", "right": 1, "tags": (), "note": ""}
    assert dataclasses.astuple(ir.Limits()) == (100, None, None, None)


def test_match_statements_see_the_fields_in_order() -> None:
    assert ast.Attribute.__match_args__ == ("value", "attr", "span")


def test_nodes_survive_pickling_and_copying() -> None:
    node = ast.BinaryOp(">=", ast.NameExpr("score", SOURCE.span(0, 5)), ast.Literal(85), SOURCE.span(0, 12))
    assert pickle.loads(pickle.dumps(node)) == node
    assert copy.deepcopy(node) == node and copy.copy(node) == node
    copied = copy.deepcopy(node.span)
    assert (copied.start, copied.end, copied.text) == (0, 12, "draft review")
    assert copy.copy(node.span) == node.span and pickle.loads(pickle.dumps(node.span.start_pos)).column == 1


def test_spans_and_positions_are_immutable_values() -> None:
    span = SOURCE.span(0, 5)
    assert span == SOURCE.span(0, 5) and hash(span) == hash(SOURCE.span(0, 5))
    assert span != SourceFile("a.fsm", "draft review").span(0, 5)  # another file, even with the same text
    assert span.start_pos == span.start_pos and repr(span) == "Span(start=0, end=5)"
    with pytest.raises(AttributeError):
        span.start = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        span.start_pos.line = 2  # type: ignore[misc]


def test_a_class_may_define_its_own_equality() -> None:
    class Exact(Node):
        value: object

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Exact) and type(self.value) is type(other.value) and self.value == other.value

        def __hash__(self) -> int:
            return hash((type(self.value).__name__, self.value))

    assert Exact(1) != Exact(1.0) and Exact(1) == Exact(1)


def test_a_subclass_keeps_its_parents_fields_first() -> None:
    class Triple(Pair):
        extra: str = "e"

    assert field_names(Triple) == ("left", "right", "tags", "note", "extra")
    assert Triple("a").extra == "e" and Pair("a").left == "a"


def test_a_field_without_a_default_after_one_with_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows"):
        class Bad(Node):
            first: int = 0
            second: int


def test_importing_the_tree_compiles_no_methods() -> None:
    code = (
        "from statewright.grammar import ast\n"
        "from statewright.compiler import ir\n"
        "from statewright.grammar.node import Node\n"
        "classes = [c for m in (ast, ir) for c in vars(m).values() if isinstance(c, type) and issubclass(c, Node)]\n"
        "assert len(classes) > 60, len(classes)\n"
        "assert all(c.__init__ is Node.__init__ for c in classes if c is not ir.Prim)\n"
        "assert all('_dataclass_fields' not in vars(c) for c in classes)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


class Tally(Node, frozen=False):
    name: str
    seen: set[str] = field(default_factory=set)


def test_a_mutable_node_is_assignable_and_unhashable_like_a_plain_dataclass() -> None:
    tally = Tally("a")
    tally.name = "b"
    tally.seen.add("x")
    assert tally == Tally("b", {"x"}) and Tally("a").seen is not Tally("a").seen
    with pytest.raises(TypeError):
        hash(tally)
    assert dataclasses.fields(Tally)[0].name == "name" and dataclasses.replace(tally, name="c").name == "c"


def test_frozen_and_mutable_nodes_do_not_inherit_from_each_other() -> None:
    with pytest.raises(TypeError, match="cannot inherit"):
        class Frozen(Tally):
            pass


def test_a_frozen_node_with_its_own_equality_stays_hashable_as_a_frozen_dataclass_does() -> None:
    class Loose(Node):
        value: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Loose) and abs(self.value - other.value) < 2

    assert Loose(1) == Loose(2) and isinstance(hash(Loose(1)), int)


def test_a_node_is_a_record_of_slots_with_no_dict() -> None:
    node = ast.NameExpr("score", SOURCE.span(0, 5))
    assert not hasattr(node, "__dict__")
    # a slot per field, the span kept as its file and its packed offsets (no Span object per node)
    assert ast.NameExpr.__slots__ == ("name", "_span_source", "_span_offsets")
    assert [f.name for f in dataclasses.fields(ast.NameExpr)] == ["name", "span"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.span = SOURCE.span(1, 2)  # type: ignore[misc]


def test_a_nodes_span_reads_back_as_the_span_it_was_given() -> None:
    span = SOURCE.span(3, 9)
    node = ast.NameExpr("score", span)
    assert node.span == span and node.span.source is SOURCE and (node.span.start, node.span.end) == (3, 9)
    assert node.span.start_pos == span.start_pos and hash(node.span) == hash(span)
    assert ast.NameExpr("score").span is None and ast.NameExpr("score", None).span is None
    stand_in = object()  # not a Span: kept as it is
    assert ast.NameExpr("score", stand_in).span is stand_in  # type: ignore[arg-type]
    for twin in (copy.copy(node), dataclasses.replace(node, name="other")):
        assert twin.span == span
    deep = copy.deepcopy(node).span  # a copy of the file too, as a deep copy of a Span makes
    assert (deep.start, deep.end, deep.source.text) == (3, 9, SOURCE.text)
    assert pickle.loads(pickle.dumps(node)).span.start == 3
    assert dataclasses.replace(node, span=SOURCE.span(0, 1)).span == SOURCE.span(0, 1)
    assert "span" not in repr(node) and node == ast.NameExpr("score", SOURCE.span(0, 1))  # not compared

    class Movable(Node, frozen=False):
        name: str
        span: Span = dataclasses.field(default=None, compare=False)  # type: ignore[assignment]

    movable = Movable("x")
    assert movable.span is None
    movable.span = span
    assert movable.span == span
    del movable.span  # as any other field of a mutable node
    with pytest.raises(AttributeError):
        movable.span  # noqa: B018 - reading a deleted field
    movable.span = None
    assert movable.span is None


def test_a_field_declared_as_a_span_is_kept_as_one_too() -> None:
    """Any field declared `Span` or `Span | None` (an IR node's `origin`) is kept as its file and packed
    offsets, as `span` is, and reads back as an equal Span; other fields are left alone."""
    assert ir.StateRead.__slots__ == ("state", "template", "_origin_source", "_origin_offsets")
    span = SOURCE.span(6, 12)
    read = ir.StateRead("review", "instruction", span)
    assert read.origin == span and read.origin.source is SOURCE
    assert ir.StateRead("review", "instruction").origin is None
    assert read == ir.StateRead("review", "instruction", SOURCE.span(0, 1))  # origins are not compared
    assert dataclasses.replace(read, state="draft").origin == span
    assert pickle.loads(pickle.dumps(read)).origin.end == 12

    class Labelled(Node):
        label: str
        where: Span | None = None
        note: str = ""

    assert Labelled.__slots__ == ("label", "note", "_where_source", "_where_offsets")
    assert Labelled("x", span, "n").where == span and Labelled("x", span, "n").note == "n"
