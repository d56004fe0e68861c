"""Pydantic models in a crew's Python source as `type` declarations: what `output_pydantic` and
`output_json` name becomes the state's output type.

Only what the source says literally is read: the class's annotated fields, `Field(description=...)` as the
field's documentation, and the annotation's shape (`str`, `int`, `float`, `bool`, `List[T]`, `Optional[T]`,
`T | None`, `Literal[...]`, another model). What has no counterpart (a `dict`, `Any`, a class that is not a
model) is read as text, and the importer lists each such field.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .model import FieldDecl, Shape, TypeDecl
from .names import Namespace, type_name

_SCALARS = {"str": "str", "int": "int", "float": "float", "bool": "bool", "Decimal": "float",
            "date": "str", "datetime": "str", "HttpUrl": "str", "AnyUrl": "str", "EmailStr": "str"}
_LISTS = {"List", "list", "Sequence", "Set", "set", "Tuple", "tuple", "FrozenSet", "frozenset", "Iterable"}
_BASES = {"BaseModel"}


@dataclass
class ModelTypes:
    """The models found in the crew's Python files, and the types made of them so far."""

    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    names: Namespace = field(default_factory=Namespace)
    made: dict[str, str] = field(default_factory=dict)  # model class -> type name
    types: list[TypeDecl] = field(default_factory=list)
    as_text: list[str] = field(default_factory=list)  # "Model.field (dict[str, Any])": fields read as text

    def add_module(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name not in self.classes:
                self.classes[node.name] = node
        # a model is a class whose base is BaseModel or another model (found by going round until none is new)
        models = {n for n, c in self.classes.items() if any(_base_name(b) in _BASES for b in c.bases)}
        changed = True
        while changed:
            changed = False
            for name, c in self.classes.items():
                if name not in models and any(_base_name(b) in models for b in c.bases):
                    models.add(name)
                    changed = True
        self.classes = {n: c for n, c in self.classes.items() if n in models}

    def type_of(self, model: str) -> str | None:
        """The name of the type declared for `model` (declaring it and the models it uses), or None when
        no model of that name is in the source."""
        if model in self.made:
            return self.made[model]
        node = self.classes.get(model)
        if node is None:
            return None
        name = type_name(model, self.names)
        self.made[model] = name
        decl = TypeDecl(name)
        doc = ast.get_docstring(node)
        if doc:
            decl.comments.append(f"pydantic model {model}: {doc.splitlines()[0]}" if name != model else
                                 doc.splitlines()[0])
        elif name != model:
            decl.comments.append(f"pydantic model {model}")
        self.types.append(decl)
        decl.fields = self._fields(model, set())
        return name

    def _fields(self, model: str, seen: set[str]) -> list[FieldDecl]:
        """The fields of `model`: those it inherits from other models first, as pydantic orders them."""
        node = self.classes[model]
        seen = seen | {model}
        fields: list[FieldDecl] = []
        for base in node.bases:
            base_name = _base_name(base)
            if base_name in self.classes and base_name not in seen:
                fields.extend(f for f in self._fields(base_name, seen) if f.name not in {g.name for g in fields})
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                if item.target.id.startswith("_") or _is_classvar(item.annotation):
                    continue
                shape = self._shape(item.annotation, f"{model}.{item.target.id}")
                if _optional_default(item.value) and shape[0] != "opt":
                    shape = ("opt", shape)
                fields = [f for f in fields if f.name != item.target.id]
                fields.append(FieldDecl(item.target.id, shape, _description(item.value)))
        return fields

    def _shape(self, node: ast.expr, where: str) -> Shape:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
            try:
                parsed = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return self._text(where, node.value)
            return self._shape(parsed, where)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
            parts = _union_parts(node)
            return self._union(parts, where)
        if isinstance(node, ast.Subscript):
            outer = _base_name(node.value)
            args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
            if outer in _LISTS:
                return ("list", self._shape(args[0], where))
            if outer == "Optional":
                return ("opt", self._shape(args[0], where))
            if outer == "Union":
                return self._union(args, where)
            if outer == "Literal" and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
                return ("enum", tuple(str(a.value) for a in args))  # type: ignore[attr-defined]
            if outer == "Annotated" and args:
                return self._shape(args[0], where)
            return self._text(where, ast.unparse(node))
        name = _base_name(node)
        if name in _SCALARS:
            return (_SCALARS[name],)
        if name in self.classes:
            return ("named", self.type_of(name))
        return self._text(where, ast.unparse(node))

    def _union(self, parts: list[ast.expr], where: str) -> Shape:
        rest = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None) and _base_name(p) != "None"]
        if len(rest) == 1:
            inner = self._shape(rest[0], where)
            return inner if len(rest) == len(parts) else ("opt", inner)
        return self._text(where, " | ".join(ast.unparse(p) for p in parts))

    def _text(self, where: str, written: str) -> Shape:
        self.as_text.append(f"{where} ({written})")
        return ("str",)


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    return None


def _union_parts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_union_parts(node.left), *_union_parts(node.right)]
    return [node]


def _is_classvar(node: ast.expr) -> bool:
    target = node.value if isinstance(node, ast.Subscript) else node
    return _base_name(target) == "ClassVar"


def _optional_default(value: ast.expr | None) -> bool:
    """`= None` or `Field(None, ...)` / `Field(default=None)`: a field that may be left out."""
    if isinstance(value, ast.Constant) and value.value is None:
        return True
    if isinstance(value, ast.Call) and _base_name(value.func) == "Field":
        if value.args and isinstance(value.args[0], ast.Constant) and value.args[0].value is None:
            return True
        return any(k.arg == "default" and isinstance(k.value, ast.Constant) and k.value.value is None
                   for k in value.keywords)
    return False


def _description(value: ast.expr | None) -> str | None:
    if isinstance(value, ast.Call) and _base_name(value.func) == "Field":
        for k in value.keywords:
            if k.arg == "description" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
                return " ".join(k.value.value.split()) or None
    return None
