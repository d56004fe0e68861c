"""The base of syntax-tree and IR nodes: immutable records declared like frozen dataclasses.

A node class is written as a dataclass would be, annotations and `field(...)` included (and
`class View(Node, frozen=False)` for a mutable record, as `@dataclass` alone would make it):

    class Attribute(Node):
        value: Expr
        attr: Name
        span: Span = field(default=None, compare=False, repr=False)

and behaves as `@dataclass(frozen=True, slots=True)` would make it: keyword or positional construction
with defaults, equality and hashing over the compared fields (spans are not compared), a repr,
assignment refused with `dataclasses.FrozenInstanceError`, pickling and copying, and `dataclasses.fields`,
`replace`, `asdict` and `is_dataclass` working on it. Each class has slots for its fields and no
`__dict__`, so a tree of ten thousand states is compact in memory and a walk over it touches little.

Why not `@dataclass` itself: it writes and compiles six methods for every class when the module is
imported, which for the ~75 node classes was about a fifth of `statewright check`'s start-up. Here the
methods that do not depend on the fields are written once, below; the one that does, `__init__`, is
compiled the first time a class is instantiated (as fast as a dataclass's from then on); and the
`dataclasses` view of the fields is built the first time something asks for it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar

from ..diagnostics.source import Span

if TYPE_CHECKING:  # the decorator only tells type checkers what the class does; at run time it is inert
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**kwargs: Any) -> Callable[[type], type]:
        return lambda cls: cls

_MISSING = dataclasses.MISSING
_set_attribute = object.__setattr__


class _FieldSpec:
    """One declared field: what the generated `__init__`, equality and repr need to know."""

    __slots__ = ("annotation", "compare", "default", "default_factory", "name", "repr")

    def __init__(self, name: str, annotation: str, declared: object) -> None:
        self.name = name
        self.annotation = annotation
        if isinstance(declared, dataclasses.Field):
            self.default: object = declared.default
            self.default_factory: object = declared.default_factory
            self.compare: bool = declared.compare
            self.repr: bool = declared.repr
        else:
            self.default, self.default_factory, self.compare, self.repr = declared, _MISSING, True, True

    def as_field(self) -> Any:
        return dataclasses.field(default=self.default, default_factory=self.default_factory,  # type: ignore[call-overload]
                                 compare=self.compare, repr=self.repr)


class _DataclassFields:
    """`__dataclass_fields__`, built on first access from a throwaway dataclass with the same fields.

    Only `dataclasses` itself reads it (`fields`, `replace`, `asdict`, `is_dataclass`), and none of the
    commands that merely check a file do, so they never pay for it."""

    def __get__(self, instance: object, owner: type[Node]) -> dict[str, dataclasses.Field[Any]]:
        cached = owner.__dict__.get("_dataclass_fields")
        if cached is None:
            shadow = dataclasses.make_dataclass(
                owner.__name__, [(f.name, f.annotation, f.as_field()) for f in owner._field_specs],
                frozen=owner._frozen)
            cached = shadow.__dataclass_fields__  # type: ignore[attr-defined]
            type.__setattr__(owner, "_dataclass_fields", cached)
        return cached  # type: ignore[no-any-return]


class _SpanField:
    """A node's span field (`span`, or any field declared `Span` or `Span | None`: an IR node's `origin`),
    kept as the span's source file and its packed offsets in two slots rather than as a Span object, and
    made into one when read. A syntax tree has a span for nearly every node — a hundred thousand for a
    file of a megabyte — and each Span object costs 48 bytes besides the node's reference to it. A value
    that is not a Span (None, or a stand-in) is kept as it is."""

    __slots__ = ("name", "offsets", "source")

    def __init__(self, name: str) -> None:
        self.name = name
        self.source, self.offsets = f"_{name}_source", f"_{name}_offsets"

    def __get__(self, node: object, owner: type | None = None) -> Any:
        if node is None:
            return self
        offsets = getattr(node, self.offsets)
        source = getattr(node, self.source)
        return source if offsets is None else Span.packed(source, offsets)

    def __set__(self, node: object, span: Any) -> None:
        if type(span) is Span:
            _set_attribute(node, self.source, span.source)
            _set_attribute(node, self.offsets, span.packed_offsets)
        else:
            _set_attribute(node, self.source, span)
            _set_attribute(node, self.offsets, None)

    def __delete__(self, node: object) -> None:  # a mutable node's `del node.span`, as for any other field
        object.__delattr__(node, self.source)
        object.__delattr__(node, self.offsets)


_SPAN_ANNOTATIONS = frozenset({"Span", "Span|None", "None|Span", "Optional[Span]"})


def _holds_a_span(field: str, annotation: object) -> bool:
    return field == "span" or str(annotation).replace(" ", "") in _SPAN_ANNOTATIONS


class _Slotted(type):
    """Gives every node class slots for its own fields, so that a node is a small record with no
    `__dict__`: a syntax tree or IR of ten thousand states takes much less memory, and a walk over it
    touches less. A field's declared default (or `field(...)`) is kept aside for `__init_subclass__`."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> type:
        if "__slots__" not in namespace:
            inherited = {f for base in bases for f in getattr(base, "_field_names", ())}
            own = [field for field, annotation in namespace.get("__annotations__", {}).items()
                   if not str(annotation).startswith(("ClassVar", "typing.ClassVar")) and field not in inherited]
            namespace["_declared"] = {field: namespace.pop(field) for field in own if field in namespace}
            annotations = namespace.get("__annotations__", {})
            spans = [field for field in own if _holds_a_span(field, annotations[field])]
            if spans:  # kept as two slots each: see _SpanField
                own = [field for field in own if field not in spans]
                for field in spans:
                    own += [f"_{field}_source", f"_{field}_offsets"]
                    namespace[field] = _SpanField(field)
            namespace["__slots__"] = tuple(own)
        return super().__new__(mcls, name, bases, namespace, **kwargs)


@dataclass_transform(frozen_default=True, eq_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
class Node(metaclass=_Slotted):
    """An immutable node; see the module's docstring."""

    __slots__ = ()

    _frozen: ClassVar[bool] = True
    _field_specs: ClassVar[tuple[_FieldSpec, ...]] = ()
    _field_names: ClassVar[tuple[str, ...]] = ()
    _compared: ClassVar[Callable[[Any], Any]] = staticmethod(lambda node: ())  # type: ignore[assignment]
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]] = _DataclassFields()  # type: ignore[assignment]

    def __init_subclass__(cls, *, frozen: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if frozen != cls._frozen and cls.__mro__[1] is not Node:
            raise TypeError(f"{cls.__qualname__}: a frozen and a mutable node cannot inherit from each other")
        cls._frozen = frozen
        own_hash = cls.__dict__.get("__hash__", _MISSING)
        if not frozen:  # `class View(Node, frozen=False)`: assignable and, like such a dataclass, unhashable
            cls.__setattr__ = object.__setattr__  # type: ignore[method-assign,assignment]
            cls.__delattr__ = object.__delattr__  # type: ignore[method-assign,assignment]
            if own_hash is _MISSING or own_hash is None:
                cls.__hash__ = None  # type: ignore[assignment]
        elif own_hash is None and "__eq__" in cls.__dict__:
            # Python unsets __hash__ for a class that defines __eq__ alone; a frozen dataclass hashes anyway
            cls.__hash__ = Node.__hash__  # type: ignore[method-assign]
        specs = {s.name: s for s in cls._field_specs}  # inherited fields first, as dataclasses order them
        for name, annotation in inspect.get_annotations(cls).items():
            if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
                continue
            declared = cls.__dict__.get("_declared", {}).get(name, _MISSING)
            specs[name] = _FieldSpec(name, str(annotation), declared)
        cls._field_specs = tuple(specs.values())
        defaulted = [s.default is not _MISSING or s.default_factory is not _MISSING for s in cls._field_specs]
        if True in defaulted and not all(defaulted[defaulted.index(True):]):
            raise TypeError(f"{cls.__qualname__}: a field without a default follows one with a default")
        cls._field_names = tuple(specs)
        setattr(cls, "__match_args__", cls._field_names)  # noqa: B010 - a class attribute type checkers lack
        compared = [s.name for s in cls._field_specs if s.compare]
        cls._compared = staticmethod(attrgetter(*compared) if compared else lambda node: ())  # type: ignore[assignment]
        if "__init__" not in cls.__dict__:  # an inherited, already compiled __init__ knows other fields
            cls.__init__ = Node.__init__  # type: ignore[method-assign]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        cls.__init__ = _compile_init(cls)  # type: ignore[method-assign]
        cls.__init__(self, *args, **kwargs)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        compared = type(self)._compared
        return bool(compared(self) == compared(other))

    def __hash__(self) -> int:
        return hash(type(self)._compared(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{s.name}={getattr(self, s.name)!r}" for s in self._field_specs if s.repr)
        return f"{type(self).__qualname__}({shown})"

    def __reduce__(self) -> tuple[type[Node], tuple[Any, ...]]:
        """Pickled and copied as the constructor call that makes it (slots hold no `__dict__` to restore)."""
        return type(self), tuple(getattr(self, name) for name in self._field_names)

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def field_names(node: Node | type[Node]) -> tuple[str, ...]:
    """The names of a node's fields, in declaration order (as `dataclasses.fields` gives them, but free)."""
    return node._field_names


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type[Node]) -> tuple[str, ...]:
    """The fields of a node class that may hold nodes: those a walk over the tree reads (cached per class).

    Its span is left out, and so is every field declared as text, a number, a truth value or none (a
    name's text, an operator), which holds no node."""
    found = _CHILD_FIELDS.get(kind)
    if found is None:
        found = _CHILD_FIELDS[kind] = tuple(f.name for f in kind._field_specs
                                            if f.name != "span" and not _scalar(f.annotation))
    return found


_SCALARS = frozenset({"str", "int", "float", "bool", "None"})


def _scalar(annotation: str) -> bool:
    """Whether an annotation (as written) names scalar types only: `str`, `int | None`."""
    return all(part.strip() in _SCALARS for part in annotation.split("|"))


def _compile_init(cls: type[Node]) -> Callable[..., None]:
    """The `__init__` a frozen dataclass with these fields would have."""
    params, body = [], []
    for spec in cls._field_specs:
        if spec.default is not _MISSING:
            params.append(f"{spec.name}=_defaults[{spec.name!r}]")
        elif spec.default_factory is not _MISSING:
            params.append(f"{spec.name}=_MISSING")
            body.append(f"    if {spec.name} is _MISSING: {spec.name} = _factories[{spec.name!r}]()")
        else:
            params.append(spec.name)
        if isinstance(getattr(cls, spec.name, None), _SpanField):
            # _SpanField.__set__, inline: a tree makes a node for nearly every token
            name = spec.name
            body.append(f"    if {name}.__class__ is _Span: _set(self, '_{name}_source', {name}.source); "
                        f"_set(self, '_{name}_offsets', {name}.packed_offsets)")
            body.append(f"    else: _set(self, '_{name}_source', {name}); _set(self, '_{name}_offsets', None)")
        else:
            body.append(f"    _set(self, {spec.name!r}, {spec.name})")
    namespace: dict[str, Any] = {
        "_set": _set_attribute,
        "_Span": Span,
        "_MISSING": _MISSING,
        "_defaults": {s.name: s.default for s in cls._field_specs if s.default is not _MISSING},
        "_factories": {s.name: s.default_factory for s in cls._field_specs if s.default_factory is not _MISSING},
    }
    source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n"
    # the source names only the class's own field names, as the one dataclasses compiles does
    exec(compile(source, f"<{cls.__qualname__}.__init__>", "exec"), namespace)  # noqa: S102
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


_CLOSE = object()  # the end of a node's or a tuple's fields, in a digest's walk


def digest(tree: object) -> bytes:
    """A digest of what makes a tree equal to another: node kinds and the fields equality compares (spans
    and other `compare=False` fields left out), numbers as `==` sees them (1 and 1.0 alike). Two trees are
    equal exactly when their digests are, up to a hash collision; so a tree can be compared with one
    built later without keeping both. Made without recursion."""
    h = hashlib.blake2b(digest_size=32)
    stack: list[object] = [tree]
    while stack:
        item = stack.pop()
        if item is _CLOSE:
            h.update(b")")
        elif isinstance(item, Node):
            h.update(b"N" + type(item).__qualname__.encode() + b"(")
            stack.append(_CLOSE)
            stack.extend(reversed([getattr(item, s.name) for s in item._field_specs if s.compare]))
        elif isinstance(item, (tuple, list)):
            h.update(b"T%d(" % len(item))
            stack.append(_CLOSE)
            stack.extend(reversed(item))
        else:
            h.update(_digest_of_scalar(item))
    return h.digest()


def _digest_of_scalar(value: object) -> bytes:
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return b"i%d;" % value
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        return b"s%d:" % len(data) + data
    if value is None:
        return b"n;"
    text = repr(value).encode("utf-8", "surrogatepass")
    return b"r%d:" % len(text) + text
