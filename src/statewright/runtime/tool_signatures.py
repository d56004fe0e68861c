"""What the standard tools take and return — plain data, read by the compiler's checks and the runtime.

Types are written in the language's own notation ("str", "int", "list[str]", "float?").
"""

from __future__ import annotations

from typing import Any

# The options of a tool whose code runs in the jail (std.python, std.shell), the one table of them:
# name -> (type, the default the runtime uses, what it limits).
_SANDBOX_OPTIONS: dict[str, tuple[str, Any, str]] = {
    "timeout": ("float", 30.0, "default wall-clock seconds per call"),
    "memory_mb": ("int", 512, "address-space limit of each process (RLIMIT_AS)"),
    "max_output": ("int", 1_000_000, "bytes kept of stdout and of stderr each; more kills the process"),
    "max_timeout": ("float", 300.0, "largest timeout a call may ask for"),
    "max_file_mb": ("int", 64, "largest file a process may write (RLIMIT_FSIZE)"),
    "max_processes": ("int", 64, "processes/threads the call may start (RLIMIT_NPROC)"),
    "tmp_mb": ("int", 64, "size of the jail's private /tmp, in MiB"),
    "network": ("bool", False, "whether code in the jail may use the network (the host's, loopback included)"),
}


def _sandboxed(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool that runs code in the jail: its own entries, and the options of the jail."""
    return {**tool,
            "options": {name: kind for name, (kind, _, _) in _SANDBOX_OPTIONS.items()},
            "option_defaults": {name: default for name, (_, default, _) in _SANDBOX_OPTIONS.items()},
            "option_docs": {name: doc for name, (_, _, doc) in _SANDBOX_OPTIONS.items()}}


# name -> {"params": {param: (type, required)}, "returns": type or {field: type}, "options": {opt: type},
#          "enabled_by_default": bool, "doc": str,
#          "param_docs": {param: str}, "option_defaults": {opt: value}, "option_docs": {opt: str}}
# "option_defaults" are what the runtime uses when a machine leaves an option out.
STD_TOOLS: dict[str, dict[str, Any]] = {
    "std.python": _sandboxed({
        "doc": "Run Python code in a subprocess in the run's workspace; returns exit code and output.",
        "params": {"code": ("str", True), "timeout": ("float", False)},
        "returns": {"exit_code": "int", "stdout": "str", "stderr": "str", "timed_out": "bool"},
        "enabled_by_default": True,
        "param_docs": {
            "code": "Python source to run as a script; print what you want to see.",
            "timeout": "Seconds before the process is killed (capped by the tool's max_timeout option).",
        },
    }),
    "std.read_file": {
        "doc": "Read a text file inside the run's workspace.",
        "params": {"path": ("str", True)},
        "returns": "str",
        "options": {"max_bytes": "int"},
        "enabled_by_default": True,
        "param_docs": {"path": "File path relative to the workspace, e.g. 'notes/todo.txt'."},
        "option_defaults": {"max_bytes": 1_000_000},
        "option_docs": {"max_bytes": "largest file that can be read"},
    },
    "std.write_file": {
        "doc": "Write a text file inside the run's workspace, creating directories as needed.",
        "params": {"path": ("str", True), "content": ("str", True)},
        "returns": "str",
        "options": {"max_bytes": "int"},
        "enabled_by_default": True,
        "param_docs": {
            "path": "File path relative to the workspace, e.g. 'src/app.py'.",
            "content": "The complete new text of the file.",
        },
        "option_defaults": {"max_bytes": 1_000_000},
        "option_docs": {"max_bytes": "largest content that can be written"},
    },
    "std.list_files": {
        "doc": "List the files under a directory of the run's workspace.",
        "params": {"path": ("str", False)},
        "returns": "list[str]",
        "options": {"max_files": "int"},
        "enabled_by_default": True,
        "param_docs": {"path": "Directory relative to the workspace; the whole workspace when omitted."},
        "option_defaults": {"max_files": 1000},
        "option_docs": {"max_files": "most paths returned"},
    },
    "std.shell": _sandboxed({
        "doc": "Run a shell command in the run's workspace. Off unless the machine declares `tool std.shell`.",
        "params": {"command": ("str", True), "timeout": ("float", False)},
        "returns": {"exit_code": "int", "stdout": "str", "stderr": "str", "timed_out": "bool"},
        "enabled_by_default": False,
        "param_docs": {
            "command": "A /bin/sh command line, run in the workspace.",
            "timeout": "Seconds before the command is killed (capped by the tool's max_timeout option).",
        },
    }),
    "std.http_get": {
        "doc": "Fetch a URL with GET. Off unless declared; only hosts in the `allow` option are reachable.",
        "params": {"url": ("str", True)},
        "returns": {"status": "int", "body": "str"},
        "options": {"allow": "list[str]", "timeout": "float", "max_bytes": "int"},
        "enabled_by_default": False,
        "param_docs": {"url": "An http:// or https:// URL on an allowed host."},
        "option_defaults": {"allow": [], "timeout": 15.0, "max_bytes": 1_000_000},
        "option_docs": {
            "allow": "hostnames that may be fetched; '*.example.com' also allows subdomains",
            "timeout": "seconds the whole request may take (connecting, redirects and the body included)",
            "max_bytes": "bytes of the body kept",
        },
    },
}
