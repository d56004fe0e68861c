"""Runs generated runners' self-tests in one process, for the every-face harness (tests/test_faces.py):

    python -m support.faces_driver RUNNERS_DIR TRACES_DIR REPORT.json

Each `*_runner.py` in RUNNERS_DIR is imported as a module — the generated file exactly as a repository
would hold it, with no statewright package in sight (a runner that is not standalone imports the runtime
package `statewright_runtime/` beside it) — and its own command line runs `--selftest --trace DIR
--trace-content`, the test blocks' traces written under TRACES_DIR/<runner>. The report maps each runner to
its exit status and what its self-test printed. One process for them all spares a Python start-up per
runner, the one thing `python runner.py --selftest` does that this does not.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path


def main() -> None:
    runners, traces, report = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    sys.path.insert(0, str(runners))  # runners import the runtime package beside them, as scripts would
    results = {}
    for path in sorted(runners.glob("*_runner.py")):
        name = path.stem
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # pydantic resolves the module's annotations through sys.modules
        out, err = io.StringIO(), io.StringIO()
        try:
            spec.loader.exec_module(module)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = module.main(module.MACHINE, ["--selftest", "--trace", str(traces / name), "--trace-content"])
        except Exception as exc:  # noqa: BLE001 - a runner that does not import or crashes is a divergence
            status, err = -1, io.StringIO(f"{type(exc).__name__}: {exc}")
        finally:
            sys.modules.pop(name, None)
        results[name] = {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()[-2000:]}
    report.write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main()
