"""Argument types of the command line, shared by `statewright` and every generated runner.

Each is an argparse `type=`: it turns the text into its value or raises ArgumentTypeError with what was
expected. This module imports nothing but argparse, so the `statewright` command reads its arguments
without loading the rest of the runtime.
"""

from __future__ import annotations

import argparse
import math


def count_argument(text: str) -> int:
    """A whole number, zero or more (`--retries 0`)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected zero or more, got {value}")
    return value


def positive_argument(text: str) -> int:
    """A whole number, one or more (`--concurrency 8`)."""
    value = count_argument(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected one or more, got {value}")
    return value


def seconds_argument(text: str) -> float:
    """A finite number of seconds, zero or more (`--retry-delay 0`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, zero or more, got {text}")
    return value


def positive_seconds_argument(text: str) -> float:
    """A finite number of seconds, more than zero (`--timeout 30`: a call given no time cannot be made)."""
    value = seconds_argument(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds more than 0, got {text}")
    return value
