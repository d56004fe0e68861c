"""Commands that make files from specs: compile, optimize, design and import."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ..runtime.arguments import count_argument, positive_argument, positive_seconds_argument
from .common import (
    EXIT_INPUT,
    EXIT_OK,
    UsageError,
    add_color_option,
    add_pass_options,
    check_pass_names,
    compile_or_report,
    one_file,
    print_diagnostics,
    progress_listeners,
    safe_text,
    write_err,
    write_out,
)

if TYPE_CHECKING:
    from ..importers import ImportOutcome


def setup_compile(p: argparse.ArgumentParser) -> None:
    p.description = ("Generate a runner: FILE, which carries only its machine, and beside it the runtime package "
                     "statewright_runtime/ it imports (shared by every runner there); with --standalone, one "
                     "file that carries the runtime.")
    p.add_argument("path", metavar="PATH")
    p.add_argument("-o", "--output", metavar="FILE", help="the runner to write (without it, --standalone prints "
                                                          "the runner)")
    p.add_argument("--standalone", action="store_true", help="one file that carries the runtime, instead of a "
                                                             "runner and the runtime package beside it")
    p.add_argument("--runtime", choices=["inline", "module"], default=None,
                   help=argparse.SUPPRESS)  # the older spelling: inline is --standalone, module the default
    p.add_argument("--check", action="store_true", help="exit 1 if FILE (and, unless --standalone, the "
                                                        "statewright_runtime/ beside it) is not what the "
                                                        "spec generates")
    p.add_argument("--force", action="store_true", help="overwrite files statewright did not write")
    add_pass_options(p)
    add_color_option(p)
    p.set_defaults(func=cmd_compile)


def cmd_compile(args: argparse.Namespace) -> int:
    from .. import api

    check_pass_names(args)
    standalone = _compile_standalone(args)
    if args.check and not args.output:
        raise UsageError("--check needs -o FILE: the runner on disk to compare with")
    if not args.output and not standalone:
        raise UsageError(f"without -o FILE, pass --standalone: standard output holds one file, and a runner "
                         f"imports the runtime package {api.RUNTIME_DIR}/ that -o writes beside it")
    if not standalone:
        try:
            api.check_runner_path(args.output)
        except ValueError as e:
            raise UsageError(str(e)) from None
    path = one_file(args.path, "compile")
    comp = compile_or_report(path, args)
    if not comp.ok or comp.source is None:
        return EXIT_INPUT
    name = api.runner_source_name(path, args.output)
    if name != comp.source.path or comp.uses:  # every file named from the runner's folder
        comp = api.check_for_runner(path, args.output)
    text = api.generate_runner(comp, disabled=args.no_pass, level=args.opt_level, standalone=standalone)
    again = f"statewright compile {path} -o {args.output}" + (" --standalone" if standalone else "")
    if args.check:
        return _check_compiled(args.output, text, again, standalone)
    if not args.output:
        sys.stdout.write(text)
        return EXIT_OK
    return _write_compiled(args.output, text, standalone, args.force)


def _compile_standalone(args: argparse.Namespace) -> bool:
    """--standalone, or what the older --runtime says instead (kept for one release, with a warning)."""
    if args.runtime is None:
        return bool(args.standalone)
    if args.standalone and args.runtime == "module":
        raise UsageError("--standalone and --runtime module contradict each other; pass --standalone alone")
    instead = ("--standalone" if args.runtime == "inline" else
               "nothing (a runner and its runtime package is the default)")
    write_err(f"warning: --runtime {args.runtime} is deprecated and goes in the next release: pass {instead}")
    return args.runtime == "inline" or bool(args.standalone)


def _write_compiled(output: str, text: str, standalone: bool, force: bool) -> int:
    """Write the runner and, unless it is standalone, the runtime package beside it: neither when a file
    statewright did not write is in the way of either."""
    from .. import api

    runtime = api.runtime_package_path(output)
    try:
        if standalone:
            api.write_runner(output, text, force=force)
            write_err(f"wrote {output}")
            return EXIT_OK
        api.check_overwrite(output, force=force)
        written = api.write_runtime_package(runtime, force=force)
        api.write_runner(output, text, force=force)
    except api.RunnerOverwriteError as e:
        write_err(f"error: {e}")
        return EXIT_INPUT
    except OSError as e:
        raise UsageError(f"cannot write {e.filename or output}: {e.strerror or e}") from None
    write_err(f"wrote {output} and {runtime}{os.sep}" if written.written else
         f"wrote {output} ({runtime}{os.sep} is up to date)")
    if written.removed:
        write_err(f"removed what an earlier runtime left beside it: {', '.join(written.removed)}")
    if written.left:
        write_err(f"warning: {runtime}{os.sep} holds files statewright did not write, left alone (compile --check "
             f"reports them until they are moved out): {', '.join(written.left)}")
    stale = [r for r in written.stale if r != os.path.basename(output)]
    if stale:
        write_err(f"warning: these runners beside it were generated for another runtime and will not import until "
             f"they are regenerated (statewright compile SPEC -o RUNNER): {', '.join(stale)}")
    return EXIT_OK


def _check_compiled(output: str, text: str, again: str, standalone: bool) -> int:
    """compile --check: whether the runner (and, unless it is standalone, the runtime package beside it)
    is current."""
    from .. import api

    status = EXIT_OK
    if not os.path.exists(output):
        write_err(f"{output} does not exist: run `{again}`")
        status = EXIT_INPUT
    elif api.runner_is_current(output, text):
        write_err(f"{output} is up to date")
    else:
        write_err(f"{output} is out of date: run `{again}`")
        status = EXIT_INPUT
    if not standalone:
        runtime = f"{api.runtime_package_path(output)}{os.sep}"
        state = api.check_runtime_package(runtime)
        if state.current:
            write_err(f"{runtime} is up to date")
        else:
            write_err(f"{runtime} {state.message}: run `{again}`, which rewrites it")
            status = EXIT_INPUT
    return status


def setup_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["metaagent", "autoagent", "crewai"], metavar="FORMAT",
                   help="the input's format: metaagent, autoagent or crewai")
    p.add_argument("path", metavar="PATH", help="the file to import ('-' for standard input); for crewai, the "
                   "project's folder (or its crew.py)")
    p.add_argument("-o", "--output", metavar="OUT", help="where to write the .fsm file (default, or '-': "
                   "standard output); an AutoAgent agent form's other machines go to OUT/NAME.fsm beside it")
    p.add_argument("--repair", action="store_true", help="bound back edges, drop duplicate and self "
                   "listeners and more, each change listed in the header")
    p.add_argument("--bound", type=int, default=None, metavar="N",
                   help="with --repair: the bound put on each back edge (default 2)")
    add_color_option(p)
    p.set_defaults(func=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    if args.bound is not None and not args.repair:
        raise UsageError("--bound needs --repair: a literal import bounds nothing")
    bound = 2 if args.bound is None else args.bound
    if bound < 1:
        raise UsageError(f"--bound must be at least 1, not {bound}")
    if args.format == "crewai":
        outcome, name = _import_project(args, bound), args.path
    else:
        outcome, name = _import_file(args, bound)
    print_diagnostics(outcome.diagnostics, args)
    return _finish_import(args, outcome, name)


def _import_file(args: argparse.Namespace, bound: int) -> tuple[ImportOutcome, str]:
    from .. import api
    from ..grammar.parser import read_limited

    if args.path == "-":
        data, name = read_limited(sys.stdin.buffer), "<stdin>"
    else:
        try:
            with open(args.path, "rb") as f:
                data, name = read_limited(f), args.path
        except OSError as e:
            raise UsageError(f"cannot read {args.path}: {e.strerror or e}") from None
    return api.import_bytes(args.format, data, name, repair=args.repair, bound=bound,
                            output=args.output), name


def _import_project(args: argparse.Namespace, bound: int) -> ImportOutcome:
    """`statewright import crewai PATH`: a project folder, read where it lies."""
    from .. import api
    from ..importers.yaml_source import MissingYamlReader

    if args.path == "-":
        raise UsageError("a CrewAI project is a folder: give its path, not '-'")
    try:
        return api.import_file(args.format, args.path, repair=args.repair, bound=bound, output=args.output)
    except MissingYamlReader as e:
        raise UsageError(str(e)) from None
    except OSError as e:  # the file of the project that could not be read, when the error names one
        raise UsageError(f"cannot read {e.filename or args.path}: {e.strerror or e}") from None


def _finish_import(args: argparse.Namespace, outcome: ImportOutcome, name: str) -> int:
    from .. import api
    from ..diagnostics import render_summary

    if outcome.text is None:
        write_err(f"failed: {name} was not imported ({render_summary(outcome.diagnostics)})")
        return EXIT_INPUT
    output = args.output or "-"
    if output == "-":
        if outcome.files:  # several files, and standard output holds one: say so rather than mix them
            raise UsageError(f"{name} imports as {len(outcome.files) + 1} files (a machine and the machines it "
                             "runs, in a folder beside it), and standard output holds one: give -o OUT.fsm, "
                             "which writes OUT.fsm and OUT/NAME.fsm for each machine it runs")
        sys.stdout.write(outcome.text)
        checked = api.check_text(outcome.text, "<stdout>").diagnostics
        target = "the result"
    else:
        try:
            written = api.write_import(outcome, output)
        except api.ImportOverwriteError as e:
            write_err(f"error: {safe_text(e)}")
            return EXIT_INPUT
        except OSError as e:
            raise UsageError(f"cannot write {e.filename or output}: {e.strerror or e}") from None
        checked = [d for comp in api.check_files(written) for d in comp.diagnostics]
        called = len(written) - 1
        target = (output if not called else f"{output} and the machine it runs" if called == 1 else
                  f"{output} and the {called} machines it runs")
    mode = "repair" if args.repair else "literal"
    notes = render_summary(outcome.diagnostics).replace("no problems", "no notes")
    write_err(f"imported {name} ({mode} mode, {notes}); `statewright check` on {target}: {render_summary(checked)}")
    has_errors = any(d.severity.value == "error" for d in checked)
    return EXIT_INPUT if args.repair and has_errors else EXIT_OK


def _design_progress(args: argparse.Namespace) -> list[object]:
    """The progress of a design session on stderr, each attempt with what it fixed: none with --quiet."""
    if args.quiet:
        return []
    from ..designer.progress import DesignProgress

    return [DesignProgress()]


def setup_design(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", metavar="TASK")
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.add_argument("--model", default=None, help="the designer model (default: $STATEWRIGHT_DESIGNER_MODEL "
                   "or openai/gpt-4o-mini)")
    p.add_argument("--max-repairs", type=count_argument, default=3, metavar="N",
                   help="how many times the designer may repair its source (default 3)")
    p.add_argument("--no-optimize", action="store_true")
    p.add_argument("--trace", metavar="FILE", help="write the designer's calls to a trace file")
    p.add_argument("--script", metavar="FILE", help="answer the designer's calls from a JSON script file "
                                                    "instead of a model (try the designer without a key)")
    p.add_argument("--quiet", action="store_true", help="print no progress while designing")
    p.add_argument("--constrain", choices=["auto", "grammar", "none"], default="auto",
                   help="constrain drafts to the grammar at decoding time: auto (when the model's server is "
                   "known to take a grammar), grammar (always) or none (default auto)")
    p.add_argument("--max-tokens", type=positive_argument, default=None, metavar="N",
                   help="cap each designer reply at N tokens")
    p.add_argument("--reference", choices=["full", "compact"], default="full",
                   help="what the designer reads: full (the guide, the grammar and every example, about "
                   "11,000 tokens; the default) or compact (the guide and one example, about 2,000 tokens, "
                   "for a model with a small context window)")
    p.add_argument("--timeout", type=positive_seconds_argument, default=None, metavar="S",
                   help="seconds each designer call may take, its retries included (default 60): a slow "
                   "local model needs more")
    add_color_option(p)
    p.set_defaults(func=cmd_design)


def cmd_design(args: argparse.Namespace) -> int:
    from .. import api

    system_prompt = None
    if args.reference == "compact":  # for a model with a small context window
        from ..stdlib.reference import compact_designer_system_prompt

        system_prompt = compact_designer_system_prompt()
    try:
        outcome = api.design(args.task, output=args.output, model=args.model, max_repairs=args.max_repairs,
                             optimize=not args.no_optimize, trace_path=args.trace, script=args.script,
                             listeners=_design_progress(args), constrain=args.constrain,
                             max_tokens=args.max_tokens, system_prompt=system_prompt, timeout=args.timeout)
    except api.ScriptFileError as e:
        raise UsageError(str(e)) from None
    lines = outcome.log
    if not args.quiet:  # each attempt's verdict was shown as it happened: the rest of the log is new
        lines = [line for line in lines if not line.startswith("attempt ")]
    for line in lines:
        write_err(line)
    return EXIT_OK if outcome.ok else EXIT_INPUT


def setup_optimize(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH")
    p.add_argument("--llm", required=True, metavar="MODEL")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="apply accepted merges to the file")
    mode.add_argument("--diff", action="store_true", help="print the diff (the default)")
    p.add_argument("--trace", metavar="FILE")
    p.add_argument("--script", metavar="FILE", help="answer the judge's calls from a JSON script file")
    p.add_argument("--quiet", action="store_true", help="print no progress while judging")
    add_color_option(p)
    p.set_defaults(func=cmd_optimize)


def cmd_optimize(args: argparse.Namespace) -> int:
    from .. import api

    comp = compile_or_report(one_file(args.path, "optimize"), args)
    if not comp.ok:
        return EXIT_INPUT
    try:
        report = api.optimize_with_llm(comp, model=args.llm, write=args.write, trace_path=args.trace,
                                       script=args.script, listeners=progress_listeners(args))
    except api.ScriptFileError as e:
        raise UsageError(str(e)) from None
    for line in report.log:
        write_err(line)
    if report.diff and not args.write:
        write_out(report.diff)
    return EXIT_OK if report.ok else EXIT_INPUT
