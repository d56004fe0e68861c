"""The tools agents and action states call: standard ones in a sandbox, user ones by import path."""

from __future__ import annotations

import asyncio
import difflib
import importlib
import inspect
import json
import os
import re
import secrets
import stat
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .http_get import HttpGetError, http_get
from .sandbox import SANDBOX_TMP_DIR, Sandbox, SandboxError, SandboxLimits, sandbox_give_to_tool_user
from .spec import ToolSpec
from .sync import run_sync
from .tool_secrets import SECRETS_PARAMETER, SecretError, render_secret_template, secret_references
from .tool_signatures import STD_TOOLS
from .trace import redact, redact_data, secret_forms, secret_values
from .untrusted import JSON_SPACE, BorderError, check_value, read_json


class ToolError(Exception):
    """A tool call that was refused or failed. The message is written to be shown to a model as is:
    what was wrong and how to call the tool right. It never carries a traceback."""

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool


# Exception text shown to a model is cut here: a model needs the gist, not a megabyte of repr.
_ERROR_TEXT_CAP = 2000
# std.list_files stops walking here however large `max_files` is, so a huge tree cannot exhaust memory.
_WORKSPACE_WALK_CEILING = 100_000


# ---- workspace paths (std.read_file, std.write_file, std.list_files) ----------------------------------


def _workspace_contains(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _workspace_resolve(root: str, path: str, tool: str) -> tuple[str, str]:
    """Check a model-given path and return (its real absolute path, its normalised relative form).

    Refuses absolute paths, `..` that climbs out, and symlinks (on the path or any existing parent) whose
    target lies outside the workspace.
    """
    example = "such as 'notes/todo.txt'"
    if "\x00" in path:
        raise ToolError(f"{tool}: the path contains a NUL character; give a plain relative path {example}")
    if os.path.isabs(path) or path.startswith("~"):
        raise ToolError(f"{tool}: {path!r} is an absolute path; paths are relative to the workspace, "
                        f"{example}")
    relative = os.path.normpath(path) if path.strip() else "."
    if relative == ".." or relative.startswith(".." + os.sep):
        raise ToolError(f"{tool}: {path!r} leaves the workspace; stay inside it, with a path {example}")
    absolute = os.path.join(root, relative)
    parent = root
    for part in relative.split(os.sep)[:-1]:
        parent = os.path.join(parent, part)
        if os.path.lexists(parent) and not _workspace_contains(root, os.path.realpath(parent)):
            raise ToolError(f"{tool}: {path!r} goes through a symlink that points outside the workspace")
    real = os.path.realpath(absolute)
    if not _workspace_contains(root, real):
        raise ToolError(f"{tool}: {path!r} is a symlink that points outside the workspace")
    return real, relative


def _workspace_open_flags() -> int:
    # The path is already resolved, so it names no symlink: O_NOFOLLOW makes the open fail if one has been
    # swapped in since. O_NONBLOCK: opening a FIFO must not wait for a writer (what was opened is checked
    # right after, and only a regular file is read).
    return (getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
            | getattr(os, "O_NOCTTY", 0))


def _workspace_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "of an unknown kind"


def _workspace_check_regular(tool: str, relative: str, info: os.stat_result) -> None:
    """Only a regular file with one name is read or replaced: a FIFO, socket or device could block the
    call or do anything on open, and a second hard link may be a file outside the workspace."""
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{tool}: {relative!r} is {_workspace_kind(info.st_mode)}, not a regular file; "
                        "this tool only works on regular files")
    if info.st_nlink > 1:
        raise ToolError(f"{tool}: {relative!r} has {info.st_nlink} hard links; a file with more than one name "
                        "may live outside the workspace too, so this tool leaves it alone (copy it to a new "
                        "file with std.shell or std.python to work on it)")


def _workspace_read(root: str, path: str, max_bytes: int) -> str:
    real, relative = _workspace_resolve(root, path, "std.read_file")
    if os.path.isdir(real):
        raise ToolError(f"std.read_file: {relative!r} is a directory; list it with std.list_files")
    if not os.path.lexists(real):
        raise ToolError(f"std.read_file: there is no file {relative!r} in the workspace; "
                        "std.list_files shows what there is")
    _workspace_check_regular("std.read_file", relative, os.lstat(real))
    try:
        fd = os.open(real, os.O_RDONLY | _workspace_open_flags())
    except OSError as exc:
        raise ToolError(f"std.read_file: cannot open {relative!r}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        # what was opened is checked again: the path may name something else by now
        _workspace_check_regular("std.read_file", relative, os.fstat(handle.fileno()))
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ToolError(f"std.read_file: {relative!r} is larger than {max_bytes} bytes, the most this tool "
                        "reads (option max_bytes); read a smaller part with std.python")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"std.read_file: {relative!r} is not UTF-8 text; inspect binary files with "
                        "std.python") from exc


def _workspace_write(root: str, path: str, content: str, max_bytes: int) -> str:
    """Write `content` to a new file beside the target, then rename it over the target: an existing file is
    replaced, never truncated in place, so no other name of it (a hard link, a file outside) is changed."""
    real, relative = _workspace_resolve(root, path, "std.write_file")
    if relative == "." or real == root:
        raise ToolError("std.write_file: give the path of a file to write, such as 'notes/todo.txt'")
    data = content.encode("utf-8")
    if len(data) > max_bytes:
        raise ToolError(f"std.write_file: the content is {len(data)} bytes; this tool writes at most "
                        f"{max_bytes} bytes (option max_bytes)")
    if os.path.isdir(real):
        raise ToolError(f"std.write_file: {relative!r} is a directory; give a file path inside it")
    existing = os.lstat(real) if os.path.lexists(real) else None
    if existing is not None:
        _workspace_check_regular("std.write_file", relative, existing)
    directory, name = os.path.split(real)
    try:
        _workspace_make_dirs(root, directory)
        temporary = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _workspace_open_flags(),
                     stat.S_IMODE(existing.st_mode) if existing is not None else 0o644)
    except OSError as exc:
        raise ToolError(f"std.write_file: cannot write {relative!r}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            if existing is not None:
                # the replacement keeps the owner of the file it replaces (root may give it back)
                try:
                    os.fchown(handle.fileno(), existing.st_uid, existing.st_gid)
                except PermissionError:
                    pass
            else:
                sandbox_give_to_tool_user(temporary)
            handle.write(data)
        os.replace(temporary, real)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise ToolError(f"std.write_file: cannot write {relative!r}: {exc.strerror or exc}") from exc
    return f"wrote {len(data)} bytes to {relative.replace(os.sep, '/')}"


def _workspace_make_dirs(root: str, directory: str) -> None:
    """os.makedirs inside the workspace, each directory it makes given to the user tool code runs as."""
    missing = []
    while not os.path.lexists(directory) and _workspace_contains(root, directory) and directory != root:
        missing.append(directory)
        directory = os.path.dirname(directory)
    for path in reversed(missing):
        os.mkdir(path, 0o755)
        sandbox_give_to_tool_user(path)


def _workspace_list(root: str, path: str, max_files: int) -> list[str]:
    real, relative = _workspace_resolve(root, path, "std.list_files")
    if not os.path.isdir(real):
        kind = "a file" if os.path.exists(real) else "not in the workspace"
        raise ToolError(f"std.list_files: {relative!r} is {kind}; give a directory, or nothing for the "
                        "whole workspace")
    found: list[str] = []
    complete = True
    for dirpath, dirnames, filenames in os.walk(real):
        if dirpath == root and SANDBOX_TMP_DIR in dirnames:
            dirnames.remove(SANDBOX_TMP_DIR)
        for filename in filenames:
            full = os.path.join(dirpath, filename)
            if os.path.islink(full):
                target = os.path.realpath(full)
                if not (_workspace_contains(root, target) and os.path.isfile(target)):
                    continue
            found.append(os.path.relpath(full, root).replace(os.sep, "/"))
        if len(found) >= _WORKSPACE_WALK_CEILING:
            complete = False
            break
    found.sort()
    if len(found) > max_files:
        total = f"{len(found)}" if complete else f"more than {len(found)}"
        return found[:max_files] + [f"[listing truncated: {max_files} of {total} files shown]"]
    return found


# ---- argument models and function schemas ---------------------------------------------------------------


@dataclass(frozen=True)
class _ToolParam:
    field: str  # the field name inside the argument model (the parameter's name is its alias)
    name: str
    kind: Any  # inspect.Parameter kind
    required: bool
    default: Any
    type_text: str


@dataclass
class _ToolEntry:
    name: str
    function_name: str
    description: str
    args_model: type[BaseModel]
    params: tuple[_ToolParam, ...]
    function: Callable[..., Any] | None = None  # the user's function; None for std tools
    takes_secrets: bool = False  # the function has a `secrets` parameter: it gets the tool's secrets

    def usage(self) -> str:
        parts = []
        for param in self.params:
            text = f"{param.name}: {param.type_text}"
            if not param.required:
                text += " (optional)" if self.function is None else f" = {param.default!r}"
            parts.append(text)
        return f"{self.function_name}({', '.join(parts)})"


_NOTATION_TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "any": Any}


def _notation_type(notation: str) -> Any:
    """A Python type for a type in the language's notation ("str", "list[int]", "float?")."""
    notation = notation.strip()
    if notation.endswith("?"):
        return typing.Optional[_notation_type(notation[:-1])]  # noqa: UP045 - built at runtime
    if notation.startswith("list[") and notation.endswith("]"):
        return list[_notation_type(notation[5:-1])]  # type: ignore[misc]
    return _NOTATION_TYPES[notation]


def _function_name(name: str) -> str:
    # Most providers accept only [A-Za-z0-9_-] in function names.
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


_ARGS_HEADER = re.compile(r"^(Args|Arguments|Parameters|Params):\s*$")
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its first paragraph and per-parameter docs (Google `Args:` or `:param x:`)."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or _ARGS_HEADER.match(stripped) or stripped.startswith(":"):
            break
        summary.append(stripped)
    param_docs: dict[str, str] = {}
    in_args = False
    args_indent: int | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if indent == 0 and _ARGS_HEADER.match(stripped):
            in_args, args_indent, current = True, None, None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            current = sphinx.group(1)
            param_docs[current] = sphinx.group(2).strip()
            continue
        if not stripped:
            continue
        if in_args and indent == 0:
            in_args, current = False, None  # the next section begins
        if in_args:
            if args_indent is None:
                args_indent = indent
            match = _ARG_LINE.match(stripped)
            if indent <= args_indent and match:
                current = match.group(1)
                param_docs[current] = match.group(2).strip()
                continue
        if current is not None and (in_args or indent > 0):
            param_docs[current] = f"{param_docs[current]} {stripped}".strip()
        elif not in_args:
            current = None
    return " ".join(summary), param_docs


def _type_text(annotation: Any) -> str:
    if annotation is Any:
        return "Any"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _clean_schema(schema: Any) -> Any:
    """Drop pydantic's generated titles: they add tokens and tell a model nothing the names do not."""
    if isinstance(schema, dict):
        cleaned = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs") and isinstance(value, dict):
                cleaned[key] = {name: _clean_schema(sub) for name, sub in value.items()}
            else:
                cleaned[key] = _clean_schema(value)
        return cleaned
    if isinstance(schema, list):
        return [_clean_schema(item) for item in schema]
    return schema


def _args_model(model_name: str, params: list[tuple[_ToolParam, Any, str]]) -> type[BaseModel]:
    # Fields get neutral names with the parameter name as alias, so a parameter called `schema`, `json` or
    # `model_config` cannot collide with pydantic's own attributes.
    fields: dict[str, Any] = {}
    for param, annotation, doc in params:
        default = ... if param.required else param.default
        fields[param.field] = (annotation, Field(default, alias=param.name, description=doc or None))
    # a float is a finite number: the "nan" or "1e400" a model may write for one is refused, not converted
    config = ConfigDict(extra="forbid", populate_by_name=False, arbitrary_types_allowed=False, allow_inf_nan=False)
    return create_model(model_name, __config__=config, **fields)


def _std_entry(name: str) -> _ToolEntry:
    info = STD_TOOLS[name]
    param_docs = info.get("param_docs", {})
    params = []
    for index, (param_name, (notation, required)) in enumerate(info["params"].items()):
        param = _ToolParam(field=f"arg{index}", name=param_name, kind=inspect.Parameter.KEYWORD_ONLY,
                           required=required, default=None, type_text=notation)
        params.append((param, _notation_type(notation), param_docs.get(param_name, "")))
    function_name = _function_name(name)
    return _ToolEntry(name=name, function_name=function_name, description=info["doc"],
                      args_model=_args_model(f"{function_name}_args", params),
                      params=tuple(param for param, _, _ in params))


def _import_tool(name: str, import_path: str) -> Callable[..., Any]:
    module_name, sep, attribute = import_path.partition(":")
    if not sep or not module_name or not attribute:
        raise ToolError(f"tool {name!r}: import path {import_path!r} must look like 'package.module:function'")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # an import can fail in any way the module's own code can
        raise ToolError(f"tool {name!r}: cannot import module {module_name!r} ({type(exc).__name__}: "
                        f"{exc}); is it installed or on PYTHONPATH?") from exc
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ToolError(f"tool {name!r}: module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ToolError(f"tool {name!r}: {import_path!r} is a {type(target).__name__}, not a function")
    return typing.cast(Callable[..., Any], target)


def _user_entry(name: str, import_path: str, secrets: tuple[str, ...] = ()) -> _ToolEntry:
    function = _import_tool(name, import_path)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"tool {name!r}: cannot read the signature of {import_path!r}: {exc}") from exc
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except (NameError, TypeError, AttributeError, SyntaxError):
        # an annotation that does not resolve: fall back to the raw annotations below
        hints = {}
    description, param_docs = _parse_docstring(inspect.getdoc(function))
    params = []
    takes_secrets = False
    for index, parameter in enumerate(signature.parameters.values()):
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if parameter.name == SECRETS_PARAMETER:
            # the tool's secrets, passed by the registry: never part of the schema a model sees
            if parameter.kind == inspect.Parameter.POSITIONAL_ONLY:
                raise ToolError(f"tool {name!r}: the parameter {SECRETS_PARAMETER!r} of {import_path!r} is "
                                "positional-only; the secrets are passed by keyword", tool=name)
            takes_secrets = True
            continue
        annotation = hints.get(parameter.name, parameter.annotation)
        if annotation is inspect.Parameter.empty or isinstance(annotation, str):
            annotation = Any
        required = parameter.default is inspect.Parameter.empty
        param = _ToolParam(field=f"arg{index}", name=parameter.name, kind=parameter.kind, required=required,
                           default=None if required else parameter.default,
                           type_text=_type_text(annotation))
        params.append((param, annotation, param_docs.get(parameter.name, "")))
    function_name = _function_name(name)
    try:
        model = _args_model(f"{function_name}_args", params)
        model.model_json_schema()
    except Exception as exc:  # pydantic cannot describe some parameter type
        raise ToolError(f"tool {name!r}: cannot build an argument schema for {import_path!r}: "
                        f"{type(exc).__name__}: {exc}") from exc
    if secrets and not takes_secrets:
        raise ToolError(f"tool {name!r} declares secrets [{', '.join(secrets)}], but {import_path!r} has no "
                        f"{SECRETS_PARAMETER!r} parameter to receive them; add one (a mapping of name to value)",
                        tool=name)
    return _ToolEntry(name=name, function_name=function_name, description=description or f"Calls {import_path}.",
                      args_model=model, params=tuple(param for param, _, _ in params), function=function,
                      takes_secrets=takes_secrets)


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > _ERROR_TEXT_CAP:
        text = text[:_ERROR_TEXT_CAP] + " [...]"
    return text


# ---- the registry -------------------------------------------------------------------------------------------


class ToolRegistry:
    """The tools one machine may use, by the names its spec gives them.

    Standard tools that are on by default are always there; std.shell and std.http_get only when the
    machine declares them. Models see each tool under a function name without dots (`std.python` ->
    `std_python`); `call` accepts either form.
    """

    def __init__(self, machine_tools: Mapping[str, ToolSpec], workspace: str, *, unsafe_tools: bool = False,
                 jail_program: str | None = None, secrets: Mapping[str, str] | None = None) -> None:
        self.workspace = os.path.realpath(os.path.abspath(workspace))
        if not os.path.isdir(self.workspace):
            os.makedirs(self.workspace, exist_ok=True)
            # a workspace made here belongs to the user tool code runs as (uid 65534 when this is root)
            sandbox_give_to_tool_user(self.workspace)
        # std.python and std.shell run in the bubblewrap jail; where it cannot run they refuse, unless
        # `unsafe_tools` (the runner's --unsafe-tools) lets them run unconfined
        self.sandbox = Sandbox(unsafe=unsafe_tools, program=jail_program)
        specs = {name: ToolSpec(name=name) for name, info in STD_TOOLS.items() if info["enabled_by_default"]}
        specs.update(machine_tools)
        self._specs: dict[str, ToolSpec] = specs
        self._by_function: dict[str, str] = {}
        for name in specs:
            function_name = _function_name(name)
            if function_name in self._by_function:
                raise ToolError(f"tools {self._by_function[function_name]!r} and {name!r} would both be "
                                f"offered to models as {function_name!r}; rename one of them")
            self._by_function[function_name] = name
        self._entries: dict[str, _ToolEntry] = {}
        # the run's secret values (tool_secrets.read_secrets): used in requests, redacted from what comes back,
        # as are the environment's keys and tokens (a user tool runs in this process and can read them)
        self._secrets = dict(secrets or {})
        self._redactions = sorted({*secret_forms(self._secrets.values()), *secret_values()}, key=len, reverse=True)

    def kill_processes(self) -> int:
        """SIGKILL the process group of every std.python and std.shell call running now; the number killed.

        For a runner stopped by SIGTERM: safe to call from a signal handler (it only sends signals). A call
        it killed, and any later one, raises SandboxStopped (a KeyboardInterrupt) instead of returning, so
        no run records a killed call's result; the registry runs no more code after it."""
        return self.sandbox.kill()

    def names(self) -> list[str]:
        return list(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs or name in self._by_function

    def function_name(self, name: str) -> str:
        """The name models see for a tool (`std.python` -> `std_python`)."""
        return _function_name(self.tool_name(name))

    def tool_name(self, name: str) -> str:
        """The spec's name for a tool given either its spec name or its function name."""
        if name in self._specs:
            return name
        if name in self._by_function:
            return self._by_function[name]
        dotted = name.replace("_", ".", 1) if name.startswith("std_") else name
        if dotted in STD_TOOLS:
            raise ToolError(f"{dotted} is off for this machine: it must declare `tool {dotted}` to enable it",
                            tool=dotted)
        known = sorted(self._by_function)
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ToolError(f"there is no tool named {name!r}; available tools: {', '.join(known)}.{hint}",
                        tool=name)

    def schema(self, name: str) -> dict[str, Any]:
        """The OpenAI function-tool schema for a tool: {"type": "function", "function": {...}}."""
        entry = self._entry(name)
        parameters = _clean_schema(entry.args_model.model_json_schema(by_alias=True))
        parameters.setdefault("properties", {})
        if entry.function is None:
            # a standard tool's optional parameters default to its options, not to the null pydantic shows
            for prop in parameters["properties"].values():
                prop.pop("default", None)
        return {"type": "function", "function": {"name": entry.function_name,
                                                 "description": entry.description,
                                                 "parameters": parameters}}

    def schemas(self, names: list[str] | tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        return [self.schema(name) for name in (self.names() if names is None else names)]

    def options(self, name: str) -> dict[str, Any]:
        """A standard tool's options: the machine's values over the defaults."""
        name = self.tool_name(name)
        merged = dict(STD_TOOLS.get(name, {}).get("option_defaults", {}))
        merged.update(self._specs[name].options)
        return merged

    def call(self, name: str, args: Mapping[str, Any] | str | None = None) -> Any:
        """`acall` for synchronous code."""
        return run_sync(self.acall(name, args))

    async def acall(self, name: str, args: Mapping[str, Any] | str | None = None) -> Any:
        """Validate the arguments, run the tool and return its JSON-ready result; ToolError otherwise.

        Standard tools run as asyncio subprocesses or plain file operations; a user tool written as
        `async def` is awaited, a synchronous one runs in a worker thread so that it cannot stall the
        other runs sharing the event loop. A secret value in the result or in an error (a server that
        echoes a header, a tool that prints its key) comes back as [REDACTED]."""
        if not self._redactions:
            return await self._acall(name, args)
        try:
            result = await self._acall(name, args)
        except ToolError as exc:
            raise ToolError(redact(str(exc), self._redactions), tool=exc.tool) from None
        return redact_data(result, self._redactions)

    async def _acall(self, name: str, args: Mapping[str, Any] | str | None) -> Any:
        entry = self._entry(name)
        positional, keywords = self._arguments(entry, args)
        if entry.function is None:
            try:
                return await self._run_std(entry.name, keywords)
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(f"{entry.name} failed: {_error_text(exc)}", tool=entry.name) from exc
        function = entry.function
        if entry.takes_secrets:
            keywords[SECRETS_PARAMETER] = self._tool_secrets(entry.name)
        try:
            if inspect.iscoroutinefunction(function):
                result = await function(*positional, **keywords)
            else:
                result = await asyncio.to_thread(function, *positional, **keywords)
                if inspect.isawaitable(result):
                    result = await result
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"tool {entry.name!r} raised {_error_text(exc)}", tool=entry.name) from exc
        return self._json_ready(entry, result)

    # -- internals --

    def _entry(self, name: str) -> _ToolEntry:
        name = self.tool_name(name)
        entry = self._entries.get(name)
        if entry is None:
            spec = self._specs[name]
            if spec.import_path:
                entry = _user_entry(name, spec.import_path, spec.secrets)
            elif name in STD_TOOLS:
                entry = _std_entry(name)
            else:
                known = ", ".join(sorted(STD_TOOLS))
                raise ToolError(f"{name!r} is not a standard tool (they are: {known}) and has no import path",
                                tool=name)
            self._entries[name] = entry
        return entry

    def _arguments(self, entry: _ToolEntry, args: Mapping[str, Any] | str | None
                   ) -> tuple[list[Any], dict[str, Any]]:
        if args is None:
            args = {}
        if isinstance(args, str):
            try:
                args = read_json(args, "the arguments") if args.strip(JSON_SPACE) else {}
            except ValueError as exc:
                raise ToolError(f"{entry.name}: the arguments are not valid JSON ({exc}); send a JSON object. "
                                f"Call it as {entry.usage()}.", tool=entry.name) from exc
        if not isinstance(args, Mapping):
            raise ToolError(f"{entry.name}: the arguments must be a JSON object, not {type(args).__name__}. "
                            f"Call it as {entry.usage()}.", tool=entry.name)
        if entry.function is None:
            # models often send null for an optional parameter they mean to leave out
            optional = {param.name for param in entry.params if not param.required}
            args = {key: value for key, value in args.items() if not (value is None and key in optional)}
        try:
            validated = entry.args_model.model_validate(dict(args))
        except ValidationError as exc:
            raise ToolError(self._problems(entry, exc), tool=entry.name) from None
        given = validated.model_fields_set
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for param in entry.params:
            if param.kind == inspect.Parameter.POSITIONAL_ONLY:
                positional.append(getattr(validated, param.field) if param.field in given else param.default)
            elif param.field in given:
                keywords[param.name] = getattr(validated, param.field)
        return positional, keywords

    def _problems(self, entry: _ToolEntry, exc: ValidationError) -> str:
        names = [param.name for param in entry.params]
        lines = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                close = difflib.get_close_matches(str(error["loc"][-1]), names, n=1)
                message = "unexpected argument" + (f" (did you mean {close[0]!r}?)" if close else "")
            elif error["type"] == "missing":
                message = "missing required argument"
            lines.append(f"- {where}: {message}")
        return f"{entry.name}: bad arguments:\n" + "\n".join(lines) + f"\nCall it as {entry.usage()}."

    def _json_ready(self, entry: _ToolEntry, result: Any) -> Any:
        try:
            # before anything recurses into it; JSON sinks (the model, the trace, the checkpoint) take it
            check_value(result, f"the result of tool {entry.name!r}", finite=True)
        except BorderError as exc:
            hint = ": return a number, or None" if exc.limit == "number" else ""
            raise ToolError(f"{exc}{hint}", tool=entry.name) from None
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        try:
            json.dumps(result, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ToolError(f"tool {entry.name!r} returned a value of type {type(result).__name__!r}, which "
                            f"is not JSON-serialisable ({exc}); tools must return str, numbers, bools, None, "
                            "lists and dicts", tool=entry.name) from exc
        return result

    def _tool_secrets(self, name: str) -> Mapping[str, str]:
        """What a user tool's `secrets` parameter receives: its declared secrets, read-only."""
        names = self._specs[name].secrets
        missing = [secret for secret in names if secret not in self._secrets]
        if missing:
            raise ToolError(f"tool {name!r} needs the secret{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(missing)}, and the environment does not set "
                            f"{'them' if len(missing) > 1 else 'it'}", tool=name)
        return MappingProxyType({secret: self._secrets[secret] for secret in names})

    def _http_request_parts(self, name: str) -> tuple[list[tuple[str, str, bool]], list[tuple[str, str]]]:
        """std.http_get's headers (name, value, carries a secret) and query parameters, secrets put in."""
        spec = self._specs[name]
        try:
            headers = [(key, render_secret_template(value, self._secrets, name), bool(secret_references(value)))
                       for key, value in spec.headers]
            query = [(key, render_secret_template(value, self._secrets, name)) for key, value in spec.query]
        except SecretError as exc:
            raise ToolError(str(exc), tool=name) from None
        return headers, query

    def _positive_option(self, name: str, key: str) -> float:
        value = self.options(name).get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ToolError(f"{name}: option {key} must be a positive number, not {value!r}", tool=name)
        return value

    def _sandbox_limits(self, name: str, timeout: float | None) -> SandboxLimits:
        default = self._positive_option(name, "timeout")
        if timeout is None:
            timeout = default
        elif not timeout > 0:
            raise ToolError(f"{name}: timeout must be a positive number of seconds, not {timeout!r}", tool=name)
        ceiling = max(self._positive_option(name, "max_timeout"), default)
        return SandboxLimits(timeout=min(timeout, ceiling),
                             memory_mb=int(self._positive_option(name, "memory_mb")),
                             max_output=int(self._positive_option(name, "max_output")),
                             max_file_mb=int(self._positive_option(name, "max_file_mb")),
                             max_processes=int(self._positive_option(name, "max_processes")))

    async def _run_code(self, name: str, argv: list[str], timeout: float | None,
                        stdin_data: bytes | None = None) -> dict[str, Any]:
        limits = self._sandbox_limits(name, timeout)
        network = self.options(name).get("network", False)
        if not isinstance(network, bool):
            raise ToolError(f"{name}: option network must be true or false, not {network!r}", tool=name)
        tmp_bytes = int(self._positive_option(name, "tmp_mb") * 1024 * 1024)
        try:
            return await self.sandbox.run(argv, self.workspace, limits, network=network, tmp_bytes=tmp_bytes,
                                          stdin_data=stdin_data)
        except SandboxError as exc:
            raise ToolError(f"{name}: {exc}", tool=name) from exc

    async def _run_std(self, name: str, args: dict[str, Any]) -> Any:
        if name == "std.python":
            # -E -s: ignore PYTHON* variables and user site-packages (what -I does) while keeping the
            # workspace on sys.path, so code can import modules it wrote there. -B: no bytecode cache in the
            # workspace. -u: unbuffered, so output printed before a timeout is not lost. The code comes on
            # stdin: no argv length limit.
            if not sys.executable:
                raise ToolError("std.python: no Python interpreter is known to this process", tool=name)
            argv = [sys.executable, "-E", "-s", "-B", "-u", "-X", "utf8", "-"]
            return await self._run_code(name, argv, args.get("timeout"),
                                        stdin_data=args["code"].encode("utf-8", errors="replace"))
        if name == "std.shell":
            return await self._run_code(name, ["/bin/sh", "-c", args["command"]], args.get("timeout"))
        if name == "std.read_file":
            return _workspace_read(self.workspace, args["path"], int(self._positive_option(name, "max_bytes")))
        if name == "std.write_file":
            return _workspace_write(self.workspace, args["path"], args["content"],
                                    int(self._positive_option(name, "max_bytes")))
        if name == "std.list_files":
            return _workspace_list(self.workspace, args.get("path") or ".",
                                   int(self._positive_option(name, "max_files")))
        if name == "std.http_get":
            allow = self.options(name).get("allow") or []
            if isinstance(allow, str):
                allow = [allow]
            headers, query = self._http_request_parts(name)
            try:
                return await http_get(args["url"], [str(entry) for entry in allow],
                                      self._positive_option(name, "timeout"),
                                      int(self._positive_option(name, "max_bytes")), headers=headers, query=query)
            except HttpGetError as exc:
                raise ToolError(str(exc), tool=name) from None
        raise ToolError(f"{name!r} has no implementation in this runtime", tool=name)

