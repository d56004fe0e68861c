"""The designer: a task description in, a checked, tested, formatted `.fsm` out."""

from .design import DesignError, DesignOutcome, design, extract_source, repair_request

__all__ = ["DesignError", "DesignOutcome", "design", "extract_source", "repair_request"]
