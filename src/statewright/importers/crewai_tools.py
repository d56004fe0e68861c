"""CrewAI's tools as statewright tools: the standard tools where one does the same job, stand-ins elsewhere."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Diagnostics, Span
from .model import Machine, Tool
from .names import Namespace

STAND_IN_MODULE = "statewright.importers.stand_ins"

# crewai_tools classes that do what a standard tool does
STANDARD_TOOLS = {
    "FileReadTool": "std.read_file",
    "FileWriterTool": "std.write_file",
    "DirectoryReadTool": "std.list_files",
    "CodeInterpreterTool": "std.python",
}
# web search tools: the search stand-in, which names the query it was asked
SEARCH_TOOLS = frozenset({
    "SerperDevTool", "SerpApiGoogleSearchTool", "SerplyWebSearchTool", "EXASearchTool", "BraveSearchTool",
    "TavilySearchTool", "DuckDuckGoSearchRun", "DuckDuckGoSearchTool", "LinkupSearchTool", "WebsiteSearchTool",
})


@dataclass
class ToolMapper:
    """Declares each tool once in the machine and hands out the name agents list it by."""

    machine: Machine
    diags: Diagnostics
    names: Namespace = field(default_factory=Namespace)
    declared: dict[str, str] = field(default_factory=dict)  # CrewAI name -> statewright name
    custom: set[str] = field(default_factory=set)  # the crew's own @tool functions

    def map(self, tool: str, span: Span) -> str:
        if tool in STANDARD_TOOLS:
            return STANDARD_TOOLS[tool]
        if tool in self.declared:
            return self.declared[tool]
        own = tool in self.custom
        if tool not in SEARCH_TOOLS:
            what = "the crew's own tool" if own else "a tool with no statewright counterpart"
            self.diags.report("SW8112", f"tool '{tool}' is {what}", span, label="declared with a stand-in",
                              help="the imported machine declares it with a stand-in: point its import path at "
                                   "your own function")
        name = self.names.claim(tool.removesuffix("Tool") if tool.endswith("Tool") and tool != "Tool" else tool,
                                "tool")
        self.declared[tool] = name
        function = "search_engine" if tool in SEARCH_TOOLS else "unavailable_tool"
        path = f"{STAND_IN_MODULE}:{function}"
        what = f"The crew's own tool {tool}" if own else f"CrewAI's {tool}"
        comments = [(f"{what} has no standard counterpart: this stand-in answers that it is not configured. "
                     "Point the import path at your own function.")]
        if tool in SEARCH_TOOLS:
            comments.append("A search API key goes in `secrets [NAME]`; the function gets it in `secrets`.")
        self.machine.tools.append(Tool(name, path, comments=comments))
        return name

