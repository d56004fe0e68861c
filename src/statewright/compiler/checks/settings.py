"""Settings checks: limits, memory policies and temperatures hold values the runtime accepts.

Each setting is checked once, here, where it is first read; lowering (lower.py) then reads the same
settings without checking them again, and only runs when no error was reported.
"""

from __future__ import annotations

from ...diagnostics import Diagnostics, did_you_mean
from ...grammar import ast
from .. import ir
from .resolve import LIMIT_NAMES, AgentView, Symbols

MEMORY_POLICIES = ("all", "none", "last")
TEMPERATURE_RANGE = (0.0, 2.0)


def check_settings(machine: ast.Machine, symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Report unknown or repeated limits and memory policies (SW2010, SW2011) and values out of range
    (SW3015) in the machine's settings and its agents'."""
    mv = symbols.machine
    _temperature(mv.temperature, f"machine '{machine.name.value}'", diagnostics)
    if mv.limits is not None:
        _limits(mv.limits, diagnostics)
    for name, view in symbols.agents.items():
        _memory(view, diagnostics)
        _temperature(view.temperature, f"agent '{name}'", diagnostics)


def _temperature(setting: ast.TemperatureSetting | None, owner: str, diags: Diagnostics) -> None:
    if setting is None:
        return
    low, high = TEMPERATURE_RANGE
    if not low <= float(setting.value.value) <= high:
        diags.report("SW3015", f"temperature {setting.value.span.text} of {owner} is out of range",
                     setting.value.span, label="must be between 0 and 2",
                     help="0 is the most deterministic; most models accept up to 2")


def _limits(limits: ast.Limits, diags: Diagnostics) -> None:
    seen: set[str] = set()
    for item in limits.items:
        key = item.name.value
        if key not in LIMIT_NAMES:
            diags.report("SW2011", f"unknown limit '{key}'", item.name.span, label="not a limit",
                         help=did_you_mean(key, LIMIT_NAMES) or "the limits are " + ", ".join(LIMIT_NAMES))
            continue
        if key in seen:
            diags.report("SW2010", f"limit '{key}' is given twice", item.name.span,
                         label="second occurrence", help=f"keep one '{key}'; the first one is used")
            continue
        seen.add(key)
        number = item.value.value
        if key in ("steps", "tokens") and not isinstance(number, int):
            diags.report("SW3015", f"limit '{key}' takes a whole number", item.value.span,
                         label="not a whole number", help=f"write e.g. '{key} {max(1, int(number))}'")
        elif number <= 0:
            diags.report("SW3015", f"limit '{key}' must be above 0", item.value.span,
                         label="a limit of 0 stops every run before it starts",
                         help=f"leave '{key}' out for no limit" if key != "steps"
                         else f"leave 'steps' out for the default of {ir.DEFAULT_STEP_LIMIT}")


def _memory(view: AgentView, diags: Diagnostics) -> None:
    setting = view.memory
    if setting is None:
        return
    policy = setting.policy.value
    owner = f"agent '{view.decl.name.value}'"
    if policy not in MEMORY_POLICIES:
        diags.report("SW2011", f"unknown memory policy '{policy}' in {owner}", setting.policy.span,
                     label="not a memory policy",
                     help=did_you_mean(policy, MEMORY_POLICIES)
                     or "write 'memory all', 'memory none' or 'memory last N'")
        return
    count = setting.count
    if policy == "last":
        if count is None:
            diags.report("SW2011", f"'memory last' in {owner} needs a count", setting.policy.span,
                         label="how many messages?", help="write 'memory last N', e.g. 'memory last 6'")
        elif int(count.value) < 1:
            diags.report("SW3015", f"'memory last {count.value}' in {owner} keeps nothing", count.span,
                         label="must be at least 1", help="write 'memory none' to keep no messages")
        return
    if count is not None:
        diags.report("SW2011", f"'memory {policy}' takes no count", count.span, label="unexpected count",
                     help=f"write 'memory {policy}', or 'memory last {count.value}' to keep the most recent "
                          "messages")
