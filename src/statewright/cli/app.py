"""The command line: its commands, its parser, and the `statewright` program."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .. import __version__
from .common import EXIT_INTERNAL, EXIT_USAGE, UsageError, report_internal_error, safe_text, write_err
from .making import setup_compile, setup_design, setup_import, setup_optimize
from .reading import (
    setup_check,
    setup_dump,
    setup_explain,
    setup_fmt,
    setup_grammar,
    setup_graph,
    setup_lsp,
    setup_source_map,
)
from .running import setup_batch, setup_resume, setup_run, setup_status, setup_test, setup_trace, setup_worker

# name -> (one-line help, what declares its arguments)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "check": ("check .fsm files and report every problem", setup_check),
    "explain": ("explain a diagnostic code, with a wrong and a right example", setup_explain),
    "dump": ("print the syntax tree, the IR or the optimized IR as JSON", setup_dump),
    "fmt": ("format .fsm files in the one canonical layout", setup_fmt),
    "graph": ("draw the machine as a Mermaid or Graphviz graph", setup_graph),
    "compile": ("generate a Python runner (with the runtime package beside it, or --standalone)", setup_compile),
    "run": ("run a machine (options as for a generated runner; see --help after PATH)", setup_run),
    "batch": ("run a machine over many inputs concurrently (options: batch PATH --help)", setup_batch),
    "resume": ("continue a checkpointed run: answer a person, or go on after a crash", setup_resume),
    "test": ("run the test blocks of .fsm files with scripted replies", setup_test),
    "worker": ("serve machines' runs from a Temporal cluster", setup_worker),
    "status": ("show what a run on a Temporal cluster is doing", setup_status),
    "import": ("import a MetaAgent FSM (JSON), an AutoAgent workflow or agent form (XML) or a CrewAI project",
               setup_import),
    "trace": ("read trace files", setup_trace),
    "design": ("draft a machine from a task description with a designer model", setup_design),
    "grammar": ("print the grammar as a decoding constraint (GBNF or Lark)", setup_grammar),
    "optimize": ("propose LLM-judged state merges as a reviewable source diff", setup_optimize),
    "source-map": ("map a line of a generated runner back to its .fsm position", setup_source_map),
    "lsp": ("serve the language server over stdin and stdout, for editors", setup_lsp),
}


# Commands that only read specs and write whole files: see console_main.
SHORT_LIVED = frozenset({"check", "explain", "dump", "fmt", "graph", "compile", "source-map"})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With `only`, the name of a command, that command alone is declared:
    argparse is slow to declare eleven commands and forty options, and only one of them runs. (An unknown
    name declares every command, without their options, for the error message that lists them.)"""
    parser = argparse.ArgumentParser(
        prog="statewright",
        description="Compile and run multi-agent LLM systems written as finite-state machines.",
    )
    parser.add_argument("--version", action="version", version=f"statewright {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (summary, declare) in COMMANDS.items():
        if only in COMMANDS and name != only:
            continue
        p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
        if only is None or only == name:
            declare(p)
    return parser


def command_name(argv: Sequence[str]) -> str | None:
    """The command an argument list names: its first word that is not an option (the program's own
    options take no values)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=command_name(args_list))
    try:
        args = parser.parse_args(args_list)
    except SystemExit as e:  # argparse: --help/--version exit 0, usage errors exit 2
        return int(e.code or 0)
    try:
        return int(args.func(args))
    except UsageError as e:
        write_err(f"statewright: error: {safe_text(e)}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        write_err("interrupted")
        return 130
    except BrokenPipeError:
        from ..runtime.runner_cli import stdout_gone

        return stdout_gone()
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a bare traceback
        report_internal_error(e)
        return EXIT_INTERNAL


def console_main() -> NoReturn:
    """The `statewright` program: the console script and `python -m statewright` call this.

    The commands that only read specs and write whole files (SHORT_LIVED) run with the cyclic garbage
    collector off, and end by flushing their output and leaving without tearing the interpreter down:
    collecting while modules load, collecting again at exit and unloading every module cost about a fifth
    of `statewright check`'s time, for nothing (mypy ends the same way, for the same reason). Every file
    such a command writes is closed before it returns; the other commands end normally."""
    quick = command_name(sys.argv[1:]) in SHORT_LIVED
    if quick:
        import gc

        gc.disable()
    status = main()
    if "temporalio" in sys.modules:  # see runner_options.leave_after_temporal
        from ..runtime.runner_options import leave_after_temporal

        leave_after_temporal(status)
    if quick:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe (`| head`): what was not read is not wanted
                pass
        os._exit(status)
    sys.exit(status)
