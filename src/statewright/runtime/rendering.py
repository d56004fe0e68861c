"""Rendering instruction, prompt and result templates: sandboxed Jinja2, compiled once, values rendered
as data, and every render bounded in time and size.

The sandbox keeps a template from reaching Python; the bounds keep it from taking the machine down. The
operators that can build huge values (`**`, `*`, `%`, `+`, `//` and the unary signs) are intercepted and
refuse a result over a size limit before computing it, so Jinja cannot fold them at compile time either;
the filters and string methods that pad or repeat text check their arguments the same way; every loop,
call and piece of output checks the deadline; and the rendered text has a maximum length. The compiler's
template check evaluates constant expressions with the same bounded operators (`bounded_binop`), so what
`check` accepts and what a run computes agree.
"""

from __future__ import annotations

import contextvars
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from .structured import to_jsonable

_MARKERS = ("{{", "{%", "{#")

# A number may have at most as many digits as Python will print (its default int_max_str_digits).
MAX_INT_DIGITS = 4300
_MAX_INT_BITS = int(MAX_INT_DIGITS * math.log2(10))
# The most characters (or list items) one operation may produce, and the longest rendered template.
MAX_TEMPLATE_VALUE = 10_000_000
MAX_RENDERED_CHARS = 10_000_000
# lipsum() writes paragraphs of filler text; a few are all a prompt could want
_MAX_LIPSUM = 100
_MAX_JSON_INDENT = 100

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "statewright_template_deadline", default=None)


class TemplateRenderError(Exception):
    """A template failed to compile or render (an unknown name, a forbidden operation)."""


class TemplateTooLarge(TemplateRenderError):
    """An operation in a template would build a value over the size limits."""


class TemplateDeadlineExceeded(TemplateRenderError):
    """Rendering ran past its deadline (the run's `limits { seconds }`)."""


# ---- bounded operations --------------------------------------------------------------------------


def _int_bits(value: Any) -> int:
    return value.bit_length() if isinstance(value, int) and not isinstance(value, bool) else 0


def _size(value: Any) -> int | None:
    """How much a str, list or tuple weighs (`value_weight`); None for anything else."""
    return value_weight(value) if isinstance(value, (str, list, tuple)) else None


def value_weight(value: Any, limit: int = MAX_TEMPLATE_VALUE) -> int:
    """The characters and items in `value`, counting every nested list, tuple and dict through each
    reference to it (what printing it costs: `[a, a, a]` weighs three times `a`), or `limit + 1` as soon
    as that is passed, so the count itself stays cheap."""
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v)
        elif isinstance(v, (list, tuple)):
            total += len(v)
            stack.extend(v)
        elif isinstance(v, dict):
            total += len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        else:
            total += 1
        if total > limit:
            return limit + 1
    return total


def _too_large(what: str) -> TemplateTooLarge:
    return TemplateTooLarge(f"{what}; the limit is {MAX_TEMPLATE_VALUE:,} characters or items per value")


def _check_power(left: Any, right: Any) -> None:
    if not (isinstance(left, int) and isinstance(right, int)) or right <= 0:
        return  # floats overflow to an error or inf on their own; a negative power of an int is a float
    bits = _int_bits(left)
    if bits > 1 and (bits - 1) * right > _MAX_INT_BITS:
        digits = int((bits - 1) * right / math.log2(10))
        raise TemplateTooLarge(f"{left if bits <= 64 else 'a number'} ** {right} would have over {digits:,} "
                               f"digits; the limit is {MAX_INT_DIGITS:,}")


def _check_repeat(seq: Any, count: Any) -> None:
    size = _size(seq)
    if size is None or not isinstance(count, int):
        return
    if size * count > MAX_TEMPLATE_VALUE:
        raise _too_large(f"repeating {size:,} characters or items {count:,} times gives "
                         f"{size * count:,}")


def _check_product(left: Any, right: Any) -> None:
    _check_repeat(left, right)
    _check_repeat(right, left)
    if _int_bits(left) + _int_bits(right) > _MAX_INT_BITS:
        raise TemplateTooLarge(f"the product would have over {MAX_INT_DIGITS:,} digits; the limit is "
                               f"{MAX_INT_DIGITS:,}")


def _check_sum(left: Any, right: Any) -> None:
    a, b = _size(left), _size(right)
    if a is not None and b is not None and a + b > MAX_TEMPLATE_VALUE:
        raise _too_large(f"joining {a:,} and {b:,} characters or items gives {a + b:,}")


_FORMAT_WIDTH = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_printf(text: Any, args: Any) -> None:
    """`"%10s" % x`: a width or precision over the limit, or one taken from the arguments (`*`)."""
    if not isinstance(text, str) or "%" not in text:
        return
    for m in _FORMAT_WIDTH.finditer(text):
        for part in m.groups():
            if part == "*":
                raise TemplateTooLarge("a '*' width or precision in a % format is not allowed in templates")
            if part is not None and (len(part) > 8 or int(part) > MAX_TEMPLATE_VALUE):
                raise _too_large(f"a % format asks for a width of {part}")


def bounded_binop(operator: str, left: Any, right: Any) -> Any:
    """`left OPERATOR right` as a template computes it, refusing results over the size limits.

    `operator` is Jinja's: `+ - * / // % **`. Raises TemplateTooLarge before building anything too large;
    every other failure is the operator's own (TypeError, ZeroDivisionError, ...).
    """
    if operator == "**":
        _check_power(left, right)
        return left**right
    if operator == "*":
        _check_product(left, right)
        return left * right
    if operator == "+":
        _check_sum(left, right)
        return left + right
    if operator == "%":
        _check_printf(left, right)
        return left % right
    if operator == "-":
        return left - right
    if operator == "/":
        return left / right
    if operator == "//":
        return left // right
    raise ValueError(f"unknown operator {operator!r}")


def bounded_concat(values: Iterable[Any]) -> str:
    """`a ~ b ~ c`: the values' text joined, refusing a result over the size limit."""
    values = list(values)
    if sum(value_weight(v) for v in values) > MAX_TEMPLATE_VALUE:
        raise _too_large("joining text with '~' gives more than allowed")
    parts = [str(v) for v in values]
    total = sum(len(p) for p in parts)
    if total > MAX_TEMPLATE_VALUE:
        raise _too_large(f"joining text with '~' gives {total:,} characters")
    return "".join(parts)


def _width(value: Any, what: str) -> None:
    if isinstance(value, int) and value > MAX_TEMPLATE_VALUE:
        raise _too_large(f"{what} of {value:,}")


def _bounded_filters(filters: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Jinja's filters, each refusing a value over the size limits, and those that pad, repeat or fill
    checking their arguments first."""
    out = {name: _weighed(function) for name, function in filters.items()}
    for name, bounded in _checked_filters(filters).items():
        original = filters.get(name)
        if original is None:
            continue
        # keep what Jinja reads from the original: whether it is passed the context or environment
        for attr in ("jinja_pass_arg",):
            if hasattr(original, attr):
                setattr(bounded, attr, getattr(original, attr))
        bounded.__doc__ = original.__doc__
        out[name] = _weighed(bounded)
    return out


def _checked_filters(filters: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """The filters that pad, repeat or fill, each checking its arguments before it calls Jinja's own."""

    def center(value: Any, width: int = 80) -> Any:
        _width(width, "a width")
        return filters["center"](value, width)

    def indent(value: Any, width: Any = 4, *args: Any, **kwargs: Any) -> Any:
        pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        lines = str(value).count("\n") + 1
        if pad * lines > MAX_TEMPLATE_VALUE:
            raise _too_large(f"indenting {lines:,} lines by {pad:,} gives {pad * lines:,}")
        return filters["indent"](value, width, *args, **kwargs)

    def format_(value: Any, *args: Any, **kwargs: Any) -> Any:
        _check_printf(value, args)
        return filters["format"](value, *args, **kwargs)

    def join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
        items = list(value)
        _check_repeat(str(d), max(len(items) - 1, 0))
        return filters["join"](eval_ctx, items, d, attribute)

    def replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> Any:
        text, old_text, new_text = str(s), str(old), str(new)
        times = text.count(old_text) if old_text else len(text) + 1
        if count is not None and count >= 0:
            times = min(times, count)
        if len(text) + times * max(len(new_text) - len(old_text), 0) > MAX_TEMPLATE_VALUE:
            raise _too_large("the replacement gives more text than allowed")
        return filters["replace"](eval_ctx, s, old, new, count)

    def batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
        _width(linecount, "a batch size")
        return filters["batch"](value, linecount, fill_with)

    def slice_(value: Any, slices: int, fill_with: Any = None) -> Any:
        _width(slices, "a slice count")
        return filters["slice"](value, slices, fill_with)

    def wordwrap(environment: Any, s: str, width: int = 79, break_long_words: bool = True,
                 wrapstring: str | None = None, break_on_hyphens: bool = True) -> Any:
        if wrapstring is not None and len(str(wrapstring)) * (len(str(s)) + 1) > MAX_TEMPLATE_VALUE:
            raise _too_large("wrapping with that line break gives more text than allowed")
        return filters["wordwrap"](environment, s, width, break_long_words, wrapstring, break_on_hyphens)

    def tojson(eval_ctx: Any, value: Any, indent: int | None = None) -> Any:
        if isinstance(indent, int) and indent > _MAX_JSON_INDENT:
            raise TemplateTooLarge(f"tojson({indent:,}): the indent may be at most {_MAX_JSON_INDENT}")
        return filters["tojson"](eval_ctx, value, indent)

    return {"center": center, "indent": indent, "format": format_, "join": join, "replace": replace,
            "batch": batch, "slice": slice_, "wordwrap": wordwrap, "tojson": tojson}


def _weighed(function: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that refuses a value (its first argument after the context) over the size limits: most
    filters turn their value into text, and a list holding a list a thousand times prints it a thousand
    times."""
    from jinja2.utils import _PassArg

    passed = _PassArg.from_obj(function) is not None

    def weighed(*args: Any, **kwargs: Any) -> Any:
        value = args[1] if passed and len(args) > 1 else args[0] if args else None
        if isinstance(value, (list, tuple, dict)) and value_weight(value) > MAX_TEMPLATE_VALUE:
            raise _too_large("the value given to this filter is larger than allowed")
        return function(*args, **kwargs)

    for attr in ("jinja_pass_arg",):
        if hasattr(function, attr):
            setattr(weighed, attr, getattr(function, attr))
    weighed.__doc__ = function.__doc__
    return weighed


# str methods a template may call that pad, repeat or fill, and the argument that sizes the result
_PADDING_METHODS = frozenset({"ljust", "rjust", "center", "zfill"})


def _check_str_method(method: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, str):
        return
    name = getattr(method, "__name__", "")
    if name in _PADDING_METHODS and args:
        _width(args[0], "a width")
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(size, int) and size * (owner.count("\t") + 1) > MAX_TEMPLATE_VALUE:
            raise _too_large("expanding the tabs gives more text than allowed")
    elif name == "join" and args:
        items = args[0]
        count = len(items) if hasattr(items, "__len__") else 0
        _check_repeat(owner, max(count - 1, 0))
    elif name == "replace" and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        times = owner.count(old) if old else len(owner) + 1
        if len(owner) + times * max(len(new) - len(old), 0) > MAX_TEMPLATE_VALUE:
            raise _too_large("the replacement gives more text than allowed")


def _check_format_fields(template: str) -> None:
    """`"{:>20}".format(x)`: a width or precision over the limit, or one taken from the arguments."""
    import string

    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return  # a malformed format string fails on its own when it is used
    for _, _, spec, _ in fields:
        if not spec:
            continue
        if "{" in spec:
            raise TemplateTooLarge("a width or precision taken from the arguments ('{:{}}') is not allowed in "
                                   "templates")
        if any(len(n) > 8 or int(n) > MAX_TEMPLATE_VALUE for n in re.findall(r"\d+", spec)):
            raise _too_large(f"the format field '{{:{spec}}}' asks for a width over the limit")


# ---- the deadline --------------------------------------------------------------------------------


def _check_deadline() -> None:
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise TemplateDeadlineExceeded("rendering the template ran past the run's time limit (limits { seconds })")


def _iterate(iterable: Any) -> Iterator[Any]:
    """A `for` loop's items, with the deadline checked before each one."""
    for item in iterable:
        _check_deadline()
        yield item


class _Range:
    """range() for templates: at most the sandbox's number of items, and the deadline checked as it is
    iterated (a loop over it with no output in its body still stops in time)."""

    def __init__(self, numbers: range) -> None:
        self._numbers = numbers

    def __iter__(self) -> Iterator[int]:
        return _iterate(self._numbers)

    def __len__(self) -> int:
        return len(self._numbers)

    def __getitem__(self, index: Any) -> Any:
        return self._numbers[index]

    def __contains__(self, item: object) -> bool:
        return item in self._numbers

    def __reversed__(self) -> Iterator[int]:
        return _iterate(reversed(self._numbers))

    def __repr__(self) -> str:
        return repr(self._numbers)


# ---- the environment -----------------------------------------------------------------------------

_NO_FIELD = object()


def _field(obj: Any, name: str) -> Any:
    """The field `name` of a value as the language means it (what guards read, guard_access.py): a key of
    a dict, or a field of a typed output found by its spec name — which is the pydantic alias when the
    name cannot be a Python attribute (`class`, `_id`, `json`). `_NO_FIELD` when there is none."""
    if isinstance(obj, Mapping):
        return obj.get(name, _NO_FIELD)
    fields = getattr(type(obj), "model_fields", None)  # a pydantic model, without importing pydantic
    if not isinstance(fields, dict):
        return _NO_FIELD
    for attribute, info in fields.items():
        if (getattr(info, "alias", None) or attribute) == name:
            return getattr(obj, attribute)
    return _NO_FIELD



def _finalize(value: Any) -> Any:
    """How a value prints: text as is, nothing as "", typed objects and collections as JSON."""
    if value is None:
        return ""
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (dict, list, tuple)) or hasattr(value, "model_dump"):
        data = value if isinstance(value, (dict, list, tuple)) else to_jsonable(value)
        if value_weight(data) > MAX_TEMPLATE_VALUE:
            raise _too_large("the value printed here is larger than allowed")
        data = to_jsonable(value)
        if value_weight(data) > MAX_TEMPLATE_VALUE:
            raise _too_large("the value printed here is larger than allowed")
        return json.dumps(data, ensure_ascii=False)
    return value


@lru_cache(maxsize=1)
def template_environment_class() -> Any:
    """The sandboxed Jinja2 environment class every template is compiled with (defined on first use, so
    importing this module does not import Jinja; the class holds no state of any run)."""
    from jinja2.sandbox import SandboxedEnvironment

    class BoundedSandbox(SandboxedEnvironment):  # type: ignore[misc]
        """SandboxedEnvironment with bounded operators, filters and string methods, and a deadline."""

        intercepted_binops = frozenset({"**", "*", "%", "+", "//", "-", "/"})
        intercepted_unops = frozenset({"-", "+"})

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self.filters = _bounded_filters(self.filters)
            self.globals.update(_bounded_globals(self.globals))

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _check_deadline()
            return bounded_binop(operator, left, right)

        def call_unop(self, context: Any, operator: str, arg: Any) -> Any:
            return -arg if operator == "-" else +arg

        def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
            _check_deadline()
            _check_str_method(obj, args, kwargs)
            return super().call(context, obj, *args, **kwargs)

        def wrap_str_format(self, value: Any) -> Any:
            wrapped = super().wrap_str_format(value)
            return None if wrapped is None else _bounded_format(wrapped, value.__self__)

        def getattr(self, obj: Any, attribute: str) -> Any:
            """`x.name` reads the field `name` — a key of a dict, a field of a typed output by the name the
            spec gives it — before any Python attribute: a field called `items`, `json`, `copy` or
            `class` is the field, never a method or a missing attribute."""
            found = _field(obj, attribute)
            if found is not _NO_FIELD:
                return found
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            if isinstance(argument, str):
                found = _field(obj, argument)
                if found is not _NO_FIELD:
                    return found
            return super().getitem(obj, argument)

        def iterate(self, iterable: Any) -> Iterator[Any]:
            return _iterate(iterable)

        def concat_values(self, *values: Any) -> str:
            return bounded_concat(values)

        def _parse(self, source: str, name: str | None, filename: str | None) -> Any:
            """Parse, then route every `for` loop's items through `iterate` and every `~` through
            `concat_values`, so loops check the deadline and joined text is bounded."""
            return _bounded_nodes()().visit(super()._parse(source, name, filename))

    return BoundedSandbox


def _bounded_globals(globals_: Mapping[str, Any]) -> dict[str, Any]:
    """Jinja's `lipsum` and `range`, bounded: at most so many paragraphs, at most so many items."""
    from jinja2.sandbox import safe_range

    lipsum: Any = globals_["lipsum"]

    def bounded_lipsum(n: int = 5, *args: Any, **kwargs: Any) -> Any:
        if isinstance(n, int) and n > _MAX_LIPSUM:
            raise TemplateTooLarge(f"lipsum({n:,}): at most {_MAX_LIPSUM} paragraphs")
        return lipsum(n, *args, **kwargs)

    return {"lipsum": bounded_lipsum, "range": lambda *args: _Range(safe_range(*args))}


def _bounded_format(wrapped: Callable[..., Any], template: str) -> Callable[..., Any]:
    """`str.format` of `template` (as the sandbox wraps it), its fields checked before it runs."""

    def bounded_format(*args: Any, **kwargs: Any) -> Any:
        _check_format_fields(template)
        return wrapped(*args, **kwargs)

    return bounded_format


@lru_cache(maxsize=1)
def _bounded_nodes() -> Any:
    """The parse-tree rewrite of BoundedSandbox._parse: every `for` loop's items through the environment's
    `iterate`, every `~` through its `concat_values`."""
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    class BoundedNodes(NodeTransformer):  # type: ignore[misc]
        def visit_For(self, node: Any) -> Any:
            self.generic_visit(node)
            node.iter = nodes.Call(nodes.EnvironmentAttribute("iterate"), [node.iter], [], None, None,
                                   lineno=node.iter.lineno)
            return node

        def visit_Concat(self, node: Any) -> Any:
            self.generic_visit(node)
            return nodes.Call(nodes.EnvironmentAttribute("concat_values"), list(node.nodes), [], None, None,
                              lineno=node.lineno)

    return BoundedNodes


def _new_environment() -> Any:
    """A fresh bounded sandbox: undefined names are errors, nothing is escaped, values print as data."""
    from jinja2 import StrictUndefined

    return template_environment_class()(undefined=StrictUndefined, autoescape=False, finalize=_finalize)


# ---- templates that only print names ----------------------------------------------------------------

# Jinja's own line breaks (its lexer's newline_re): it reads every one as "\n" and drops one at the very end
_NEWLINES = re.compile(r"(\r\n|\r|\n)")
# A name as a template reads it, and the words Jinja reads as something other than a variable of the
# context (constants and operators where an expression begins, names its compiled templates give their
# own values). The compiler's reader of such templates shares both (checks/template_source.py).
TEMPLATE_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
NOT_A_VARIABLE = frozenset({"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is",
                            "if", "else", "elif", "for", "recursive", "self", "loop", "caller", "varargs",
                            "kwargs", "super"})
# `{{ name }}` or `{{ name.field.field }}`, nothing else in the tag
_PRINTED_NAME = re.compile(rf"\{{\{{\s*({TEMPLATE_NAME}(?:\.{TEMPLATE_NAME})*)\s*\}}\}}")


def printed_names(source: str) -> tuple[Any, ...] | None:
    """A template that is text and `{{ name }}` / `{{ name.field }}` tags only, as its pieces: text, the
    path of the first name, text, ... text; None for any other template.

    Such a template renders without Jinja (`TemplateSet.render`), to exactly the text Jinja gives it: the
    line breaks read as Jinja reads them, each value printed as Jinja prints it (`_finalize`, then str), a
    field read as the sandbox reads it (`_field`). Only the text outside the tags may not hold a `{`, so
    nothing in it can start Jinja markup."""
    lines = _NEWLINES.split(source)[::2]
    if lines[-1] == "":
        del lines[-1]
    text = "\n".join(lines)
    pieces: list[Any] = []
    at = 0
    for tag in _PRINTED_NAME.finditer(text):
        path = tuple(tag.group(1).split("."))
        if path[0] in NOT_A_VARIABLE:
            return None
        pieces += [text[at:tag.start()], path]
        at = tag.end()
    pieces.append(text[at:])
    if len(pieces) == 1 or any("{" in piece for piece in pieces[::2]):
        return None
    return tuple(pieces)


def _printed_values(pieces: tuple[Any, ...], context: Mapping[str, Any]) -> list[Any] | None:
    """The values the tags of a `printed_names` template print, or None when Jinja must render it: a name
    is not in the context or a field is not one `_field` finds (Jinja's error, or what its sandbox finds),
    or the context is not a dict of text keys (Jinja reads a copy made with dict(), which needs those).
    (Reading a field has no effect: reading them all before printing any changes nothing.)"""
    if type(context) is not dict or not all(type(key) is str for key in context):
        return None
    values = []
    for path in pieces[1::2]:
        if path[0] not in context:
            return None
        value = context[path[0]]
        for name in path[1:]:
            value = _field(value, name)
            if value is _NO_FIELD:
                return None
        values.append(value)
    return values


def _printed_chunks(pieces: tuple[Any, ...], values: list[Any]) -> Iterator[str]:
    """The chunks of a `printed_names` template as Jinja's compiled template yields them: each non-empty
    text and each value printed (`_finalize`, then str), in turn."""
    for index, piece in enumerate(pieces):
        if index % 2:
            yield str(_finalize(values[index // 2]))
        elif piece:
            yield piece


def _joined(chunks: Iterable[str]) -> str:
    """A render's chunks joined, the length checked after each, then the deadline."""
    parts: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_RENDERED_CHARS:
            raise TemplateTooLarge(f"the rendered text is longer than {MAX_RENDERED_CHARS:,} characters")
        parts.append(chunk)
        _check_deadline()
    return "".join(parts)


def is_constant(source: str) -> bool:
    """A template without any Jinja markup renders to itself; the engine skips Jinja for it."""
    return not any(marker in source for marker in _MARKERS)


def variant_tests(types: Mapping[str, type]) -> dict[str, Callable[[Any], bool]]:
    """A Jinja test for each type a variant output offers: `{% if draft.output is Answer %}`."""
    return {name: _instance_test(cls) for name, cls in types.items()}


def _instance_test(cls: type) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, cls)


class TemplateSet:
    """The templates of one machine: one bounded sandbox, each template compiled on first use.

    Owned by the machine's core, so nothing is shared between machines and nothing is global. `tests` are
    Jinja tests of the machine's own (one per variant type), beside Jinja's."""

    def __init__(self, tests: Mapping[str, Callable[[Any], bool]] | None = None) -> None:
        self._environment: Any = None
        self._compiled: dict[str, Any] = {}
        self._printed: dict[str, tuple[Any, ...] | None] = {}  # printed_names of each template rendered
        self._tests = dict(tests or {})

    is_constant = staticmethod(is_constant)

    def compile(self, source: str) -> Any:
        compiled = self._compiled.get(source)
        if compiled is None:
            if self._environment is None:
                self._environment = _new_environment()
                self._environment.tests.update(self._tests)
            try:
                compiled = self._environment.from_string(source)
            except Exception as exc:  # noqa: BLE001 - a syntax error, or a template too deep for Python
                raise TemplateRenderError(f"the template does not compile: {exc}") from None
            self._compiled[source] = compiled
        return compiled

    def render(self, source: str, context: Mapping[str, Any], *, deadline: float | None = None,
               seconds: float | None = None) -> str:
        """Render `source` with `context`. Rendered values are data: their text is never rendered again.

        `deadline` is a `time.monotonic()` value, or `seconds` the time rendering may take from now:
        rendering past it stops with TemplateDeadlineExceeded (checked before each loop iteration, call and
        bounded operation, and between pieces of output)."""
        if is_constant(source):
            return source
        if seconds is not None:
            deadline = time.monotonic() + seconds
        try:
            printed = self._printed[source]
        except KeyError:
            printed = self._printed[source] = printed_names(source)
        token = _deadline.set(deadline)
        try:
            if printed is not None:  # text and names only: no Jinja (a worker, a run may never import it)
                values = _printed_values(printed, context)
                if values is not None:
                    return _joined(_printed_chunks(printed, values))
            return _joined(self.compile(source).generate(context))
        except TemplateRenderError:
            raise
        except Exception as exc:  # noqa: BLE001 - any render error is the template's, reported as one
            raise TemplateRenderError(_describe(exc)) from None
        finally:
            _deadline.reset(token)


def compile_template(source: str) -> Any:
    """One template compiled in a fresh environment (for one-off use; machines keep a TemplateSet)."""
    return TemplateSet().compile(source)


def render_template(source: str, context: Mapping[str, Any], *, deadline: float | None = None) -> str:
    """Render one template with a fresh environment (for one-off use; machines keep a TemplateSet)."""
    return TemplateSet().render(source, context, deadline=deadline)


def _describe(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "UndefinedError":
        return f"the template uses a name that is not defined: {exc}"
    if name == "SecurityError":
        return f"the template tried an operation the sandbox forbids: {exc}"
    if isinstance(exc, RecursionError):
        return "the template failed to render: it calls itself too deeply (RecursionError)"
    return f"the template failed to render: {name}: {exc}"
