"""`statewright explain CODE`: the long form of every registered diagnostic code."""

from __future__ import annotations

import pytest

from statewright.diagnostics import CODES
from statewright.diagnostics.explain import all_codes, explain


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_explains_itself_with_title_severity_and_explanation(code: str) -> None:
    info = CODES[code]
    text = explain(code)
    assert text is not None
    assert text.startswith(f"{code}: {info.title} ({info.severity.value})\n")
    assert " ".join(info.explanation.split()) in " ".join(text.split())


def test_examples_are_shown_wrong_first_then_right() -> None:
    text = explain("SW2002")
    assert text is not None
    wrong, right = text.index("Wrong:"), text.index("Right:")
    assert wrong < right
    assert "    -> reviw" in text[wrong:right] and "    -> review" in text[right:]


def test_codes_that_user_input_can_cause_have_a_wrong_and_a_right_example() -> None:
    without = [i.code for i in all_codes() if not (i.wrong and i.right)]
    assert without == ["SW1021", "SW9001"]  # a 16 MB file and a compiler bug have no one-line example


def test_lookup_ignores_case_and_surrounding_space_and_unknown_codes_have_none() -> None:
    assert explain(" sw2002 ") == explain("SW2002")
    assert explain("SW0000") is None


def test_all_codes_lists_the_registry_in_code_order() -> None:
    codes = [i.code for i in all_codes()]
    assert codes == sorted(CODES) and len(codes) == len(CODES)
