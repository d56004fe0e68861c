"""The checks of tool secrets, headers and query parameters: every `${...}` form and awkward header text gets a
positioned diagnostic (never a traceback), and keys written into the spec are noticed where they leak."""

from __future__ import annotations

import pytest

from statewright.api import check_text


def http_tool(*items: str, secrets: str = "secrets [KEY]") -> str:
    body = "\n".join(f"        {item}" for item in (secrets, *items) if item)
    return f"""machine m {{
    input topic: str
    tool std.http_get {{
        allow ["api.example"]
{body}
    }}
    start state s {{
        call std.http_get(url = "https://api.example/?q=" + topic)
        -> done
    }}
    final state done
}}
"""


def found(source: str) -> list[tuple[str, str, str]]:
    """(code, message, the exact source text the diagnostic points at) of every diagnostic."""
    return [(d.code, d.message, d.span.text if d.span is not None else "") for d in check_text(source, "s.fsm").diagnostics]


@pytest.mark.parametrize("value, problem", [
    ('"Bearer ${"', ("SW2042", "'${' is not a secret reference", "${")),
    ('"${ KEY }"', ("SW2042", "'${ KEY }' is not a secret reference", "${ KEY }")),
    ('"${1KEY}x"', ("SW2042", "'${1KEY}' is not a secret reference", "${1KEY}")),
    ('"${KEY}${OTHER}"', ("SW2040", "unknown secret 'OTHER'", "OTHER")),
    ('"\\u0041\\"${OTHER}"', ("SW2040", "unknown secret 'OTHER'", "OTHER")),  # escapes before it
    ('"${KEY}\\nX-Injected: 1"', ("SW2042", "the value of header 'X-Test' holds a line break", None)),
    ('"${KEY} caf\u00e9"', ("SW2042", "the value of header 'X-Test' holds the non-ASCII character 'é'", None)),
    ('"""\n            ${KEY}\n            more\n        """', ("SW2042", "the value of header 'X-Test' holds a line break",
                                                              None)),
])
def test_every_malformed_reference_and_unfit_header_value_is_a_positioned_error(
        value: str, problem: tuple[str, str, str | None]) -> None:
    diagnostics = found(http_tool(f'headers {{ "X-Test" {value} }}'))
    code, message, text = problem
    match = [d for d in diagnostics if d[0] == code and d[1] == message]
    assert match, diagnostics
    if text is not None:
        assert match[0][2] == text


def test_escaped_references_and_user_agent_are_fine() -> None:
    source = http_tool('headers { "X-Test" "$${KEY} is literal, ${KEY} is not" "User-Agent" "bot/1" }')
    assert found(source) == []


@pytest.mark.parametrize("entry, message", [
    ('"X Test" "${KEY}"', "'X Test' is not a header name"),
    ('"" "${KEY}"', "'' is not a header name"),
    ('Host "${KEY}"', "std.http_get writes the header 'Host' itself"),
    ('"transfer-encoding" "${KEY}"', "std.http_get writes the header 'transfer-encoding' itself"),
    ('"X-Key" "${KEY}" "x-key" "${KEY}"', "header 'x-key' is given twice"),
])
def test_header_names_are_http_tokens_given_once_and_not_the_clients_own(entry: str, message: str) -> None:
    assert ("SW2042", message) in [d[:2] for d in found(http_tool(f"headers {{ {entry} }}"))]


def test_a_query_parameter_needs_a_name_and_may_hold_anything() -> None:
    assert ("SW2042", "a query parameter needs a name") in [
        d[:2] for d in found(http_tool('query { "" "${KEY}" }'))]
    assert found(http_tool('query { "q with spaces é" "${KEY} line\\nbreak é" }')) == []


def test_settings_given_twice_and_secrets_listed_twice() -> None:
    codes = [d[:2] for d in found(http_tool('headers { A "${KEY}" }', "headers { B \"x\" }",
                                            secrets="secrets [KEY, KEY] secrets [KEY]"))]
    assert ("SW2001", "secret 'KEY' is listed twice") in codes
    assert ("SW2010", "'secrets' is given twice for 'std.http_get'") in codes
    assert ("SW2010", "'headers' is given twice for 'std.http_get'") in codes


def test_only_http_get_takes_headers_and_query_and_the_jail_takes_no_secrets() -> None:
    source = """machine m {
    tool lookup = "pkg.mod:lookup" {
        secrets [KEY]
        headers { A "${KEY}" }
    }
    tool std.python {
        query { a "b" }
        secrets [KEY]
    }
    agent a {
        prompt "p"
        tools [lookup, std.python]
    }
    start state s {
        agent a
        do "x"
        -> done
    }
    final state done
}
"""
    codes = [d[:2] for d in found(source)]
    assert ("SW2041", "only std.http_get takes 'headers'") in codes
    assert ("SW2041", "only std.http_get takes 'query'") in codes
    assert ("SW2041", "'std.python' cannot take secrets") in codes
    assert not any(code == "SW2041" and "lookup" in message and "secrets" in message for code, message in codes)


def test_keys_written_into_the_spec_are_noticed_outside_test_blocks() -> None:
    source = http_tool('headers { "X-Api-Key" "abc123" Authorization "${KEY}" }').replace(
        "    final state done\n", '''    final state done
    agent w {
        prompt "Use AKIAABCDEFGHIJKLMNOP and Bearer authentication; never ${KEY}."
    }
    test "t" {
        input {
            topic "sk-0123456789abcdefghijklmnop"
        }
        expect final done
    }
''')
    diagnostics = found(source)
    assert ("SW7040", "header 'X-Api-Key' carries a literal credential", '"abc123"') in diagnostics
    assert ("SW7040", "this text looks like a literal key", "AKIAABCDEFGHIJKLMNOP") in diagnostics
    assert ("SW7042", "'${KEY}' is not replaced here", "${KEY}") in diagnostics
    assert not any("sk-0123" in text for _, _, text in diagnostics)  # test data is data
    assert not any("Bearer authentication" in text for _, _, text in diagnostics)


def test_each_of_many_references_in_one_value_points_at_its_own_name() -> None:
    # escapes before and between them: the offsets of the value are not those of its source
    value = '"\\u0041 ${KEY} ' + " \\t".join(f"${{NOPE{i}}}" for i in range(1000)) + ' ${bad-"'
    diagnostics = found(http_tool(f'headers {{ "X-Test" {value} }}'))
    unknown = [text for code, _, text in diagnostics if code == "SW2040"]
    assert unknown == [f"NOPE{i}" for i in range(1000)]
    assert ("SW2042", "'${bad-' is not a secret reference", "${bad-") in diagnostics


def test_each_of_many_secret_references_in_a_text_is_reported_where_it_is() -> None:
    text = "\\n".join(["${KEY}"] * 1000)
    source = http_tool('headers { "X-Test" "${KEY}" }').replace(
        "    final state done\n", f'    final state done\n    agent w {{\n        prompt "{text}"\n    }}\n')
    comp = check_text(source, "s.fsm")
    spans = [d.span for d in comp.diagnostics if d.code == "SW7042" and d.span is not None]
    assert [s.text for s in spans] == ["${KEY}"] * 1000
    assert len({s.start for s in spans}) == 1000


@pytest.mark.parametrize("broken", [
    "secrets [1]", 'secrets ["KEY"]', "secrets [KEY", "headers { A }", 'headers { A "x" B }', "headers {",
    'query { "a": }', "secrets", 'headers "x"', "query [a]",
])
def test_a_malformed_tool_block_gets_positioned_syntax_errors(broken: str) -> None:
    diagnostics = check_text(http_tool(broken, secrets=""), "s.fsm").diagnostics
    assert diagnostics and all(d.span is not None and d.code.startswith("SW1") for d in diagnostics[:1])
    assert all("Traceback" not in d.message and d.code != "SW9001" for d in diagnostics)
