"""Tools that read a parsed or checked machine without changing it: the formatter, graphs, JSON views."""
