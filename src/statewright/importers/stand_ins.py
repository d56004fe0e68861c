"""Stand-in tools for imported machines: the tools an original names that statewright has no match for.

An imported machine declares such a tool as a user tool pointing here, so that it checks, tests and runs
at once; the header of the file says to point the import path at a real function. A stand-in does nothing
but tell the model that the tool is not configured.
"""

from __future__ import annotations


def search_engine(query: str) -> str:
    """Search the web for a query and return what was found.

    Args:
        query: what to search for
    """
    return (f"No search engine is configured for this machine, so nothing was searched for {query!r}. "
            "Carry on with what you know.")


def unavailable_tool(request: str) -> str:
    """A tool of the original system that is not configured for this machine.

    Args:
        request: what the tool was asked to do
    """
    return f"This tool is not configured for this machine, so {request!r} was not carried out."
