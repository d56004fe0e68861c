"""What the standard tools take and return — plain data, read by the compiler's checks and the runtime.

Types are written in the language's own notation ("str", "int", "list[str]", "float?").
"""

from __future__ import annotations

from typing import Any

# name -> {"params": {param: (type, required)}, "returns": type or {field: type}, "options": {opt: type},
#          "enabled_by_default": bool, "doc": str,
#          "param_docs": {param: str}, "option_defaults": {opt: value}, "option_docs": {opt: str}}
# "option_defaults" are what the runtime uses when a machine leaves an option out.
STD_TOOLS: dict[str, dict[str, Any]] = {
    "std.python": {
        "doc": "Run Python code in a subprocess in the run's workspace; returns exit code and output.",
        "params": {"code": ("str", True), "timeout": ("float", False)},
        "returns": {"exit_code": "int", "stdout": "str", "stderr": "str", "timed_out": "bool"},
        "options": {"timeout": "float", "memory_mb": "int", "max_output": "int", "max_timeout": "float",
                    "max_file_mb": "int", "max_processes": "int", "tmp_mb": "int", "network": "bool"},
        "enabled_by_default": True,
        "param_docs": {
            "code": "Python source to run as a script; print what you want to see.",
            "timeout": "Seconds before the process is killed (capped by the tool's max_timeout option).",
        },
        "option_defaults": {"timeout": 30.0, "max_timeout": 300.0, "memory_mb": 512, "max_output": 1_000_000,
                            "max_file_mb": 64, "max_processes": 64, "tmp_mb": 64, "network": False},
        "option_docs": {
            "timeout": "default wall-clock seconds per call",
            "max_timeout": "largest timeout a call may ask for",
            "memory_mb": "address-space limit of the process (RLIMIT_AS)",
            "max_output": "bytes kept of stdout and of stderr each; more kills the process",
            "max_file_mb": "largest file the process may write (RLIMIT_FSIZE)",
            "max_processes": "processes/threads the call may start (RLIMIT_NPROC)",
            "tmp_mb": "size of the jail's private /tmp, in MiB",
            "network": "whether code in the jail may use the network (the host's, loopback included)",
        },
    },
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
    "std.shell": {
        "doc": "Run a shell command in the run's workspace. Off unless the machine declares `tool std.shell`.",
        "params": {"command": ("str", True), "timeout": ("float", False)},
        "returns": {"exit_code": "int", "stdout": "str", "stderr": "str", "timed_out": "bool"},
        "options": {"timeout": "float", "memory_mb": "int", "max_output": "int", "max_timeout": "float",
                    "max_file_mb": "int", "max_processes": "int", "tmp_mb": "int", "network": "bool"},
        "enabled_by_default": False,
        "param_docs": {
            "command": "A /bin/sh command line, run in the workspace.",
            "timeout": "Seconds before the command is killed (capped by the tool's max_timeout option).",
        },
        "option_defaults": {"timeout": 30.0, "max_timeout": 300.0, "memory_mb": 512, "max_output": 1_000_000,
                            "max_file_mb": 64, "max_processes": 64, "tmp_mb": 64, "network": False},
        "option_docs": {
            "timeout": "default wall-clock seconds per call",
            "max_timeout": "largest timeout a call may ask for",
            "memory_mb": "address-space limit of each process (RLIMIT_AS)",
            "max_output": "bytes kept of stdout and of stderr each; more kills the command",
            "max_file_mb": "largest file the command may write (RLIMIT_FSIZE)",
            "max_processes": "processes/threads the call may start (RLIMIT_NPROC)",
            "tmp_mb": "size of the jail's private /tmp, in MiB",
            "network": "whether code in the jail may use the network (the host's, loopback included)",
        },
    },
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
