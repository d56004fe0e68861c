"""Commands that read specs: check, explain, dump, fmt, graph, grammar, source-map and lsp."""

from __future__ import annotations

import argparse
import sys

from .common import (
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_color_option,
    add_pass_options,
    add_paths,
    check_pass_names,
    color_for,
    compile_or_report,
    one_file,
    plural,
    print_diagnostics,
    report_internal_error,
    spec_files,
    write_err,
    write_out,
)


def setup_check(p: argparse.ArgumentParser) -> None:
    add_paths(p, "+", "a .fsm file, or a directory: every .fsm file under it")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text for people (the default) or one JSON document for tools")
    add_color_option(p)
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from .. import api
    from ..diagnostics import Diagnostic, Severity, paint, render_json, render_summary

    # Whatever happens to one file, the others are checked and, with --format json, exactly one document
    # is printed: a bug in the compiler becomes an SW9001 diagnostic for the file that showed it.
    # One project: a file that several files use is checked once, and reported once.
    files, diags = spec_files(args)
    project = api.new_project()
    bugs = 0
    given = []
    for path in files:
        try:
            given.append(api.check_path(path, project))
        except Exception as e:  # noqa: BLE001 - reported, for this file only
            bugs += 1
            report_internal_error(e)
            diags.append(Diagnostic("SW9001", f"internal compiler error while checking {path}: "
                                    f"{type(e).__name__}: {e}", None, severity=Severity.ERROR, file=path,
                                    help="this is a bug in statewright; please report it with the file"))
    checked = api.project_compilations(project, given)
    for comp in checked:
        diags.extend(comp.diagnostics)
    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    if args.format == "json":
        write_out(render_json(diags))
    else:
        print_diagnostics(diags, args, to_stdout=True)
        color = color_for(args, sys.stderr)
        verdict = paint("failed", "error", color) if errors else paint("ok", "ok", color)
        write_err(f"{verdict}: {plural(max(len(files), len(checked)), 'file')} checked, "
             f"{render_summary(diags, color=color)}")
    if bugs:
        return EXIT_INTERNAL
    return EXIT_INPUT if errors else EXIT_OK


def setup_explain(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", nargs="?", metavar="CODE", help="a diagnostic code: SW2002, sw2002 or 2002")
    p.add_argument("--list", action="store_true", help="list every code with its severity and summary")
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    from ..diagnostics.explain import all_codes, explain

    if args.list:
        if args.code is not None:
            raise UsageError("give a code or --list, not both")
        for info in all_codes():
            write_out(f"{info.code}  {info.severity.value:<7}  {info.title}")
        return EXIT_OK
    if args.code is None:
        raise UsageError("give a code such as SW2002, or --list for every code")
    code = args.code.strip().upper()
    if not code.startswith("SW"):
        code = "SW" + code
    text = explain(code)
    if text is None:
        raise UsageError(f"unknown diagnostic code {args.code!r}; codes look like SW2002 "
                         "(`statewright explain --list` lists them)")
    write_out(text)
    return EXIT_OK


def setup_dump(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stage", choices=["ast", "ir", "optimized"], default="ir")
    p.add_argument("path", metavar="PATH")
    add_pass_options(p)
    add_color_option(p)
    p.set_defaults(func=cmd_dump)


def cmd_dump(args: argparse.Namespace) -> int:
    import json

    from .. import api

    check_pass_names(args)
    path = one_file(args.path, "dump")
    if args.stage == "ast":  # the syntax tree needs a file that parses, not one that checks
        parsed = api.parse_file(path)
        print_diagnostics(parsed.diagnostics.sorted(), args)
        if parsed.machine is None:
            return EXIT_INPUT
        write_out(json.dumps(api.dump_ast(parsed), indent=2, ensure_ascii=False))
        return EXIT_OK
    comp = compile_or_report(path, args)
    if not comp.ok:
        return EXIT_INPUT
    log: list[str] = []
    data = api.dump_ir(comp, optimized=args.stage == "optimized", disabled=args.no_pass,
                       level=args.opt_level, log=log)
    for line in log:
        write_err(f"pass {line}")
    write_out(json.dumps(data, indent=2, ensure_ascii=False))
    return EXIT_OK


def setup_fmt(p: argparse.ArgumentParser) -> None:
    add_paths(p, "*", "a .fsm file, a directory (every .fsm file under it), or '-' for standard input")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    p.add_argument("--diff", action="store_true", help="print the changes as a unified diff instead of writing")
    add_color_option(p)
    p.set_defaults(func=cmd_fmt, parser=p)


def cmd_fmt(args: argparse.Namespace) -> int:
    from .. import api

    if not args.paths:
        if sys.stdin.isatty():  # nothing piped in: waiting for a terminal to type a spec helps no one
            args.parser.print_usage(sys.stderr)
            write_err("statewright fmt: give the files or directories to format, or '-' to read standard input")
            return EXIT_USAGE
        args.paths = ["-"]
    if "-" in args.paths:
        if len(args.paths) > 1:
            raise UsageError("'-' (standard input) cannot be combined with other paths")
        return _fmt_stdin(args)
    files, problems = spec_files(args)
    print_diagnostics(problems, args)
    status = EXIT_INPUT if problems else EXIT_OK
    for path in files:
        data, problems = api.read_spec(path)
        if data is None:
            print_diagnostics(problems, args)
            status = EXIT_INPUT
            continue
        res = api.format_bytes(data, path)
        if res.text is None:
            print_diagnostics(res.diagnostics, args)
            status = EXIT_INPUT
            continue
        old = data.decode("utf-8", errors="replace")
        changed = res.text != old
        if args.diff and changed:
            write_out(api.unified_diff(old, res.text, path))
        if args.check:
            if changed:
                write_err(f"would reformat {path}")
                status = EXIT_INPUT
            continue
        if changed and not args.diff:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(res.text)
            write_err(f"formatted {path}")
    return status


def _fmt_stdin(args: argparse.Namespace) -> int:
    from .. import api
    from ..grammar.parser import read_limited

    data = read_limited(sys.stdin.buffer)
    res = api.format_bytes(data, "<stdin>")
    if res.text is None:
        print_diagnostics(res.diagnostics, args)
        return EXIT_INPUT
    old = data.decode("utf-8", errors="replace")
    changed = res.text != old
    if args.diff and changed:
        write_out(api.unified_diff(old, res.text, "<stdin>"))
    if args.check:
        if changed:
            write_err("would reformat <stdin>")
            return EXIT_INPUT
        return EXIT_OK
    if not args.diff:
        sys.stdout.write(res.text)
    return EXIT_OK


def setup_graph(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="the .fsm file of the machine to draw")
    p.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    p.add_argument("-o", "--output", metavar="FILE")
    add_color_option(p)
    p.set_defaults(func=cmd_graph)


def cmd_graph(args: argparse.Namespace) -> int:
    from .. import api

    comp = compile_or_report(one_file(args.path, "graph"), args)
    if not comp.ok:
        return EXIT_INPUT
    text = api.render_graph(comp, args.format)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        write_out(text)
    return EXIT_OK


def setup_source_map(p: argparse.ArgumentParser) -> None:
    p.add_argument("location", metavar="RUNNER.py:LINE", help="a generated runner and a line of it (from 1)")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: FILE:LINE:COL: KEY (the default); json: one object")
    p.set_defaults(func=cmd_source_map)


def cmd_source_map(args: argparse.Namespace) -> int:
    import json

    from .. import api
    from ..compiler.codegen.source_map import NotARunner

    runner, _, number = args.location.rpartition(":")
    if not runner or not number.isdigit() or int(number) < 1:
        raise UsageError(f"{args.location!r} is not RUNNER.py:LINE (a runner's path, ':', a line number from 1)")
    line = int(number)
    try:
        found = api.runner_origin(runner, line)
    except OSError as e:
        write_err(f"error: cannot read {runner}: {e.strerror or e}")
        return EXIT_INPUT
    except NotARunner as e:
        write_err(f"error: {runner}: {e}")
        return EXIT_INPUT
    if args.format == "json":
        write_out(json.dumps({"runner": runner, "runner_line": line, "found": found is not None,
                         **({"key": found.key, "file": found.path, "line": found.line, "column": found.column}
                            if found is not None else {})}))
    elif found is not None:
        write_out(f"{found.label()}: {found.key}")
    if found is None:
        write_err(f"{runner}:{line} comes from no one place of the spec (the runtime, an import or a type's class)")
        return EXIT_INPUT
    return EXIT_OK


def setup_lsp(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stdio", action="store_true", help="talk over stdin and stdout (the only way; editors' "
                   "clients pass it)")
    p.set_defaults(func=cmd_lsp)


def cmd_lsp(args: argparse.Namespace) -> int:
    try:
        from ..lsp.server import serve  # pygls only here: no other command pays for it
    except ImportError as e:
        raise UsageError(f"the language server needs pygls and lsprotocol ({e}); install them with "
                         "pip install 'statewright[lsp]'") from None
    return serve()


def setup_grammar(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["gbnf", "lark"], default="gbnf",
                   help="gbnf for llama.cpp's grammar field, lark for decoders that take Lark (default gbnf)")
    p.add_argument("--draft", action="store_true",
                   help="the form a model writes into: no comments, and (gbnf) bounded whitespace")
    p.set_defaults(func=cmd_grammar)


def cmd_grammar(args: argparse.Namespace) -> int:
    from .. import api

    sys.stdout.write(api.decoding_grammar(args.format, draft=args.draft))
    return EXIT_OK
