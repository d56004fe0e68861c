"""What the standard tools take and return — plain data, read by the compiler's checks and the runtime.

Types are written in the language's own notation ("str", "int", "list[str]", "float?").
"""

from __future__ import annotations

from typing import Any

# name -> {"params": {param: (type, required)}, "returns": type or {field: type}, "options": {opt: type},
#          "enabled_by_default": bool, "doc": str}
STD_TOOLS: dict[str, dict[str, Any]] = {
    "std.python": {
        "doc": "Run Python code in a subprocess in the run's workspace; returns exit code and output.",
        "params": {"code": ("str", True), "timeout": ("float", False)},
        "returns": {"exit_code": "int", "stdout": "str", "stderr": "str", "timed_out": "bool"},
        "options": {"timeout": "float", "memory_mb": "int", "max_output": "int"},
        "enabled_by_default": True,
    },
    "std.read_file": {
        "doc": "Read a text file inside the run's workspace.",
        "params": {"path": ("str", True)},
        "returns": "str",
        "options": {"max_bytes": "int"},
        "enabled_by_default": True,
    },
    "std.write_file": {
        "doc": "Write a text file inside the run's workspace, creating directories as needed.",
        "params": {"path": ("str", True), "content": ("str", True)},
        "returns": "str",
        "options": {"max_bytes": "int"},
        "enabled_by_default": True,
    },
    "std.list_files": {
        "doc": "List the files under a directory of the run's workspace.",
        "params": {"path": ("str", False)},
        "returns": "list[str]",
        "options": {},
        "enabled_by_default": True,
    },
    "std.shell": {
        "doc": "Run a shell command in the run's workspace. Off unless the machine declares `tool std.shell`.",
        "params": {"command": ("str", True), "timeout": ("float", False)},
        "returns": {"exit_code": "int", "stdout": "str", "stderr": "str", "timed_out": "bool"},
        "options": {"timeout": "float", "memory_mb": "int", "max_output": "int"},
        "enabled_by_default": False,
    },
    "std.http_get": {
        "doc": "Fetch a URL with GET. Off unless declared; only hosts in the `allow` option are reachable.",
        "params": {"url": ("str", True)},
        "returns": {"status": "int", "body": "str"},
        "options": {"allow": "list[str]", "timeout": "float", "max_bytes": "int"},
        "enabled_by_default": False,
    },
}
