"""`compile --runtime module`: runners that carry only their machine and share one generated
statewright_runtime.py beside them — runnable without statewright, deterministic, and held to their
runtime by `compile --check` and by the runners themselves."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.e2e_runs import EXAMPLES, cli, runner_process

import statewright
from statewright import api
from statewright.compiler.codegen.runtime_module import runtime_file_state, runtime_module

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "examples" / "content_pipeline.fsm"
TRIVIA = ROOT / "examples" / "trivia_writing.fsm"
RUNTIME = api.RUNTIME_FILE


def compile_module_runner(spec: Path, runner: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("compile", str(spec), "-o", str(runner), "--runtime", "module", *extra)


def two_runners(directory: Path) -> tuple[Path, Path]:
    """The content pipeline's and the trivia writer's runners, compiled into one directory."""
    first, second = directory / "content_pipeline_runner.py", directory / "trivia_writing_runner.py"
    for spec, runner in ((PIPELINE, first), (TRIVIA, second)):
        done = compile_module_runner(spec, runner)
        assert done.returncode == 0, done.stderr
    return first, second


def test_examples_the_tests_below_compile_exist() -> None:
    assert PIPELINE in EXAMPLES and TRIVIA in EXAMPLES


# ---- two runners, one runtime ----------------------------------------------------------------------


def test_two_runners_share_one_runtime_and_each_passes_its_selftest_without_statewright(
        tmp_path: Path, bare_python: Path) -> None:
    first, second = two_runners(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, second.name, RUNTIME])
    assert (tmp_path / RUNTIME).read_text(encoding="utf-8") == api.runtime_module_text()
    for runner, spec in ((first, PIPELINE), (second, TRIVIA)):
        text = runner.read_text(encoding="utf-8")
        assert "# ---- runtime/" not in text and "class MachineSpec" not in text  # only its machine
        assert len(text.splitlines()) < 800, "a module runner is its machine: a few hundred lines"
        done = runner_process(bare_python, runner, "--selftest", cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        names = [t.name for t in api.runtime_machine(api.check_file(spec)).tests]  # type: ignore[attr-defined]
        assert done.stdout.splitlines() == [f"PASS  {name}" for name in names]


def test_runners_in_a_package_import_the_packages_runtime(tmp_path: Path, bare_python: Path) -> None:
    """Imported from a package, a runner finds the runtime beside it by a relative import, without the
    directory on sys.path; `python -m` runs it the same way."""
    package = tmp_path / "flows"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    two_runners(package)
    code = textwrap.dedent("""
        import sys
        from flows import content_pipeline_runner, trivia_writing_runner
        assert content_pipeline_runner.MachineSpec is trivia_writing_runner.MachineSpec
        print(sorted(name for name in sys.modules if "statewright_runtime" in name))
        print(content_pipeline_runner.MACHINE.name, trivia_writing_runner.MACHINE.name)
    """)
    done = subprocess.run([str(bare_python), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['flows.statewright_runtime']", "content_pipeline trivia_writing"]
    as_module = subprocess.run([str(bare_python), "-m", "flows.content_pipeline_runner", "--selftest"],
                               cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120)
    assert as_module.returncode == 0, as_module.stderr


def test_the_machine_part_is_the_same_whatever_the_runtime(tmp_path: Path) -> None:
    comp = api.check_file(PIPELINE)
    marker = "# ==== the machine `"
    inline = api.generate_runner(comp)
    module = api.generate_runner(comp, runtime="module")
    assert inline[inline.index(marker):] == module[module.index(marker):]


def test_module_runners_and_the_runtime_are_byte_identical_under_any_hash_seed() -> None:
    code = textwrap.dedent(f"""
        import hashlib, json
        from statewright import api
        texts = [api.runtime_module_text()]
        texts += [api.generate_runner(api.check_file(p), runtime="module") for p in {json.dumps([str(p) for p in EXAMPLES])}]
        print(json.dumps([hashlib.sha256(t.encode()).hexdigest() for t in texts]))
    """)
    digests = []
    for seed in ("0", "1", "42", "31337"):
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONHASHSEED": seed}, timeout=300)
        assert done.returncode == 0, done.stderr
        digests.append(json.loads(done.stdout))
    assert all(d == digests[0] for d in digests[1:])
    assert len(digests[0]) == len(EXAMPLES) + 1


def test_the_runtime_module_opens_with_the_generated_header_and_its_hash() -> None:
    module = runtime_module()
    lines = module.text.splitlines()
    assert lines[0] == (f"# Generated by statewright {statewright.__version__}: the runtime of the runners "
                        "beside it — do not edit.")
    assert lines[1] == f"# runtime-sha256: {module.sha256}"
    assert lines[2:4] == ["# ruff: noqa", "# fmt: off"]
    assert f'RUNTIME_VERSION = "{statewright.__version__}"' in lines
    hashed = module.text.split(f'RUNTIME_SHA256 = "{module.sha256}"  # of everything below this line\n', 1)[1]
    assert hashlib.sha256(hashed.encode()).hexdigest() == module.sha256


def test_module_runners_and_the_runtime_tell_linters_to_leave_them_alone(tmp_path: Path) -> None:
    two_runners(tmp_path)
    for target in ("py310", "py313"):
        done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "ALL",
                               "--ignore", "PGH004", "--target-version", target, str(tmp_path)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, (target, done.stdout[-4000:])


# ---- compile --check covers both files ------------------------------------------------------------


def _check(spec: Path, runner: Path) -> subprocess.CompletedProcess[str]:
    return compile_module_runner(spec, runner, "--check")


def test_check_passes_when_the_runner_and_its_runtime_are_current(tmp_path: Path) -> None:
    first, _ = two_runners(tmp_path)
    done = _check(PIPELINE, first)
    assert done.returncode == 0, done.stderr
    assert f"{first} is up to date" in done.stderr
    assert f"{tmp_path / RUNTIME} is up to date" in done.stderr


def test_check_reports_a_stale_runner_and_a_missing_runtime(tmp_path: Path) -> None:
    first, _ = two_runners(tmp_path)
    first.write_text(first.read_text(encoding="utf-8").replace("score >= 85", "score >= 80"), encoding="utf-8")
    (tmp_path / RUNTIME).unlink()
    done = _check(PIPELINE, first)
    assert done.returncode == 1
    assert f"{first} is out of date" in done.stderr
    assert f"{tmp_path / RUNTIME} does not exist: run `statewright compile" in done.stderr
    assert "--runtime module`" in done.stderr


def _rehash(text: str, code: str) -> str:
    """A runtime module whose code is `code`, with a header and hash line that agree with it."""
    old = runtime_module().sha256
    new = hashlib.sha256(code.encode()).hexdigest()
    head = text.split(f'RUNTIME_SHA256 = "{old}"', 1)[0].replace(old, new)
    return head + f'RUNTIME_SHA256 = "{new}"  # of everything below this line\n' + code


@pytest.mark.parametrize(("change", "message"), [
    ("edited", "was edited by hand: its code does not hash to the sha256 its header records"),
    ("version", "is the runtime of statewright 0.0.9; this is statewright"),
    ("build", f"is another build of the statewright {statewright.__version__} runtime (sha256 "),
    ("header", "was edited by hand: its header or docstring differs"),
    ("foreign", "was not generated by statewright"),
])
def test_check_says_what_is_wrong_with_the_runtime(tmp_path: Path, change: str, message: str) -> None:
    first, _ = two_runners(tmp_path)
    runtime = tmp_path / RUNTIME
    text = runtime.read_text(encoding="utf-8")
    code = text.split("# of everything below this line\n", 1)[1]
    changed = {
        "edited": lambda: text.replace("def run_machine(", "def run_machine(  ", 1),
        "version": lambda: text.replace(f"statewright {statewright.__version__}:", "statewright 0.0.9:", 1),
        "build": lambda: _rehash(text, code.replace("def run_machine(", "def run_machine(  ", 1)),
        "header": lambda: text.replace("shared by the runners beside this file", "shared by my runners", 1),
        "foreign": lambda: "# a hand-written runtime\n" + text,
    }[change]()
    runtime.write_text(changed, encoding="utf-8")
    assert runtime_file_state(runtime).kind == ("edited" if change == "header" else change)
    done = _check(PIPELINE, first)
    assert done.returncode == 1
    assert f"{first} is up to date" in done.stderr
    assert f"{runtime} {message}" in done.stderr, done.stderr
    assert runtime.read_text(encoding="utf-8") == changed, "--check writes nothing"


def test_a_runner_refuses_a_runtime_it_was_not_generated_with(tmp_path: Path, bare_python: Path) -> None:
    first, _ = two_runners(tmp_path)
    runtime = tmp_path / RUNTIME
    text = runtime.read_text(encoding="utf-8")
    code = text.split("# of everything below this line\n", 1)[1]
    runtime.write_text(_rehash(text, code + "\n# another build\n"), encoding="utf-8")
    done = runner_process(bare_python, first, "--help", cwd=tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    short = runtime_module().sha256[:12]
    assert last.startswith(f"ImportError: this runner was generated with the statewright {statewright.__version__} "
                           f"runtime (sha256 {short}), but the {RUNTIME} it imports is the statewright "
                           f"{statewright.__version__} runtime (sha256 ")
    assert last.endswith("regenerate the runners beside it with `statewright compile --runtime module`, which "
                         "rewrites the runtime too")


# ---- writing ----------------------------------------------------------------------------------------


def test_compile_never_replaces_a_hand_written_runtime_and_then_writes_no_runner(tmp_path: Path) -> None:
    runtime = tmp_path / RUNTIME
    runtime.write_text("# my own helpers\n", encoding="utf-8")
    runner = tmp_path / "content_pipeline_runner.py"
    done = compile_module_runner(PIPELINE, runner)
    assert done.returncode == 1
    assert "was not generated by statewright" in done.stderr
    assert runtime.read_text(encoding="utf-8") == "# my own helpers\n"
    assert not runner.exists()
    forced = compile_module_runner(PIPELINE, runner, "--force")
    assert forced.returncode == 0, forced.stderr
    assert runtime.read_text(encoding="utf-8") == api.runtime_module_text()


def test_a_second_runner_leaves_a_current_runtime_alone(tmp_path: Path) -> None:
    first = tmp_path / "content_pipeline_runner.py"
    assert compile_module_runner(PIPELINE, first).stderr.strip() == f"wrote {first} and {tmp_path / RUNTIME}"
    second = tmp_path / "trivia_writing_runner.py"
    done = compile_module_runner(TRIVIA, second)
    assert done.stderr.strip() == f"wrote {second} ({tmp_path / RUNTIME} is up to date)"


def test_replacing_the_runtime_names_the_runners_that_need_regenerating(tmp_path: Path) -> None:
    first, second = two_runners(tmp_path)
    sha = runtime_module().sha256
    first.write_text(first.read_text(encoding="utf-8").replace(sha, "0" * 64), encoding="utf-8")  # an older one
    (tmp_path / RUNTIME).write_text(_rehash((tmp_path / RUNTIME).read_text(encoding="utf-8"), "pass\n"),
                                    encoding="utf-8")
    done = compile_module_runner(TRIVIA, second)
    assert done.returncode == 0, done.stderr
    assert re.search(r"warning: these runners beside it were generated for another runtime .*: "
                     r"content_pipeline_runner\.py$", done.stderr.strip()), done.stderr


def test_the_runtime_needs_an_output_path_and_its_name_is_taken(tmp_path: Path) -> None:
    done = cli("compile", str(PIPELINE), "--runtime", "module")
    assert done.returncode == 2 and "--runtime module needs -o FILE" in done.stderr
    taken = compile_module_runner(PIPELINE, tmp_path / RUNTIME)
    assert taken.returncode == 2 and "is the name of the shared runtime" in taken.stderr
    assert not list(tmp_path.iterdir())


def test_the_python_api_writes_a_module_runner_and_its_runtime(tmp_path: Path) -> None:
    machine = statewright.load(PIPELINE)
    runner = machine.compile(tmp_path / "pipeline_runner.py", runtime="module")
    assert (tmp_path / RUNTIME).read_text(encoding="utf-8") == api.runtime_module_text()
    assert "from statewright_runtime import (" in runner.read_text(encoding="utf-8")
    assert api.check_runtime_module(tmp_path / RUNTIME).current
