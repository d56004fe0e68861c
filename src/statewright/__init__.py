"""statewright: a declarative language and compiler for multi-agent LLM systems shaped as finite-state machines."""

__version__ = "0.1.0"
