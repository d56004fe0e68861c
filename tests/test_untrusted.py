"""The guard where untrusted JSON and values enter (runtime/untrusted.py): depth and size, without recursion.

The scan of a value inside other text must read exactly as far as json's `raw_decode` reads (so trying
every bracket of a reply costs no more than json's own tries), and refuse exactly the values that nest
deeper than the limit; the check of a whole text must refuse every text json would read that nests too
deeply. Hypothesis writes JSON, cuts and mutates it, and holds both to json itself.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statewright.runtime.untrusted import (
    MAX_DEPTH,
    BorderError,
    check_text,
    check_value,
    json_depth_problem,
    read_json,
    read_json_file,
    read_lines,
    scan_json_value,
)

_LENIENT = json.JSONDecoder(strict=False)


def depth(value: Any) -> int:
    """How deep lists and objects nest in a value, by a walk with a stack (the values here are deep)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            level += 1
            deepest = max(deepest, level)
            stack.extend((member, level) for member in (item.values() if isinstance(item, dict) else item))
    return deepest


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                    st.text(alphabet=st.sampled_from('ab"\\/[]{}:,\n\t\x00é€\U0001F600\ud800 '), max_size=8))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(alphabet='k"\\[{é\n', max_size=3), inner, max_size=4)),
    max_leaves=30)


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    """JSON as json writes it (any layout), or wrapped in a chain of lists, sometimes cut or mutated."""
    value = draw(json_values)
    for _ in range(draw(st.integers(0, 12))):
        value = [value] if draw(st.booleans()) else {"k": value}
    text = json.dumps(value, indent=draw(st.sampled_from([None, 0, 2])), ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        edits = draw(st.lists(st.tuples(st.integers(0, len(text)), st.sampled_from(
            ['', '[', ']', '{', '}', ',', ':', '"', '\\', ' ', 'x', '1', 'true', 'nul', '-', '.5'])), max_size=3))
        for at, piece in edits:
            text = text[:at] + piece + text[at + 1:]
    return text


@given(json_texts(), st.integers(0, 14), st.sampled_from(["", "prose [ ", "x{"]))
@settings(max_examples=600, deadline=None)
def test_the_scan_of_a_value_reads_what_raw_decode_reads_and_refuses_what_nests_too_deeply(
        text: str, limit: int, before: str) -> None:
    whole = f"{before}{text} and more ]]"
    start = len(before)
    try:
        value, end = _LENIENT.raw_decode(whole, start)
    except (ValueError, RecursionError):
        value = end = None
    try:
        got = scan_json_value(whole, start, "it", limit)
    except BorderError as refused:
        assert refused.limit == "depth"
        assert end is None or depth(value) > limit, (whole, limit)
        return
    if end is None:
        assert got is None, whole  # no value json reads: the scan finds none either
    else:
        assert depth(value) <= limit and got == end, (whole, limit, got, end)


@given(json_texts(), st.integers(0, 14))
@settings(max_examples=600, deadline=None)
def test_the_check_of_a_text_refuses_exactly_the_json_that_nests_too_deeply(text: str, limit: int) -> None:
    try:
        value = json.loads(text, strict=False)
    except (ValueError, RecursionError):
        return  # not JSON: refused or not, json refuses it too
    problem = json_depth_problem(text, "it", limit)
    assert (problem is not None) == (depth(value) > limit), (text, limit)


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 5_000, 1_000_000])
def test_json_nested_past_the_limit_is_refused_without_recursion(levels: int) -> None:
    for text in ("[" * levels + "]" * levels, '{"a":' * levels + "1" + "}" * levels, "[" * levels):
        with pytest.raises(BorderError, match=f"nested too deeply: more than {MAX_DEPTH} levels"):
            read_json(text, "the reply")
        prose = "Here it is: " + text + " done"
        with pytest.raises(BorderError):
            scan_json_value(prose, prose.index(text[0]), "the reply")


def test_json_nested_to_the_limit_is_read() -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert depth(read_json(text, "it")) == MAX_DEPTH
    assert scan_json_value(text, 0, "it") == len(text)


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"code": "[" * 5000, "more": ["{" * 300, "\\\"[[["]})
    assert read_json(text, "it")["code"] == "[" * 5000
    assert scan_json_value(text, 0, "it") == len(text)


def test_a_text_larger_than_the_limit_is_refused_before_it_is_read() -> None:
    with pytest.raises(BorderError, match="too large: 11 characters, and at most 10 are read") as refused:
        read_json('"abcdefghi"', "the answer", max_chars=10)
    assert refused.value.limit == "size" and refused.value.what == "the answer"
    with pytest.raises(BorderError):
        check_text(b"x" * 11, "it", 10)


def test_a_file_is_refused_by_its_size_before_it_is_read(tmp_path: Any) -> None:
    path = tmp_path / "big.json"
    path.write_text('["' + "x" * 100 + '"]', encoding="utf-8")
    with pytest.raises(BorderError, match="too large: 104 bytes"):
        read_json_file(str(path), "the script", max_chars=20)
    assert read_json_file(str(path), "the script") == ["x" * 100]
    with pytest.raises(OSError):
        read_json_file(str(tmp_path / "missing.json"), "the script")


def test_python_values_are_walked_with_a_stack() -> None:
    deep: Any = []
    for _ in range(200_000):  # far past the interpreter's recursion limit
        deep = [deep]
    with pytest.raises(BorderError, match="the result is nested too deeply"):
        check_value(deep, "the result")
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(BorderError):
        check_value(cycle, "the result")
    mapping: Any = None
    for _ in range(MAX_DEPTH):
        mapping = {"k": mapping}
    check_value(mapping, "the result")  # exactly at the limit: fine
    with pytest.raises(BorderError):
        check_value({"k": mapping}, "the result")
    with pytest.raises(BorderError, match="too large"):
        check_value(["x" * 60] * 10, "the result", max_chars=500)
    with pytest.raises(BorderError, match="too large"):
        check_value([None] * 1000, "the result", max_chars=500)  # items count too
    check_value({"a": (1, 2.5, True, None, b"x", frozenset({1}))}, "the result")


def test_a_pydantic_model_in_a_value_is_walked_too() -> None:
    from pydantic import BaseModel

    class Box(BaseModel):
        inner: Any = None

    box = Box()
    for _ in range(MAX_DEPTH + 5):
        box = Box(inner=box)
    with pytest.raises(BorderError):
        check_value(box, "the result")


def test_lines_over_the_limit_are_skipped_a_chunk_at_a_time() -> None:
    handle = io.StringIO("short\n" + "x" * 50 + "\nlast")
    assert list(read_lines(handle, 10)) == ["short\n", None, "last"]
    handle = io.StringIO("x" * 10 + "\n" + "y" * 11)
    assert list(read_lines(handle, 10)) == ["x" * 10 + "\n", None]


def test_the_scan_never_recurses_even_with_a_low_recursion_limit() -> None:
    old = sys.getrecursionlimit()
    text = "[" * 50_000 + "]" * 50_000
    sys.setrecursionlimit(100)
    try:
        problem = json_depth_problem(text, "it")
        try:
            scan_json_value(text, 0, "it")
        except BorderError as exc:
            deep = exc
    finally:
        sys.setrecursionlimit(old)
    assert problem is not None and deep.limit == "depth"


def test_a_long_string_in_a_reply_is_scanned_in_memory_linear_in_it_with_a_small_factor() -> None:
    """The scan of a value in prose keeps no state per character of a string (Python's re kept about 120
    bytes a character for a pattern of alternatives under a star): its peak stays within a few times the
    text's own size."""
    import subprocess
    import sys

    code = """
import sys
from statewright.runtime.untrusted import scan_json_value
def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
text = 'Here it is: {"notes": "' + "a" * 20_000_000 + '\\\\n", "n": 1} and more prose'
scan_json_value("x {\\"a\\": \\"b\\"}", 2, "warm-up")
before = hwm()
end = scan_json_value(text, text.index("{"), "the reply")
assert end == text.index("} and") + 1, end
print((hwm() - before) / 20_000_000)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 3.0, done.stdout


def test_the_depth_check_of_many_short_strings_stays_within_a_few_times_the_text() -> None:
    """The depth check of JSON made of many short strings (a price table, a list of names) holds no
    object per string: a regex substitution kept one per piece between strings, some seven times the
    text; cutting the strings with bytes operations keeps it within a few times."""
    import subprocess
    import sys

    code = """
import json
from statewright.runtime.untrusted import json_depth_problem
def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
text = json.dumps({f"model-{i}": {"a": "x[", "b": "\\\\\\"{", "c": [1, 2]} for i in range(200_000)})
json_depth_problem('[[["a"]]]', "warm-up", 1)
before = hwm()
assert json_depth_problem(text, "the file", 3) is None and json_depth_problem(text, "the file", 2) is not None
print((hwm() - before) / len(text))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 4.0, done.stdout
