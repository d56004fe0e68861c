"""Argument types of the command line, shared by `statewright` and every generated runner.

Each is an argparse `type=`: it turns the text into its value or raises ArgumentTypeError with what was
expected; and an option both share (`durability_option`). This module imports nothing but argparse, so the `statewright` command reads its arguments
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


def durability_option(parser: argparse.ArgumentParser) -> None:
    """`--durability call|segment|task`: how a run on Temporal records its calls (docs/temporal.md)."""
    parser.add_argument("--durability", choices=("call", "task", "segment"), default="call",
                        metavar="call|segment|task",
                        help="with --temporal: record every model and tool call in the run's history before "
                             "it goes on (call, the default: a killed worker makes no completed call again); "
                             "the same promise with the calls made one after another in one activity, each "
                             "recorded by its heartbeat (segment: several times faster); or with the "
                             "workflow task that made it (task: local activities; a worker killed before its "
                             "task completes makes that task's calls again)")
