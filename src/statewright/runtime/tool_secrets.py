"""Tool secrets: environment variables a spec names, read when a run starts, used in requests, never shown.

A tool declares `secrets [SEARCH_API_KEY]`. `std.http_get` writes a secret into its `headers` and `query`
as `${SEARCH_API_KEY}` (`$${` is a literal `${`); a user tool whose function takes a `secrets` parameter
receives them as a read-only mapping. The spec, the IR and a generated runner hold the names only; the
values come from the environment of the process that runs the machine, and every sink redacts them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: `statewright check` reads this module without the runtime's specs
    from .spec import MachineSpec, ToolSpec

# `$${` first, so that an escaped reference is never read as a reference; a lone `${` is malformed
SECRET_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{")
# the parameter of a user tool's function that receives the secrets (never offered to a model)
SECRETS_PARAMETER = "secrets"


class SecretError(Exception):
    """A secret the machine names cannot be used: not set, empty, or unfit for where it goes. A
    configuration problem, found when a run starts, before any model call; the message names each
    variable and never holds a value."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def secret_template_parts(template: str) -> Iterator[tuple[str, str, int, int]]:
    """`template` as ("text", TEXT, start, end), ("secret", NAME, start, end) and ("malformed", TEXT,
    start, end) parts, in order; `$${` is the text `${`."""
    position = 0
    for match in SECRET_REFERENCE.finditer(template):
        if match.start() > position:
            yield "text", template[position : match.start()], position, match.start()
        if match.group(0) == "$${":
            yield "text", "${", match.start(), match.end()
        elif match.group(1) is not None:
            yield "secret", match.group(1), match.start(), match.end()
        else:
            close = template.find("}", match.end())
            end = close + 1 if close >= 0 else len(template)
            yield "malformed", template[match.start() : end], match.start(), end
        position = match.end()
    if position < len(template):
        yield "text", template[position:], position, len(template)


def secret_references(template: str) -> list[str]:
    """The secrets `template` puts in, in order."""
    return [text for kind, text, _, _ in secret_template_parts(template) if kind == "secret"]


def render_secret_template(template: str, secrets: Mapping[str, str], tool: str) -> str:
    """`template` with every `${NAME}` replaced by the secret's value. KeyError-free: a secret the run does
    not have is a SecretError naming it (a test block runs without the environment's secrets)."""
    out = []
    for kind, text, _, _ in secret_template_parts(template):
        if kind == "secret":
            if text not in secrets:
                raise SecretError([_missing_text(text, tool)])
            out.append(secrets[text])
        elif kind == "malformed":
            message = f"{tool}: {text!r} is not a secret reference; write ${{NAME}}, or $${{ for the text '${{'"
            raise SecretError([message])
        else:
            out.append(text)
    return "".join(out)


def header_value_problem(value: str) -> str | None:
    """Why text cannot stand in an HTTP header value (None when it can): only printable ASCII and tabs."""
    for ch in value:
        if ch == "\t" or " " <= ch <= "~":
            continue
        if ch in "\r\n":
            return "holds a line break"
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return f"holds the control character U+{ord(ch):04X}"
        return f"holds the non-ASCII character {ch!r}"
    return None


def header_secrets(tool: ToolSpec) -> set[str]:
    """The secrets a tool writes into its headers (which must be header-safe text)."""
    return {name for _, value in tool.headers for name in secret_references(value)}


def read_secrets(machine: MachineSpec, environ: Mapping[str, str], *, required: bool = True) -> dict[str, str]:
    """The values of every secret the machine's tools name, read from `environ`.

    With `required`, a secret that is not set (or is empty) is a SecretError naming it and the tools that
    need it; so is a value a header cannot carry. Without (a test block), the secrets that are set and fit
    are returned and the others left out: the tool that needs one fails its call, naming the variable."""
    values: dict[str, str] = {}
    problems: list[str] = []
    for name, tools in _needed(machine).items():
        value = environ.get(name)
        if not value:
            if required:
                state = "is empty" if value == "" else "is not set"
                problems.append(f"the environment variable {name} {state}; {_needers(tools)}")
            continue
        in_header = [tool for tool in tools if name in header_secrets(tool)]
        problem = header_value_problem(value) if in_header else None
        if problem is not None:
            if required:
                problems.append(f"the environment variable {name} {problem}, which an HTTP header cannot "
                                f"carry; {_needers(in_header)}")
            continue
        values[name] = value
    if problems:
        raise SecretError(problems)
    return values


def _needed(machine: MachineSpec) -> dict[str, list[ToolSpec]]:
    """The secrets the tools of the machine, and of every machine it runs, name."""
    from .spec import every_machine

    needed: dict[str, list[ToolSpec]] = {}
    for each in every_machine(machine):
        for tool in each.tools.values():
            for name in tool.secrets:
                needed.setdefault(name, []).append(tool)
    return needed


def _needers(tools: list[ToolSpec]) -> str:
    named = ", ".join(f"{tool.name}" + (f" ({tool.origin})" if tool.origin else "") for tool in tools)
    plural = "s" if len(tools) > 1 else ""
    return (f"tool{plural} {named} name{'' if plural else 's'} it in 'secrets'; set it in the environment before "
            "the run starts")


def _missing_text(name: str, tool: str) -> str:
    return (f"{tool} needs the secret {name}, and the environment variable {name} is not set or holds a value "
            "the tool cannot use (a test block starts without the secrets it lacks)")
