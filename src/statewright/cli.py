"""The `statewright` command: a thin shell over api.py.

Exit codes, for every command: 0 ok, 1 the input has errors (or a run / test failed), 2 usage error,
3 internal error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__

if TYPE_CHECKING:
    from .api import Compilation
    from .diagnostics import Diagnostic

EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A problem with how the command was called (exit 2)."""


# ---- output helpers ------------------------------------------------------------------------------


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def _print_diagnostics(diags: Sequence[Diagnostic], *, stream: object = None) -> None:
    from .diagnostics import render_text

    write = _err if stream is None else _out
    for d in diags:
        write(render_text(d) + "\n")


def _check_pass_names(args: argparse.Namespace) -> None:
    from .compiler.passes import PASSES

    known = [p.name for p in PASSES]
    for name in getattr(args, "no_pass", ()):
        if name not in known:
            raise UsageError(f"unknown pass {name!r}; the passes are: {', '.join(known)}")


def _compile_or_report(path: str) -> Compilation:
    """Check a file; print its diagnostics to stderr; return the Compilation (ir None on errors)."""
    from . import api

    try:
        comp = api.check_file(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    _print_diagnostics(comp.diagnostics)
    return comp


# ---- commands ------------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from . import api
    from .diagnostics import render_json, render_summary, render_text

    all_diags = []
    for path in args.paths:
        try:
            comp = api.check_file(path)
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
        all_diags.extend(comp.diagnostics)
    if args.format == "json":
        _out(render_json(all_diags))
    else:
        for d in all_diags:
            _out(render_text(d) + "\n")
        errors = sum(1 for d in all_diags if d.severity.value == "error")
        files = len(args.paths)
        summary = render_summary(all_diags)
        _err(f"{'ok' if not errors else 'failed'}: {files} file{'s' if files != 1 else ''} checked, {summary}")
    return EXIT_INPUT if any(d.severity.value == "error" for d in all_diags) else EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from .diagnostics.explain import explain

    code = args.code.upper()
    if not code.startswith("SW"):
        code = "SW" + code
    text = explain(code)
    if text is None:
        raise UsageError(f"unknown diagnostic code {args.code!r}; codes look like SW2002")
    _out(text)
    return EXIT_OK


def cmd_dump(args: argparse.Namespace) -> int:
    from . import api

    _check_pass_names(args)
    if args.stage == "ast":  # the syntax tree needs a file that parses, not one that checks
        try:
            parsed = api.parse_file(args.path)
        except OSError as e:
            raise UsageError(f"cannot read {args.path}: {e.strerror or e}") from None
        _print_diagnostics(parsed.diagnostics.sorted())
        if parsed.machine is None:
            return EXIT_INPUT
        _out(json.dumps(api.dump_ast(parsed), indent=2, ensure_ascii=False))
        return EXIT_OK
    comp = _compile_or_report(args.path)
    if not comp.ok:
        return EXIT_INPUT
    log: list[str] = []
    data = api.dump_ir(comp, optimized=args.stage == "optimized", disabled=args.no_pass,
                       level=args.opt_level, log=log)
    for line in log:
        _err(f"pass {line}")
    _out(json.dumps(data, indent=2, ensure_ascii=False))
    return EXIT_OK


def cmd_fmt(args: argparse.Namespace) -> int:
    from . import api

    paths = args.paths or ["-"]
    status = EXIT_OK
    for path in paths:
        if path == "-":
            data = sys.stdin.buffer.read()
            name = "<stdin>"
        else:
            try:
                data = Path(path).read_bytes()
            except OSError as e:
                raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
            name = path
        res = api.format_bytes(data, name)
        if res.text is None:
            _print_diagnostics(res.diagnostics)
            status = EXIT_INPUT
            continue
        old = data.decode("utf-8", errors="replace")
        changed = res.text != old
        if args.diff and changed:
            _out(api.unified_diff(old, res.text, name))
        if args.check:
            if changed:
                _err(f"would reformat {name}")
                status = EXIT_INPUT
            continue
        if path == "-":
            if not args.diff:
                sys.stdout.write(res.text)
        elif changed and not args.diff:
            Path(path).write_text(res.text, encoding="utf-8", newline="\n")
            _err(f"formatted {name}")
    return status


def cmd_graph(args: argparse.Namespace) -> int:
    from . import api

    comp = _compile_or_report(args.path)
    if not comp.ok:
        return EXIT_INPUT
    text = api.render_graph(comp, args.format)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        _out(text)
    return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    from . import api

    _check_pass_names(args)
    if args.check and not args.output:
        raise UsageError("--check needs -o FILE: the runner on disk to compare with")
    comp = _compile_or_report(args.path)
    if not comp.ok or comp.source is None:
        return EXIT_INPUT
    name = api.runner_source_name(args.path, args.output)
    if name != comp.source.path:
        comp = api.check_text(comp.source.text, name)
    text = api.generate_runner(comp, disabled=args.no_pass, level=args.opt_level)
    if args.check:
        if not Path(args.output).exists():
            _err(f"{args.output} does not exist: run `statewright compile {args.path} -o {args.output}`")
            return EXIT_INPUT
        if api.runner_is_current(args.output, text):
            _err(f"{args.output} is up to date")
            return EXIT_OK
        _err(f"{args.output} is out of date: run `statewright compile {args.path} -o {args.output}`")
        return EXIT_INPUT
    if not args.output:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        api.write_runner(args.output, text, force=args.force)
    except api.RunnerOverwriteError as e:
        _err(f"error: {e}")
        return EXIT_INPUT
    except OSError as e:
        raise UsageError(f"cannot write {args.output}: {e.strerror or e}") from None
    _err(f"wrote {args.output}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from . import api

    comp = _compile_or_report(args.path)
    if not comp.ok:
        return EXIT_INPUT
    machine = api.runtime_machine(comp)
    from .runtime.runner_cli import main as runner_main

    return runner_main(machine, args.runner_args, prog=f"statewright run {args.path}")


def cmd_test(args: argparse.Namespace) -> int:
    from . import api
    from .runtime.testing import format_outcome

    passed = failed = broken = 0
    for path in args.paths:
        comp = _compile_or_report(path)
        if not comp.ok:
            broken += 1  # its diagnostics are printed; its tests cannot run
            continue
        outcomes = api.run_tests(comp, trace_dir=args.trace, trace_content=args.trace_content,
                                 name_filter=args.filter)
        for outcome in outcomes:
            if outcome.passed:
                passed += 1
            else:
                failed += 1
            _out(format_outcome(outcome))
    if broken:
        _err(f"{broken} file{'s' if broken != 1 else ''} did not check; their tests did not run")
    _err(f"{passed} passed, {failed} failed")
    return EXIT_INPUT if failed or broken else EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    from .runtime.trace import render_trace

    try:
        _out(render_trace(args.file))
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e.strerror or e}") from None
    except ValueError as e:
        _err(f"error: {args.file} is not a statewright trace: {e}")
        return EXIT_INPUT
    return EXIT_OK


def cmd_design(args: argparse.Namespace) -> int:
    from . import api

    outcome = api.design(args.task, output=args.output, model=args.model, max_repairs=args.max_repairs,
                         optimize=not args.no_optimize, trace_path=args.trace, constrain=args.constrain,
                         max_tokens=args.max_tokens)
    for line in outcome.log:
        _err(line)
    return EXIT_OK if outcome.ok else EXIT_INPUT


def cmd_grammar(args: argparse.Namespace) -> int:
    from . import api

    sys.stdout.write(api.decoding_grammar(args.format, draft=args.draft))
    return EXIT_OK


def cmd_optimize(args: argparse.Namespace) -> int:
    from . import api

    comp = _compile_or_report(args.path)
    if not comp.ok:
        return EXIT_INPUT
    report = api.optimize_with_llm(comp, model=args.llm, write=args.write, trace_path=args.trace)
    for line in report.log:
        _err(line)
    if report.diff and not args.write:
        _out(report.diff)
    return EXIT_OK if report.ok else EXIT_INPUT


# ---- argument parsing ----------------------------------------------------------------------------


def _count(text: str) -> int:
    """An argparse type: a whole number, zero or more.

    Not the runner's own validator: importing runtime.runner_cli would load pydantic on every command."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected zero or more, got {value}")
    return value


def _positive(text: str) -> int:
    """An argparse type: a whole number, one or more."""
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected one or more, got {value}")
    return value


def _add_pass_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-O0", dest="opt_level", action="store_const", const=0, default=1,
                   help="turn off every optimization pass")
    p.add_argument("--no-pass", action="append", default=[], metavar="NAME",
                   help="turn off one optimization pass (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="statewright",
        description="Compile and run multi-agent LLM systems written as finite-state machines.",
    )
    parser.add_argument("--version", action="version", version=f"statewright {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("check", help="check .fsm files and report every problem")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("explain", help="explain a diagnostic code, with a wrong and a right example")
    p.add_argument("code", metavar="CODE")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("dump", help="print the syntax tree, the IR or the optimized IR as JSON")
    p.add_argument("--stage", choices=["ast", "ir", "optimized"], default="ir")
    p.add_argument("path", metavar="PATH")
    _add_pass_options(p)
    p.set_defaults(func=cmd_dump)

    p = sub.add_parser("fmt", help="format .fsm files in the one canonical layout")
    p.add_argument("paths", nargs="*", metavar="PATH", help="files to format; '-' or none for stdin")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    p.add_argument("--diff", action="store_true", help="print the changes as a unified diff instead of writing")
    p.set_defaults(func=cmd_fmt)

    p = sub.add_parser("graph", help="draw the machine as a Mermaid or Graphviz graph")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    p.add_argument("-o", "--output", metavar="FILE")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser("compile", help="generate a standalone Python runner module")
    p.add_argument("path", metavar="PATH")
    p.add_argument("-o", "--output", metavar="FILE")
    p.add_argument("--check", action="store_true", help="exit 1 if FILE is not what the spec generates")
    p.add_argument("--force", action="store_true", help="overwrite FILE even if it is not a generated runner")
    _add_pass_options(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run a machine (options as for a generated runner; see --help after PATH)",
                       add_help=False)
    p.add_argument("path", metavar="PATH")
    p.add_argument("runner_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("test", help="run the test blocks of .fsm files with scripted replies")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--trace", metavar="DIR", help="write one trace file per test block into DIR")
    p.add_argument("--trace-content", action="store_true", help="include messages and replies in traces")
    p.add_argument("--filter", metavar="TEXT", help="run only tests whose name contains TEXT")
    p.set_defaults(func=cmd_test)

    p = sub.add_parser("trace", help="read trace files")
    tsub = p.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    tsub.required = True
    t = tsub.add_parser("show", help="print a readable timeline of a trace with totals")
    t.add_argument("file", metavar="FILE")
    t.set_defaults(func=cmd_trace)

    p = sub.add_parser("design", help="draft a machine from a task description with a designer model")
    p.add_argument("task", metavar="TASK")
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.add_argument("--model", default=None, help="the designer model (default: $STATEWRIGHT_DESIGNER_MODEL "
                   "or openai/gpt-4o-mini)")
    p.add_argument("--max-repairs", type=_count, default=3, metavar="N",
                   help="how many times the designer may repair its source (default 3)")
    p.add_argument("--no-optimize", action="store_true")
    p.add_argument("--trace", metavar="FILE", help="write the designer's calls to a trace file")
    p.add_argument("--constrain", choices=["auto", "grammar", "none"], default="auto",
                   help="constrain drafts to the grammar at decoding time: auto (when the model's server is "
                   "known to take a grammar), grammar (always) or none (default auto)")
    p.add_argument("--max-tokens", type=_positive, default=None, metavar="N",
                   help="cap each designer reply at N tokens")
    p.set_defaults(func=cmd_design)

    p = sub.add_parser("grammar", help="print the grammar as a decoding constraint (GBNF or Lark)")
    p.add_argument("--format", choices=["gbnf", "lark"], default="gbnf",
                   help="gbnf for llama.cpp's grammar field, lark for decoders that take Lark (default gbnf)")
    p.add_argument("--draft", action="store_true",
                   help="the form a model writes into: no comments, and (gbnf) bounded whitespace")
    p.set_defaults(func=cmd_grammar)

    p = sub.add_parser("optimize", help="propose LLM-judged state merges as a reviewable source diff")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--llm", required=True, metavar="MODEL")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="apply accepted merges to the file")
    mode.add_argument("--diff", action="store_true", help="print the diff (the default)")
    p.add_argument("--trace", metavar="FILE")
    p.set_defaults(func=cmd_optimize)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help/--version exit 0, usage errors exit 2
        return int(e.code or 0)
    try:
        return int(args.func(args))
    except UsageError as e:
        _err(f"statewright: error: {e}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a bare traceback
        import os
        import traceback

        _err(f"statewright: internal error: {type(e).__name__}: {e}")
        _err("This is a bug in statewright. Please report it, with the input file and this message.")
        if os.environ.get("STATEWRIGHT_DEBUG"):
            _err("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip())
        else:
            _err("(set STATEWRIGHT_DEBUG=1 to include the Python traceback in the report)")
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
