"""`statewright worker` checks its files in a process of its own and loads the machines it serves without
the compiler: a worker serving for days keeps the machines, not the grammar, the checks, code generation
or a file's syntax tree. Its diagnostics and exit status are those of any command that checks files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs `statewright worker ARGS` through the command line's own main, with the serving replaced by a
# report of what would be served and of what this process imported.
_SERVE_NOTHING = """
import json, sys
import statewright.runtime.runner_temporal as runner_temporal

def serve(machines, address, **options):
    compiler = sorted(m for m in sys.modules if m.startswith(("statewright.compiler.checks", "statewright.grammar",
                                                               "statewright.api", "lark", "jinja2")))
    print(json.dumps({"machines": [[m.name, len(m.states)] for m in machines], "compiler": compiler,
                      "address": address}))
    return 0

runner_temporal.serve_on_temporal = serve
from statewright.cli import main
sys.exit(main(["worker", *sys.argv[1:], "--temporal", "127.0.0.1:7233"]))
"""


def worker(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SERVE_NOTHING, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False)


def test_a_worker_serves_every_machine_and_never_imports_the_compiler() -> None:
    done = worker("examples/newsroom", "examples/parallel_review.fsm")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    names = [name for name, _ in report["machines"]]
    # each machine optimized and as written (the newsroom's files each, and the example)
    assert names.count("parallel_review") == 2 and names.count("newsroom") == 2 and "research" in names
    assert all(states > 0 for _, states in report["machines"])
    assert report["compiler"] == [], report["compiler"]
    assert report["address"] == "127.0.0.1:7233"


def test_a_file_that_does_not_check_stops_the_worker_with_its_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "bad.fsm").write_text("machine bad {\n    start state a { -> nowhere }\n}\n", encoding="utf-8")
    done = worker("bad.fsm", "--color", "never", cwd=tmp_path)
    assert done.returncode == 1  # as `check` of the file
    assert "bad.fsm:2:" in done.stderr and "nowhere" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # nothing was served


def test_a_folder_without_specs_and_excluded_files_say_so(tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "skip.fsm").write_text((ROOT / "examples" / "parallel_review.fsm").read_text())
    done = worker("flows", "--exclude", "skip.fsm", cwd=tmp_path)
    assert done.returncode == 1 and "no .fsm files to serve" in done.stderr
    done = worker("--exclude=other.fsm", "flows", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [name for name, _ in json.loads(done.stdout)["machines"]] == ["parallel_review"] * 2
