"""Tool secrets: what a tool's `secrets`, `headers` and `query` may hold, and keys written into the spec.

A secret is named, never written: `secrets [SEARCH_API_KEY]` in a tool, `${SEARCH_API_KEY}` in a header or
query value of `std.http_get`. Here every reference is checked against the tool's own secrets (SW2040),
each tool against what it can do with secrets (SW2041), headers and query parameters against HTTP
(SW2042), and the rest of the spec for text that looks like a key written in (SW7040), secrets nothing uses
(SW7041) and `${NAME}` where no secret is ever put in (SW7042).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property

from ...diagnostics import Diagnostics, Span, did_you_mean, quoted_list
from ...grammar import ast
from ...grammar.node import Node, child_fields
from ...grammar.strings import OffsetMap
from ...runtime.tool_secrets import header_value_problem, secret_template_parts
from ...runtime.tool_signatures import STD_TOOLS
from .resolve import Symbols, closest
from .template_source import string_offsets

# the tools that put secrets somewhere: std.http_get into its requests, a user tool into its own code
HTTP_TOOL = "std.http_get"
# a header name is an RFC 9110 token
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# headers std.http_get writes itself (User-Agent may be replaced; these may not)
_CLIENT_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "accept-encoding", "te", "trailer", "upgrade",
    "keep-alive", "proxy-authorization", "proxy-connection", "expect",
})
# words in a header or parameter name that say its value is a credential
_CREDENTIAL_WORDS = ("key", "token", "secret", "auth", "authorization", "password", "passwd", "pwd", "cookie",
                     "credential", "credentials", "signature", "sig", "session")
# text shaped like a real key (strict: words such as "Bearer authentication" do not count)
_LITERAL_KEY = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{20,}"  # OpenAI, Anthropic (sk-ant-...), Stripe
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bAIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|\b[Bb]earer\s+(?=[A-Za-z0-9._~+/=\-]*[0-9])[A-Za-z0-9._~+/=\-]{16,}"  # a bearer token with digits
)


def check_secrets(machine: ast.Machine, symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Every tool's secrets, headers and query parameters; then the spec's text for keys written in."""
    declared: set[str] = set()
    for name, decl in symbols.tools.items():
        _check_tool(name, decl, diagnostics)
        declared.update(decl.secret_names)
    for string in _strings_outside_tests(machine):
        _check_text(string, declared, diagnostics)


# ---- one tool --------------------------------------------------------------------------------------


def _check_tool(name: str, decl: ast.ToolDecl, diags: Diagnostics) -> None:
    repeated: tuple[tuple[str, tuple[ast.ToolSecrets | ast.ToolHeaders | ast.ToolQuery, ...]], ...] = (
        ("secrets", decl.secrets), ("headers", decl.headers), ("query", decl.query))
    for kind, blocks in repeated:
        for repeat in blocks[1:]:
            diags.report("SW2010", f"'{kind}' is given twice for '{name}'", repeat.span, label="second occurrence",
                         help=f"keep one '{kind}'; the first one is used")
    secrets = _check_secret_names(decl, diags)
    is_std = decl.name.parts[0] == "std"
    if is_std and name not in STD_TOOLS:
        return  # reported as an unknown tool
    if is_std and name != HTTP_TOOL:
        for listed in decl.secrets[:1]:
            diags.report("SW2041", f"'{name}' cannot take secrets", listed.span,
                         label="no secret reaches this tool",
                         help=_no_secrets_help(name))
    entries = [("header", e) for b in decl.headers[:1] for e in b.entries]
    entries += [("query parameter", e) for b in decl.query[:1] for e in b.entries]
    if name != HTTP_TOOL:
        for keyword, blocks in repeated[1:]:
            for block in blocks[:1]:
                diags.report("SW2041", f"only std.http_get takes '{keyword}'", block.span,
                             label=f"'{name}' sends no HTTP request of its own",
                             help=("a user tool receives its secrets in its 'secrets' parameter and builds its "
                                   "own requests" if not is_std else f"declare 'tool std.http_get' with '{keyword}'"))
        return
    used: set[str] = set()
    seen: dict[tuple[str, str], ast.TextEntry] = {}
    for what, entry in entries:
        _check_entry_name(what, entry, seen, diags)
        used.update(_check_entry_value(what, entry, secrets, diags))
    for block in decl.secrets[:1]:
        for secret in block.names:
            if secret.value not in used and secret.value in secrets:
                diags.report("SW7041", f"secret '{secret.value}' is never used", secret.span,
                             label="no header or query parameter puts it in",
                             help=f'put it into a header, e.g. Authorization "Bearer ${{{secret.value}}}", or a '
                                  f'query parameter, or remove it')
                secrets.discard(secret.value)


def _check_secret_names(decl: ast.ToolDecl, diags: Diagnostics) -> set[str]:
    names: set[str] = set()
    for block in decl.secrets[:1]:
        for secret in block.names:
            if secret.value in names:
                diags.report("SW2001", f"secret '{secret.value}' is listed twice", secret.span,
                             label="listed again", help="list each secret once")
            names.add(secret.value)
    return names


def _no_secrets_help(name: str) -> str:
    if name in ("std.python", "std.shell"):
        return ("code in the jail never sees the runner's environment or its secrets; call the service from "
                "std.http_get with 'headers', or from a user tool whose function takes a 'secrets' parameter")
    return "only std.http_get (in 'headers' and 'query') and user tools (a 'secrets' parameter) use secrets"


def _check_entry_name(what: str, entry: ast.TextEntry, seen: dict[tuple[str, str], ast.TextEntry],
                      diags: Diagnostics) -> None:
    name = entry.name.value
    key = (what, name.lower() if what == "header" else name)
    if key in seen:
        diags.report("SW2042", f"{what} '{name}' is given twice", entry.name.span, label="second occurrence",
                     help=f"give each {what} once" + (" (header names ignore case)" if what == "header" else ""))
        return
    seen[key] = entry
    if what == "query parameter":
        if not name:
            diags.report("SW2042", "a query parameter needs a name", entry.name.span, label="empty name",
                         help='write the parameter\'s name, e.g. api_key "${SEARCH_API_KEY}"')
        return
    if not _HEADER_NAME.fullmatch(name):
        diags.report("SW2042", f"'{name}' is not a header name", entry.name.span,
                     label="not an HTTP header name",
                     help="a header name is letters, digits and !#$%&'*+-.^_`|~, e.g. \"X-Api-Key\"")
    elif name.lower() in _CLIENT_HEADERS:
        diags.report("SW2042", f"std.http_get writes the header '{name}' itself", entry.name.span,
                     label="cannot be set here",
                     help="std.http_get sets Host, Connection, Accept-Encoding and the framing headers of each "
                          "request; remove this one")


def _check_entry_value(what: str, entry: ast.TextEntry, secrets: set[str], diags: Diagnostics) -> set[str]:
    """The secrets a header or query value puts in; reports references to no secret and unfit text."""
    value = entry.value
    parts = _PartSpans(value)
    used: set[str] = set()
    literal: list[str] = []
    references = 0
    for kind, text, start, end in secret_template_parts(value.value):
        references += kind != "text"
        if kind == "text":
            literal.append(text)
        elif kind == "malformed":
            diags.report("SW2042", f"{text!r} is not a secret reference", parts.span(start, end),
                         label="expected ${NAME}",
                         help="write ${NAME} for the secret NAME of this tool, or $${ for the text '${'")
        elif text in secrets:
            used.add(text)
        else:
            used.add(closest(text, secrets) or "")  # a misspelling is a use of what it meant: one problem
            diags.report("SW2040", f"unknown secret '{text}'", parts.span(start + 2, end - 1),
                         label="not one of this tool's secrets",
                         help=did_you_mean(text, secrets) or (
                             f"declare it: secrets [{text}] (its secrets are {quoted_list(sorted(secrets))})"
                             if secrets else f"declare it in the tool: secrets [{text}]"))
    if what == "header":
        problem = header_value_problem("".join(literal))
        if problem is not None:
            diags.report("SW2042", f"the value of header '{entry.name.value}' {problem}", value.span,
                         label="an HTTP header cannot carry this",
                         help="header values are printable ASCII text (a secret's value is checked when the run "
                              "starts)")
    written = "".join(literal)
    if _LITERAL_KEY.search(written) or (not references and written.strip() and _credential_name(entry.name.value)):
        diags.report("SW7040", f"{what} '{entry.name.value}' carries a literal credential", value.span,
                     label="a credential written into the spec",
                     help=_use_secrets_help(entry.name.value))
    return used


def _credential_name(name: str) -> bool:
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    return any(w in _CREDENTIAL_WORDS or w.endswith(("key", "token", "secret")) for w in words)


def _use_secrets_help(name: str) -> str:
    return (f"keep the key in an environment variable: add secrets [SEARCH_API_KEY] to the tool and write "
            f"{name} \"...${{SEARCH_API_KEY}}...\"; the spec, its IR and generated runners then hold only the "
            "variable's name")


# ---- the rest of the spec ------------------------------------------------------------------------


def _check_text(string: ast.String, declared: set[str], diags: Diagnostics) -> None:
    parts = _PartSpans(string)
    match = _LITERAL_KEY.search(string.value)
    if match is not None:
        diags.report("SW7040", "this text looks like a literal key", parts.span(*match.span()),
                     label="a credential written into the spec",
                     help="a key in the spec is committed with it, written into generated runners and may be "
                          "sent to models; keep it in an environment variable and give it to a tool with "
                          "secrets [NAME]")
    if declared:
        for kind, text, start, end in secret_template_parts(string.value):
            if kind == "secret" and text in declared:
                diags.report("SW7042", f"'${{{text}}}' is not replaced here", parts.span(start, end),
                             label="the text is used as written",
                             help="a secret is put in only by std.http_get's 'headers' and 'query', and given "
                                  "to a user tool's 'secrets' parameter; nothing else sees its value")


def _strings_outside_tests(machine: ast.Machine) -> Iterator[ast.String]:
    """Every string of the machine but those of test blocks (scripted data) and of headers and query
    values (checked with their tool), as String nodes; string literals in values and guards too."""
    stack: list[object] = [item for item in reversed(machine.items) if not isinstance(item, ast.TestDecl)]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:  # dispatched on the exact class: most nodes are none of the first three
        node = pop()
        if type(node) is ast.String:
            yield node
        elif type(node) is ast.Value:
            if node.kind == "str":
                yield _as_string(str(node.value), node.span)
            elif isinstance(node.value, tuple):
                extend(reversed(node.value))
        elif type(node) is ast.Literal:
            if isinstance(node.value, str):
                yield _as_string(node.value, node.span)
        elif isinstance(node, Node) and type(node) not in _NOT_SEARCHED:
            for name in reversed(child_fields(type(node))):
                child = getattr(node, name)
                if isinstance(child, tuple):
                    extend(reversed(child))
                elif isinstance(child, Node):
                    push(child)


_NOT_SEARCHED = frozenset({ast.ToolHeaders, ast.ToolQuery})  # checked with their tool


def _as_string(value: str, span: Span) -> ast.String:
    return ast.String(value, span is not None and span.text.startswith('"""'), span)


class _PartSpans:
    """The source spans of parts of one string literal. Its offset table covers the whole literal, so it
    is built once, for the first part reported, and shared by the rest (a long value can hold thousands
    of references); a string with nothing to report never builds it."""

    def __init__(self, string: ast.String) -> None:
        self.string = string

    @cached_property
    def _offsets(self) -> OffsetMap | None:
        return string_offsets(self.string) if self.string.span is not None else None

    def span(self, start: int, end: int) -> Span:
        """The source span of string[start:end), or the whole literal when the two cannot be lined up."""
        string, offsets = self.string, self._offsets
        if offsets is None or not 0 <= start < end <= len(string.value):
            return string.span
        return string.span.source.span(offsets[start], offsets[end])
