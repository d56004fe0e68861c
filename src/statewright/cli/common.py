"""What every command shares: output and colour, diagnostics, exit codes, spec files and argument types."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..api import Compilation
    from ..diagnostics import Diagnostic


EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3




class UsageError(Exception):
    """A problem with how the command was called (exit 2)."""


def write_out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def write_err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def safe_text(text: object) -> str:
    """An error's text for the terminal: what it quotes (a run id, a name a checkpoint or an imported file
    holds, a path) may carry escape sequences, shown escaped, never obeyed."""
    from ..runtime.trace import printable

    return printable(text)


def use_color(choice: str, stream: IO[str]) -> bool:
    """Whether to colour what goes to `stream`: `--color always|never` decides; with `auto` (the default),
    NO_COLOR (set and not empty) turns colour off, FORCE_COLOR (set, not empty and not 0) turns it on, and
    otherwise a terminal that is not TERM=dumb gets colour and a pipe or a file does not."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def color_for(args: argparse.Namespace, stream: IO[str]) -> bool:
    return use_color(getattr(args, "color", "auto"), stream)


def print_diagnostics(diags: Sequence[Diagnostic], args: argparse.Namespace, *, to_stdout: bool = False) -> None:
    from ..diagnostics import render_text

    stream = sys.stdout if to_stdout else sys.stderr
    color = color_for(args, stream)
    for d in diags:
        stream.write(render_text(d, color=color) + "\n\n")


def report_internal_error(e: BaseException) -> None:
    import traceback

    write_err(f"statewright: internal error: {type(e).__name__}: {safe_text(e)}")
    write_err("This is a bug in statewright. Please report it, with the input file and this message.")
    if os.environ.get("STATEWRIGHT_DEBUG"):
        write_err("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip())
    else:
        write_err("(set STATEWRIGHT_DEBUG=1 to include the Python traceback in the report)")


def check_pass_names(args: argparse.Namespace) -> None:
    from ..compiler.passes import PASSES

    known = [p.name for p in PASSES]
    for name in getattr(args, "no_pass", ()):
        if name not in known:
            raise UsageError(f"unknown pass {name!r}; the passes are: {', '.join(known)}")


def one_file(path: str, command: str) -> str:
    """The PATH of a command that reads one spec: a directory is a usage error that names its specs."""
    if not os.path.isdir(path):
        return path
    from .. import api

    found = api.spec_files([path]).files
    if not found:
        raise UsageError(f"{command} reads one .fsm file; {path} is a directory with no .fsm files in it")
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise UsageError(f"{command} reads one .fsm file; {path} is a directory (with {shown}): name one of them")


def compile_or_report(path: str, args: argparse.Namespace, project: Any = None,
                       shown: set[int] | None = None) -> Compilation:
    """Check a file; print its diagnostics, and those of the files it uses, to stderr; return the
    Compilation (ir None on errors). A command that reads several files checks them in one `project`
    and prints each file's diagnostics once (`shown` holds the files printed)."""
    from .. import api

    comp = api.check_path(path, project)
    shown = shown if shown is not None else set()
    for unit in (comp, *api.used_compilations(comp)):
        if id(unit) not in shown:
            shown.add(id(unit))
            print_diagnostics(unit.diagnostics, args)
    return comp


def spec_files(args: argparse.Namespace) -> tuple[list[str], list[Diagnostic]]:
    """The files PATH... stands for (directories expanded) and SW1022 for directories that cannot be read."""
    from .. import api
    from ..spec_paths import ExcludePatternError, unreadable_file

    try:
        found = api.spec_files(args.paths, args.exclude)
    except ExcludePatternError as e:
        raise UsageError(str(e)) from None
    for directory in found.empty_directories:
        write_err(f"statewright: warning: no .fsm files under {directory}")
    return found.files, [unreadable_file(path, e) for path, e in found.unreadable]


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"




def temporal_call(call: Callable[[str], int], address: str) -> int:
    """Run `call(HOST:PORT)`, with Temporal's missing package or unreachable service as one clear line."""
    from ..runtime.temporal import TemporalRunError, TemporalUnavailable, temporal_address

    try:
        address = temporal_address(address)
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        return call(address)
    except TemporalUnavailable as e:
        raise UsageError(str(e)) from None
    except TemporalRunError as e:
        write_err(f"statewright: error: {safe_text(e)}")
        return EXIT_INPUT


def progress_listeners(args: argparse.Namespace) -> list[object]:
    """The listeners that show a command's progress on stderr: none with --quiet."""
    if getattr(args, "quiet", False):
        return []
    from ..runtime.progress import Progress

    return [Progress()]




def add_pass_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-O0", dest="opt_level", action="store_const", const=0, default=1,
                   help="turn off every optimization pass")
    p.add_argument("--no-pass", action="append", default=[], metavar="NAME",
                   help="turn off one optimization pass (repeatable)")


def add_color_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="colour diagnostics and summaries: on a terminal (auto, the default; NO_COLOR and "
                        "FORCE_COLOR are honoured), always or never")


def add_paths(p: argparse.ArgumentParser, nargs: str, help: str) -> None:
    p.add_argument("paths", nargs=nargs, metavar="PATH", help=help)
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="skip files and directories found under a directory PATH that match this "
                        ".gitignore-style pattern (repeatable)")


OTEL_HELP = ("send the runs' spans and metrics (OpenTelemetry, GenAI conventions) where the OTEL_* environment "
              "says; on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set; needs statewright[otel] "
              "(docs/observability.md)")


def add_temporal_options(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--temporal", metavar="HOST:PORT", required=required,
                   help="the Temporal service" + ("" if required else " to run on (instead of in this process)")
                        + "; needs the statewright[temporal] extra (docs/temporal.md)")
    p.add_argument("--task-queue", metavar="QUEUE",
                   help="the Temporal task queue (default: one per machine and source version)")
    p.add_argument("--namespace", metavar="NS", default="default", help="the Temporal namespace (default)")


def add_run_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID", help="the run's id (its workflow id)")
    p.add_argument("--temporal", metavar="HOST:PORT", required=True, help="the Temporal service")
    p.add_argument("--namespace", metavar="NS", default="default", help="the Temporal namespace (default)")
