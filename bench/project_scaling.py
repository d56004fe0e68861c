"""Benchmark: checking a project of files that use files, against the same states in one file.

A project of 50 files of 100 states each — 49 team machines and a lead that runs each of them — is checked
as `statewright check DIR` checks it (one project, each file once), and the same 5,000 states in one file
are checked as one machine. The target: the project costs at most 1.3x the one file.

Then the language server's way: every file of the project open, one file edited, and that file checked
again through the server's project (the files it uses stay compiled), against checking that file alone (a
file of the same 100 states that uses no other). Both a team (used by the lead) and the lead (which uses
all 49) are edited. The target: at most 2x. How long the lead then takes to be checked again, after a team
it uses changed, is reported too (the server publishes it after the edited file's own diagnostics).

Times are CPU seconds (the machine is shared; CPU time is steadier than wall time), the median of the
repeats, each stage run as the pipeline runs it (collector paused).

    python bench/project_scaling.py [--repeat N] [--files N] [--states N]

The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from statewright import api
from statewright.compiler.project import Project, overlay_reader
from statewright.lsp.analysis import Analysis

CHECK_TARGET = 1.3
EDIT_TARGET = 2.0


def _types(prefix: str) -> list[str]:
    return [f"    type {prefix}Report {{", "        score: int", "        fixes: list[str]",
            '        level: "low" | "high"', "    }", "",
            f"    agent {prefix}writer {{", '        prompt "You write for {{ topic }}."', "    }", ""]


def _states(prefix: str, n: int, last: str, start: bool) -> list[str]:
    """`n` agent states in a chain: each reads the one before in its instruction and its guard, with a
    bounded way back every tenth state."""
    out = []
    for i in range(n):
        name, after = f"{prefix}s{i}", (f"{prefix}s{i + 1}" if i + 1 < n else last)
        read = f"{{{{ {prefix}s{i - 1}.output.fixes }}}}" if i else "{{ topic }}"
        back = [f"        when output.score < 10 -> {prefix}s{i - 5} max 1"] if i % 10 == 9 else []
        out += [f"    {'start ' if start and i == 0 else ''}state {name} {{", f"        agent {prefix}writer",
                f'        do "Step {i} of {read}."', f"        output {prefix}Report",
                *back, f'        when output.level == "high" -> {after}', f"        -> {after}", "    }", ""]
    return out


def team(i: int, states: int) -> str:
    return "\n".join([f"machine team{i} {{", "    input topic: str", "    returns tReport", "", *_types("t"),
                      *_states("t", states, "done", True), "    final state done", "}", ""])


def lead(teams: int, states: int) -> str:
    own = states - teams
    uses = [f'use "team{i}.fsm"' for i in range(teams)]
    runs = []
    for i in range(teams):
        after = f"run{i + 1}" if i + 1 < teams else "done"
        runs += [f"    state run{i} {{", f"        run team{i}(topic = topic)",
                 f"        when output.ok and output.result != none and output.result.score > 50 -> {after}",
                 "        otherwise -> failed", "    }", ""]
    return "\n".join([*uses, "", "machine lead {", "    input topic: str", "", *_types("l"),
                      *_states("l", own, "run0", True), *runs, "    final state done",
                      '    final state failed {', '        fail "a team failed"', "    }", "}", ""])


def one_file(files: int, states: int) -> str:
    """The same states in one machine: each team's chain, then the lead's, then one agent state for each
    of the lead's calls."""
    body: list[str] = []
    for i in range(files - 1):
        body += _types(f"t{i}") + _states(f"t{i}", states, f"t{i + 1}s0" if i + 2 < files else "ls0", i == 0)
    body += _types("l") + _states("l", states, "done", False)
    return "\n".join(["machine one {", "    input topic: str", "", *body, "    final state done", "}", ""])


def lone(text: str) -> str:
    """A file of the same states that uses no other: its `run` states as agent states."""
    lines = [line for line in text.splitlines() if not line.startswith("use ")]
    out = []
    for line in lines:
        if line.strip().startswith("run team"):
            out += ["        agent lwriter", '        do "Run it."', "        output lReport"]
        elif "output.ok and output.result" in line:
            out.append(line.replace("output.ok and output.result != none and output.result.score > 50",
                                    "output.score > 50"))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def cpu(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    return statistics.median(times)


def write_project(root: Path, files: int, states: int) -> list[Path]:
    paths = []
    for i in range(files - 1):
        paths.append(root / f"team{i}.fsm")
        paths[-1].write_text(team(i, states), encoding="utf-8")
    paths.append(root / "lead.fsm")
    paths[-1].write_text(lead(files - 1, states), encoding="utf-8")
    (root / "one.fsm").write_text(one_file(files, states), encoding="utf-8")
    return paths


def check_project(paths: list[Path]) -> None:
    found = api.check_files([str(p) for p in paths])
    assert all(c.ok for c in found), [d.message for c in found for d in c.diagnostics[:3]]


def edit_in_server(paths: list[Path], edited: Path, repeat: int) -> tuple[float, float]:
    """(the edited file checked again, the lead checked again after it) through one project holding every
    open file, as `statewright lsp` compiles them."""
    texts = {Project.key(str(p)): p.read_text(encoding="utf-8") for p in paths}
    project = api.new_project(reader=overlay_reader(texts))
    for p in paths:  # every file open and compiled
        Analysis(p.as_uri(), 1, texts[Project.key(str(p))], project=project)
    lead_path = paths[-1]
    edits, leads = [], []
    for n in range(repeat):
        key = Project.key(str(edited))
        texts[key] = texts[key].replace("input topic: str", f"input topic: str  # edit {n}", 1)
        gc.collect()
        started = time.process_time()
        project.invalidate(str(edited))
        analysis = Analysis(edited.as_uri(), n + 2, texts[key], project=project)
        edits.append(time.process_time() - started)
        assert analysis.compilation.ok, [d.message for d in analysis.compilation.diagnostics[:3]]
        if edited != lead_path:
            started = time.process_time()
            Analysis(lead_path.as_uri(), n + 2, texts[Project.key(str(lead_path))], project=project)
            leads.append(time.process_time() - started)
    return statistics.median(edits), statistics.median(leads) if leads else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each measure (the median counts)")
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--states", type=int, default=100, help="states per file")
    args = parser.parse_args(argv)
    result: dict[str, object] = {"files": args.files, "states_per_file": args.states}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = write_project(root, args.files, args.states)
        check_project(paths[:2])  # warm-up: imports, the parse table
        one = root / "one.fsm"
        assert api.check_path(one).ok, [d.message for d in api.check_path(one).diagnostics[:3]]
        project_s = cpu(lambda: check_project(paths), args.repeat)
        one_s = cpu(lambda: api.check_path(one), args.repeat)
        ratio = project_s / one_s
        print(f"check: {args.files} files of {args.states} states {project_s:.2f} s, the same states in one file "
              f"{one_s:.2f} s: {ratio:.2f}x (target <= {CHECK_TARGET})")
        result.update(project_check_cpu_s=round(project_s, 3), one_file_check_cpu_s=round(one_s, 3),
                      check_ratio=round(ratio, 3))
        met = ratio <= CHECK_TARGET
        for label, edited in (("team", paths[0]), ("lead", paths[-1])):
            alone_text = lone(edited.read_text(encoding="utf-8"))
            assert api.check_text(alone_text, str(root / "alone.fsm")).ok
            alone_s = cpu(lambda text=alone_text: api.check_text(text, str(root / "alone.fsm")), args.repeat)
            edit_s, lead_s = edit_in_server(paths, edited, args.repeat)
            edit_ratio = edit_s / alone_s
            print(f"lsp: the {label} edited, checked again in {edit_s * 1000:.0f} ms; alone {alone_s * 1000:.0f} ms: "
                  f"{edit_ratio:.2f}x (target <= {EDIT_TARGET})"
                  + (f"; the lead after it: {lead_s * 1000:.0f} ms" if lead_s else ""))
            result.update({f"lsp_{label}_edit_cpu_s": round(edit_s, 4), f"lsp_{label}_alone_cpu_s": round(alone_s, 4),
                           f"lsp_{label}_edit_ratio": round(edit_ratio, 3)})
            if lead_s:
                result["lsp_lead_after_team_edit_cpu_s"] = round(lead_s, 4)
            met = met and edit_ratio <= EDIT_TARGET
    result["targets_met"] = met
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
