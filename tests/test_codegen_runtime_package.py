"""`statewright compile SPEC -o RUNNER`: a runner that carries only its machine, and beside it the runtime
package statewright_runtime/ that every runner there shares — runnable without statewright, deterministic,
written only over what statewright wrote, and held to its runtime by `compile --check` and by the runners
themselves."""

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
from statewright.compiler.codegen.runtime_package import runtime_package, runtime_package_state
from statewright.compiler.codegen.runtime_source import runtime_sources

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "examples" / "content_pipeline.fsm"
TRIVIA = ROOT / "examples" / "trivia_writing.fsm"
RUNTIME = api.RUNTIME_DIR


def compile_runner(spec: Path, runner: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("compile", str(spec), "-o", str(runner), *extra)


def two_runners(directory: Path) -> tuple[Path, Path]:
    """The content pipeline's and the trivia writer's runners, compiled into one directory."""
    first, second = directory / "content_pipeline_runner.py", directory / "trivia_writing_runner.py"
    for spec, runner in ((PIPELINE, first), (TRIVIA, second)):
        done = compile_runner(spec, runner)
        assert done.returncode == 0, done.stderr
    return first, second


def package_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((directory / RUNTIME).glob("*.py"))}


def test_examples_the_tests_below_compile_exist() -> None:
    assert PIPELINE in EXAMPLES and TRIVIA in EXAMPLES


# ---- two runners, one runtime package --------------------------------------------------------------


def test_two_runners_share_one_package_and_each_passes_its_selftest_elsewhere_without_statewright(
        tmp_path: Path, bare_python: Path) -> None:
    """Run as scripts from another directory, by a Python that has no statewright, with no PYTHONPATH: each
    runner finds the package beside it."""
    out = tmp_path / "flows"
    out.mkdir()
    first, second = two_runners(out)
    assert sorted(p.name for p in out.iterdir()) == sorted([first.name, second.name, RUNTIME])
    expected = runtime_package().files
    assert package_files(out) == {name: text.encode() for name, text in expected.items()}
    for runner, spec in ((first, PIPELINE), (second, TRIVIA)):
        text = runner.read_text(encoding="utf-8")
        assert "class MachineSpec" not in text and "_install_runtime" not in text  # only its machine
        assert len(text.splitlines()) < 800, "a runner is its machine: a few hundred lines"
        done = runner_process(bare_python, runner, "--selftest", cwd=tmp_path, env={"PYTHONPATH": None})
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
        print(sorted(name for name in sys.modules if name.startswith("flows.statewright_runtime")
                     and name.count(".") == 1))
        print(content_pipeline_runner.MACHINE.name, trivia_writing_runner.MACHINE.name)
    """)
    done = subprocess.run([str(bare_python), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          check=False, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['flows.statewright_runtime']", "content_pipeline trivia_writing"]
    as_module = subprocess.run([str(bare_python), "-m", "flows.content_pipeline_runner", "--selftest"],
                               cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120)
    assert as_module.returncode == 0, as_module.stderr


def test_the_package_holds_the_runtimes_modules_unchanged_under_a_header() -> None:
    package = runtime_package()
    sources = runtime_sources()
    assert sorted(package.files) == sorted([*(f"{name}.py" for name in sources), "__init__.py"])
    for name, text in sources.items():
        header, _, code = package.files[f"{name}.py"].partition("# fmt: off\n")
        assert code == text
        assert header == (f"# Generated by statewright {statewright.__version__}: a module of the runtime in "
                          "this package — do not edit.\n# ruff: noqa\n")


def test_the_packages_record_opens_with_the_generated_header_and_names_each_modules_hash() -> None:
    package = runtime_package()
    record = package.files["__init__.py"]
    lines = record.splitlines()
    assert lines[0] == (f"# Generated by statewright {statewright.__version__}: the runtime of the runners "
                        "beside this package — do not edit.")
    assert lines[1] == f"# runtime-sha256: {package.sha256}"
    assert lines[2:4] == ["# ruff: noqa", "# fmt: off"]
    assert f'RUNTIME_VERSION = "{statewright.__version__}"' in lines
    listed = dict(re.findall(r'^    "(\w+)": "([0-9a-f]{64})",$', record, re.MULTILINE))
    assert listed == {name: hashlib.sha256(text.encode()).hexdigest() for name, text in runtime_sources().items()}
    manifest = "".join(f"{digest}  {name}.py\n" for name, digest in sorted(listed.items()))
    assert f'RUNTIME_SHA256 = "{hashlib.sha256(manifest.encode()).hexdigest()}"' in record


def test_runners_and_the_package_are_byte_identical_under_any_hash_seed_and_compiled_twice(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import hashlib, json
        from statewright import api
        from statewright.compiler.codegen.runtime_package import runtime_package
        texts = list(runtime_package().files.values())
        texts += [api.generate_runner(api.check_file(p)) for p in {json.dumps([str(p) for p in EXAMPLES])}]
        print(json.dumps([hashlib.sha256(t.encode()).hexdigest() for t in texts]))
    """)
    digests = []
    for seed in ("0", "1", "31337"):
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONHASHSEED": seed}, timeout=300)
        assert done.returncode == 0, done.stderr
        digests.append(json.loads(done.stdout))
    assert all(d == digests[0] for d in digests[1:])
    assert len(digests[0]) == len(EXAMPLES) + len(runtime_package().files)
    once, twice = tmp_path / "once", tmp_path / "twice"
    for directory in (once, twice):
        directory.mkdir()
        two_runners(directory)
    assert package_files(once) == package_files(twice)
    assert [p.read_bytes() for p in sorted(once.glob("*.py"))] == [p.read_bytes() for p in sorted(twice.glob("*.py"))]


def test_runners_and_the_package_tell_linters_to_leave_them_alone(tmp_path: Path) -> None:
    two_runners(tmp_path)
    for target in ("py310", "py313"):
        done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "ALL",
                               "--ignore", "PGH004", "--target-version", target, str(tmp_path)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, (target, done.stdout[-4000:])


# ---- compile --check covers the runner and the package ----------------------------------------------


def _check(spec: Path, runner: Path) -> subprocess.CompletedProcess[str]:
    return compile_runner(spec, runner, "--check")


def test_check_passes_when_the_runner_and_its_package_are_current(tmp_path: Path) -> None:
    first, _ = two_runners(tmp_path)
    done = _check(PIPELINE, first)
    assert done.returncode == 0, done.stderr
    assert f"{first} is up to date" in done.stderr
    assert f"{tmp_path / RUNTIME}/ is up to date" in done.stderr


def test_check_reports_a_stale_runner_and_a_missing_package(tmp_path: Path) -> None:
    first, _ = two_runners(tmp_path)
    first.write_text(first.read_text(encoding="utf-8").replace("score >= 85", "score >= 80"), encoding="utf-8")
    for path in (tmp_path / RUNTIME).glob("*.py"):
        path.unlink()
    done = _check(PIPELINE, first)
    assert done.returncode == 1
    assert f"{first} is out of date" in done.stderr
    assert f"{tmp_path / RUNTIME}/ is an empty directory: run `statewright compile {PIPELINE} -o {first}`" in done.stderr


def _rehash(package: Path, module: str, code: str) -> None:
    """Give `module` new code, and the package's record the hashes that agree with it (another build)."""
    old_code = (package / f"{module}.py").read_text(encoding="utf-8").split("\n", 3)[3]
    head = (package / f"{module}.py").read_text(encoding="utf-8")[:-len(old_code)]
    (package / f"{module}.py").write_text(head + code, encoding="utf-8")
    record = (package / "__init__.py").read_text(encoding="utf-8")
    old, new = hashlib.sha256(old_code.encode()).hexdigest(), hashlib.sha256(code.encode()).hexdigest()
    listed = dict(re.findall(r'^    "(\w+)": "([0-9a-f]{64})",$', record, re.MULTILINE))
    before = hashlib.sha256("".join(f"{d}  {n}.py\n" for n, d in sorted(listed.items())).encode()).hexdigest()
    listed[module] = new
    after = hashlib.sha256("".join(f"{d}  {n}.py\n" for n, d in sorted(listed.items())).encode()).hexdigest()
    (package / "__init__.py").write_text(record.replace(old, new).replace(before, after), encoding="utf-8")


def _change(package: Path, change: str) -> None:
    engine, record = package / "engine.py", package / "__init__.py"
    if change == "edited":
        engine.write_text(engine.read_text(encoding="utf-8") + "# a fix of my own\n", encoding="utf-8")
    elif change == "version":
        record.write_text(record.read_text(encoding="utf-8").replace(f"statewright {statewright.__version__}:", "statewright 0.0.9:", 1)
                          .replace(f'RUNTIME_VERSION = "{statewright.__version__}"', 'RUNTIME_VERSION = "0.0.9"'),
                          encoding="utf-8")
    elif change == "build":
        _rehash(package, "engine", engine.read_text(encoding="utf-8").split("\n", 3)[3] + "# another build\n")
    elif change == "header":
        engine.write_text(engine.read_text(encoding="utf-8").replace("do not edit", "edit freely", 1), encoding="utf-8")
    elif change == "record":
        record.write_text(record.read_text(encoding="utf-8").replace('    "engine": ', '    "engine2": ', 1), encoding="utf-8")
    elif change == "foreign":
        engine.write_text("# my own engine\n", encoding="utf-8")
    elif change == "lost":
        engine.unlink()
    elif change == "incomplete":
        record.unlink()
    elif change == "extra":
        (package / "helpers.py").write_text("# my helpers\n", encoding="utf-8")
    elif change == "file":
        for path in package.glob("*.py"):
            path.unlink()
        package.rmdir()
        package.write_text("not a package\n", encoding="utf-8")


CHANGES = [
    ("edited", "edited", "was edited by hand: the code of engine.py does not hash to the sha256 its __init__.py records"),
    ("version", "version", "is the runtime of statewright 0.0.9; this is statewright"),
    ("build", "build", f"is another build of the statewright {statewright.__version__} runtime (sha256 "),
    ("header", "edited", "was edited by hand: a header or docstring differs"),
    ("record", "edited", "was edited by hand: its __init__.py no longer records the runtime's modules"),
    ("foreign", "foreign", "holds engine.py, which statewright did not write"),
    ("lost", "edited", "has lost engine.py, which its __init__.py lists"),
    ("incomplete", "incomplete", "has no __init__.py: writing it was cut short, or it was deleted"),
    ("extra", "edited", "holds helpers.py, which statewright did not write"),
    ("file", "foreign", "is a file, not the runtime package statewright writes"),
]


@pytest.mark.parametrize(("change", "kind", "message"), CHANGES, ids=[c[0] for c in CHANGES])
def test_check_says_what_is_wrong_with_the_package(tmp_path: Path, change: str, kind: str, message: str) -> None:
    first, _ = two_runners(tmp_path)
    package = tmp_path / RUNTIME
    _change(package, change)
    before = package_files(tmp_path) if package.is_dir() else package.read_bytes()
    assert runtime_package_state(package).kind == kind
    done = _check(PIPELINE, first)
    assert done.returncode == 1
    assert f"{first} is up to date" in done.stderr
    assert f"{package}/ {message}" in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith(f"run `statewright compile {PIPELINE} -o {first}`, which rewrites it")
    assert (package_files(tmp_path) if package.is_dir() else package.read_bytes()) == before, "--check writes nothing"


@pytest.mark.parametrize("change", ["edited", "version", "build", "header", "record", "lost", "incomplete"])
def test_compile_rewrites_a_package_statewright_wrote_whatever_became_of_it(tmp_path: Path, change: str) -> None:
    first, _ = two_runners(tmp_path)
    _change(tmp_path / RUNTIME, change)
    done = compile_runner(PIPELINE, first)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"wrote {first} and {tmp_path / RUNTIME}/")
    assert api.check_runtime_package(tmp_path / RUNTIME).current


def test_a_runner_refuses_a_runtime_it_was_not_generated_with(tmp_path: Path, bare_python: Path) -> None:
    first, _ = two_runners(tmp_path)
    _change(tmp_path / RUNTIME, "build")
    done = runner_process(bare_python, first, "--help", cwd=tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    short = runtime_package().sha256[:12]
    assert last.startswith(f"ImportError: this runner was generated with the statewright {statewright.__version__} "
                           f"runtime (sha256 {short}), but the {RUNTIME} package it imports is the statewright "
                           f"{statewright.__version__} runtime (sha256 ")
    assert last.endswith("regenerate the runners beside it with `statewright compile`, which rewrites the runtime too")


def test_a_write_cut_short_leaves_a_package_no_runner_imports(tmp_path: Path, bare_python: Path) -> None:
    first, _ = two_runners(tmp_path)
    _change(tmp_path / RUNTIME, "incomplete")  # what a write stopped before its last file leaves
    done = runner_process(bare_python, first, "--help", cwd=tmp_path)
    assert done.returncode == 1 and "ImportError: cannot import name 'RUNTIME_SHA256'" in done.stderr


# ---- writing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["module", "package", "old module"])
def test_compile_never_replaces_a_file_statewright_did_not_write_and_then_writes_nothing(
        tmp_path: Path, where: str) -> None:
    package = tmp_path / RUNTIME
    if where == "module":
        package.mkdir()
        mine = package / "engine.py"
    else:
        mine = package if where == "package" else tmp_path / f"{RUNTIME}.py"
    mine.write_text("# my own helpers\n", encoding="utf-8")
    runner = tmp_path / "content_pipeline_runner.py"
    done = compile_runner(PIPELINE, runner)
    assert done.returncode == 1
    assert "statewright did not write" in done.stderr or "was not generated by statewright" in done.stderr
    assert mine.read_text(encoding="utf-8") == "# my own helpers\n"
    assert not runner.exists()
    assert not (package / "__init__.py").exists()
    forced = compile_runner(PIPELINE, runner, "--force")
    assert forced.returncode == 0, forced.stderr
    assert api.check_runtime_package(package).current
    if where == "old module":  # forced, the package is written beside it; the file is the user's still
        assert mine.read_text(encoding="utf-8") == "# my own helpers\n"


def test_a_second_runner_leaves_a_current_package_alone(tmp_path: Path) -> None:
    first = tmp_path / "content_pipeline_runner.py"
    assert compile_runner(PIPELINE, first).stderr.strip() == f"wrote {first} and {tmp_path / RUNTIME}/"
    times = {p.name: p.stat().st_mtime_ns for p in (tmp_path / RUNTIME).iterdir()}
    second = tmp_path / "trivia_writing_runner.py"
    done = compile_runner(TRIVIA, second)
    assert done.stderr.strip() == f"wrote {second} ({tmp_path / RUNTIME}/ is up to date)"
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / RUNTIME).iterdir()} == times


def test_replacing_the_package_names_the_runners_that_need_regenerating(tmp_path: Path) -> None:
    first, second = two_runners(tmp_path)
    sha = runtime_package().sha256
    first.write_text(first.read_text(encoding="utf-8").replace(sha, "0" * 64), encoding="utf-8")  # an older one
    _change(tmp_path / RUNTIME, "version")
    done = compile_runner(TRIVIA, second)
    assert done.returncode == 0, done.stderr
    assert re.search(r"warning: these runners beside it were generated for another runtime .*: "
                     r"content_pipeline_runner\.py$", done.stderr.strip()), done.stderr


def test_an_earlier_runtimes_files_are_removed_and_files_statewright_did_not_write_are_left(tmp_path: Path) -> None:
    first, _ = two_runners(tmp_path)
    package = tmp_path / RUNTIME
    header = runtime_package().files["engine.py"].split("\n", 3)[:3]
    (package / "retired.py").write_text("\n".join(header) + "\n'''a module an earlier runtime had'''\n",
                                        encoding="utf-8")
    (package / "mine.py").write_text("# my helpers\n", encoding="utf-8")
    (tmp_path / f"{RUNTIME}.py").write_text("# Generated by statewright 0.0.9: the runtime of the runners beside "
                                            "it — do not edit.\n", encoding="utf-8")
    _change(package, "version")
    done = compile_runner(PIPELINE, first)
    assert done.returncode == 0, done.stderr
    assert f"removed what an earlier runtime left beside it: {RUNTIME}/retired.py, {RUNTIME}.py" in done.stderr
    assert f"left alone (compile --check reports them until they are moved out): {RUNTIME}/mine.py" in done.stderr
    assert not (package / "retired.py").exists() and not (tmp_path / f"{RUNTIME}.py").exists()
    assert (package / "mine.py").read_text(encoding="utf-8") == "# my helpers\n"
    assert runtime_package_state(package).message == "holds mine.py, which statewright did not write"


@pytest.mark.parametrize("output", [f"{RUNTIME}.py", f"{RUNTIME}/runner.py"])
def test_the_runner_cannot_take_the_packages_name_or_go_inside_it(tmp_path: Path, output: str) -> None:
    (tmp_path / RUNTIME).mkdir()
    taken = compile_runner(PIPELINE, tmp_path / output)
    assert taken.returncode == 2 and "runtime package" in taken.stderr, taken.stderr
    assert not list(tmp_path.rglob("*.py"))
    assert compile_runner(PIPELINE, tmp_path / output, "--standalone").returncode == 0  # one file: no package


def test_the_older_runtime_option_still_works_for_one_release_and_says_so(tmp_path: Path) -> None:
    inline = compile_runner(PIPELINE, tmp_path / "inline_runner.py", "--runtime", "inline")
    assert inline.returncode == 0 and "warning: --runtime inline is deprecated" in inline.stderr
    assert not (tmp_path / RUNTIME).exists() and "_install_runtime(" in (tmp_path / "inline_runner.py").read_text()
    module = compile_runner(PIPELINE, tmp_path / "module_runner.py", "--runtime", "module")
    assert module.returncode == 0 and "warning: --runtime module is deprecated" in module.stderr
    assert api.check_runtime_package(tmp_path / RUNTIME).current
    both = compile_runner(PIPELINE, tmp_path / "module_runner.py", "--runtime", "module", "--standalone")
    assert both.returncode == 2 and "contradict" in both.stderr


def test_the_python_api_writes_a_runner_and_its_package_or_one_file(tmp_path: Path) -> None:
    machine = statewright.load(PIPELINE)
    runner = machine.compile(tmp_path / "pipeline_runner.py")
    assert api.check_runtime_package(tmp_path / RUNTIME).current
    assert "from statewright_runtime.spec import (" in runner.read_text(encoding="utf-8")
    (tmp_path / "alone").mkdir()
    alone = machine.compile(tmp_path / "alone" / "pipeline_runner.py", standalone=True)
    assert sorted(p.name for p in alone.parent.iterdir()) == ["pipeline_runner.py"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / RUNTIME).write_text("mine\n", encoding="utf-8")
    with pytest.raises(api.RunnerOverwriteError, match="statewright did not write"):
        machine.compile(tmp_path / "mine" / "pipeline_runner.py")
    assert not (tmp_path / "mine" / "pipeline_runner.py").exists()
    with pytest.raises(ValueError, match="runtime package"):
        machine.compile(tmp_path / f"{RUNTIME}.py")
    with pytest.warns(DeprecationWarning, match="standalone=True"):
        machine.compile(tmp_path / "old_runner.py", runtime="inline")
