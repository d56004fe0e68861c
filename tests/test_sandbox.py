"""The sandbox around standard tools: process limits, a clean environment, and the workspace boundary.

std.python and std.shell run in the bubblewrap jail here (tests/test_jail.py tries to break out of it);
these tests are about the limits every call has, jailed or not, and about the file tools."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from support.jail import need_jail

from statewright.runtime.spec import ToolSpec
from statewright.runtime.tools import ToolError, ToolRegistry

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the tool sandbox is POSIX-only")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    # made by the registry, as a run's own workspace is: then it belongs to the user tool code runs as
    return tmp_path / "workspace"


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    return ToolRegistry({}, str(workspace))


def python(tools: ToolRegistry, code: str, **args: object) -> dict:
    need_jail()
    return tools.call("std.python", {"code": code, **args})


def process_is_gone(pid: int) -> bool:
    """True once the process no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def processes_with(marker: str) -> list[int]:
    """The host's processes whose command line holds `marker` (a jailed process has another pid inside)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read() and not process_is_gone(int(entry)):
                        found.append(int(entry))
            except OSError:
                continue
    return found


def wait_until_no_process_has(marker: str) -> bool:
    for _ in range(100):
        if not processes_with(marker):
            return True
        time.sleep(0.05)
    return False


def wait_until_gone(pid: int) -> bool:
    # SIGKILL is delivered asynchronously; give the kernel a moment instead of asserting on timing.
    for _ in range(100):
        if process_is_gone(pid):
            return True
        time.sleep(0.05)
    return False


# ---- std.python: limits ---------------------------------------------------------------------------------


def test_code_that_runs_forever_is_killed_at_the_timeout(tools: ToolRegistry) -> None:
    result = python(tools, "import time\nprint('started', flush=True)\nwhile True: time.sleep(1)", timeout=1)
    assert result["timed_out"] is True
    assert result["exit_code"] == -signal.SIGKILL
    assert result["stdout"] == "started\n"  # output printed before the kill is kept


def test_the_timeout_option_is_the_default_for_every_call(workspace: Path) -> None:
    tools = ToolRegistry({"std.python": ToolSpec("std.python", options={"timeout": 1})}, str(workspace))
    assert python(tools, "import time; time.sleep(60)")["timed_out"] is True


def test_a_call_cannot_ask_for_more_than_max_timeout(workspace: Path) -> None:
    options = {"timeout": 0.5, "max_timeout": 1}
    tools = ToolRegistry({"std.python": ToolSpec("std.python", options=options)}, str(workspace))
    assert python(tools, "import time; time.sleep(60)", timeout=3600)["timed_out"] is True


def test_timeout_kills_the_whole_process_group(tools: ToolRegistry, workspace: Path) -> None:
    marker = f"statewright-child-{os.getpid()}-{time.monotonic_ns()}"
    code = (
        "import subprocess, time\n"
        f"child = subprocess.Popen(['sh', '-c', 'sleep 600; : {marker}'])\n"
        "time.sleep(600)\n"
    )
    result = python(tools, code, timeout=1)
    assert result["timed_out"] is True
    assert wait_until_no_process_has(marker)


def test_allocating_ten_gigabytes_fails_under_the_memory_limit(tools: ToolRegistry) -> None:
    result = python(tools, "block = bytearray(10 * 1024 ** 3)\nprint('allocated')")
    assert result["exit_code"] != 0
    assert "MemoryError" in result["stderr"]
    assert "allocated" not in result["stdout"]
    assert result["timed_out"] is False


def test_printing_100_mb_is_cut_at_the_output_cap_and_the_process_killed(tools: ToolRegistry) -> None:
    result = python(tools, "import sys\nsys.stdout.write('x' * 100_000_000)\nprint('finished', file=sys.stderr)")
    marker = "\n[output truncated at 1000000 bytes]"
    assert result["stdout"].endswith(marker)
    assert len(result["stdout"]) == 1_000_000 + len(marker)
    assert result["exit_code"] == -signal.SIGKILL
    assert "finished" not in result["stderr"]
    assert result["timed_out"] is False


def test_the_output_cap_is_an_option(workspace: Path) -> None:
    tools = ToolRegistry({"std.python": ToolSpec("std.python", options={"max_output": 100})}, str(workspace))
    result = python(tools, "print('y' * 5000)")
    assert result["stdout"] == "y" * 100 + "\n[output truncated at 100 bytes]"


def test_writing_a_file_larger_than_max_file_mb_fails(workspace: Path) -> None:
    tools = ToolRegistry({"std.python": ToolSpec("std.python", options={"max_file_mb": 1})}, str(workspace))
    result = python(tools, "open('big.bin', 'wb').write(b'0' * 5_000_000)")
    assert result["exit_code"] != 0
    assert (workspace / "big.bin").stat().st_size <= 1024 * 1024


def test_resource_limits_are_set_and_cannot_be_raised_by_the_code(workspace: Path) -> None:
    options = {"memory_mb": 256, "timeout": 5, "max_file_mb": 8}
    tools = ToolRegistry({"std.python": ToolSpec("std.python", options=options)}, str(workspace))
    code = (
        "import json, resource\n"
        "limits = {name: resource.getrlimit(getattr(resource, name))\n"
        "          for name in ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_FSIZE')}\n"
        "try:\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "    raised = True\n"
        "except (ValueError, OSError):\n"
        "    raised = False\n"
        "print(json.dumps({'limits': limits, 'raised': raised}))\n"
    )
    report = json.loads(python(tools, code)["stdout"])
    assert report["limits"]["RLIMIT_AS"] == [256 * 1024 * 1024] * 2
    assert report["limits"]["RLIMIT_FSIZE"] == [8 * 1024 * 1024] * 2
    soft_cpu, hard_cpu = report["limits"]["RLIMIT_CPU"]
    assert 5 < soft_cpu < hard_cpu <= 10
    assert report["raised"] is False  # tool code is never root, not even when the runner is


def test_code_larger_than_an_argv_string_still_runs(tools: ToolRegistry) -> None:
    padding = "# " + "p" * 1000 + "\n"
    code = padding * 300 + "print('ran')"  # ~300 KB: more than one argv string may hold on Linux
    assert python(tools, code)["stdout"] == "ran\n"


# ---- std.python: environment and working directory -----------------------------------------------------


def test_secrets_in_the_parent_environment_never_reach_tool_code(
    tools: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("MY_SECRET_TOKEN", "token-for-the-test")
    result = python(tools, "import json, os\nprint(json.dumps(dict(os.environ)))")
    seen = json.loads(result["stdout"])
    assert "OPENAI_API_KEY" not in seen and "MY_SECRET_TOKEN" not in seen
    assert set(seen) <= {"PATH", "LANG", "HOME", "TMPDIR", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE", "LC_CTYPE",
                         "PWD"}  # PWD: bubblewrap sets it to the workspace


def test_code_runs_in_the_workspace_with_home_there_and_a_private_tmp(tools: ToolRegistry, workspace: Path) -> None:
    code = "import json, os, tempfile\nprint(json.dumps([os.getcwd(), os.environ['HOME'], tempfile.gettempdir()]))"
    cwd, home, tmp = json.loads(python(tools, code)["stdout"])
    root = os.path.realpath(workspace)
    assert cwd == root and home == root
    assert tmp == "/tmp"  # the jail's own, not the host's (tests/test_jail.py)


def test_a_module_rewritten_within_the_same_second_runs_as_its_new_version(tools: ToolRegistry,
                                                                            workspace: Path) -> None:
    # same size, same second: a bytecode cache checked by mtime and size would run the old code
    tools.call("std.write_file", {"path": "answer.py", "content": "VALUE = 1\n"})
    assert python(tools, "import answer; print(answer.VALUE)")["stdout"] == "1\n"
    tools.call("std.write_file", {"path": "answer.py", "content": "VALUE = 2\n"})
    assert python(tools, "import answer; print(answer.VALUE)")["stdout"] == "2\n"
    assert not list(workspace.rglob("__pycache__"))
    assert not list(workspace.rglob("*.pyc"))


def test_code_can_import_a_module_it_wrote_to_the_workspace(tools: ToolRegistry) -> None:
    tools.call("std.write_file", {"path": "solution.py", "content": "def add(a, b):\n    return a + b\n"})
    result = python(tools, "from solution import add\nassert add(2, 3) == 5\nprint('ok')")
    assert result == {"exit_code": 0, "stdout": "ok\n", "stderr": "", "timed_out": False}


def test_a_failing_script_is_a_result_not_an_error(tools: ToolRegistry) -> None:
    result = python(tools, "raise SystemExit(3)")
    assert result["exit_code"] == 3 and result["timed_out"] is False


# ---- std.shell ---------------------------------------------------------------------------------------------


@pytest.fixture
def shell_tools(workspace: Path) -> ToolRegistry:
    return ToolRegistry({"std.shell": ToolSpec("std.shell")}, str(workspace))


def test_shell_runs_in_the_sandbox_too(shell_tools: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    need_jail()
    monkeypatch.setenv("MY_SECRET_TOKEN", "token-for-the-test")
    result = shell_tools.call("std.shell", {"command": "env; exit 4"})
    assert result["exit_code"] == 4
    assert "MY_SECRET_TOKEN" not in result["stdout"]
    assert shell_tools.call("std.shell", {"command": "sleep 60", "timeout": 1})["timed_out"] is True


def test_background_processes_do_not_outlive_the_call(shell_tools: ToolRegistry, workspace: Path) -> None:
    need_jail()
    marker = f"statewright-background-{os.getpid()}-{time.monotonic_ns()}"
    result = shell_tools.call("std.shell", {"command": f"sh -c 'sleep 600; : {marker}' & echo started"})
    assert result == {"exit_code": 0, "stdout": "started\n", "stderr": "", "timed_out": False}
    assert wait_until_no_process_has(marker)


# ---- file tools: the workspace boundary -------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding a file the tools must never reach."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("outside the workspace")
    return path


@pytest.mark.parametrize("path", ["../../etc/passwd", "../outside/secret.txt", "notes/../../outside/secret.txt"])
def test_paths_that_climb_out_are_refused(tools: ToolRegistry, outside: Path, path: str) -> None:
    with pytest.raises(ToolError, match="leaves the workspace"):
        tools.call("std.read_file", {"path": path})


@pytest.mark.parametrize("tool,args", [
    ("std.read_file", {"path": "/etc/passwd"}),
    ("std.write_file", {"path": "/tmp/planted.txt", "content": "x"}),
    ("std.list_files", {"path": "/etc"}),
])
def test_absolute_paths_are_refused(tools: ToolRegistry, tool: str, args: dict) -> None:
    with pytest.raises(ToolError, match="absolute path; paths are relative to the workspace"):
        tools.call(tool, args)


def test_a_symlink_pointing_outside_is_refused(tools: ToolRegistry, workspace: Path, outside: Path) -> None:
    (workspace / "passwd").symlink_to("/etc/passwd")
    (workspace / "escape").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ToolError, match="symlink that points outside"):
        tools.call("std.read_file", {"path": "passwd"})
    with pytest.raises(ToolError, match="symlink that points outside"):
        tools.call("std.read_file", {"path": "escape/secret.txt"})
    with pytest.raises(ToolError, match="outside the workspace"):
        tools.call("std.write_file", {"path": "escape/planted.txt", "content": "x"})
    with pytest.raises(ToolError, match="outside the workspace"):
        tools.call("std.list_files", {"path": "escape"})
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert "passwd" not in tools.call("std.list_files", {})


def test_a_symlink_that_stays_inside_is_followed(tools: ToolRegistry, workspace: Path) -> None:
    (workspace / "data").mkdir()
    (workspace / "data" / "real.txt").write_text("inside")
    (workspace / "alias.txt").symlink_to(workspace / "data" / "real.txt")
    assert tools.call("std.read_file", {"path": "alias.txt"}) == "inside"


def test_write_then_read_within_the_workspace(tools: ToolRegistry, workspace: Path) -> None:
    message = tools.call("std.write_file", {"path": "notes/day 1/todo.txt", "content": "buy milk\n"})
    assert message == "wrote 9 bytes to notes/day 1/todo.txt"
    assert (workspace / "notes" / "day 1" / "todo.txt").read_text() == "buy milk\n"
    assert tools.call("std.read_file", {"path": "notes/day 1/todo.txt"}) == "buy milk\n"
    assert tools.call("std.read_file", {"path": "./notes/../notes/day 1/todo.txt"}) == "buy milk\n"


def test_reading_what_is_not_a_file_says_what_to_do_instead(tools: ToolRegistry, workspace: Path) -> None:
    (workspace / "docs").mkdir()
    with pytest.raises(ToolError, match="no file 'missing.txt' in the workspace; std.list_files"):
        tools.call("std.read_file", {"path": "missing.txt"})
    with pytest.raises(ToolError, match="'docs' is a directory; list it with std.list_files"):
        tools.call("std.read_file", {"path": "docs"})
    (workspace / "image.bin").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(ToolError, match="not UTF-8 text"):
        tools.call("std.read_file", {"path": "image.bin"})


def test_file_sizes_are_capped_by_max_bytes(workspace: Path) -> None:
    options = {"max_bytes": 10}
    tools = ToolRegistry({"std.read_file": ToolSpec("std.read_file", options=options),
                          "std.write_file": ToolSpec("std.write_file", options=options)}, str(workspace))
    with pytest.raises(ToolError, match="writes at most 10 bytes"):
        tools.call("std.write_file", {"path": "long.txt", "content": "x" * 11})
    assert not (workspace / "long.txt").exists()
    (workspace / "long.txt").write_text("x" * 11)
    with pytest.raises(ToolError, match="larger than 10 bytes"):
        tools.call("std.read_file", {"path": "long.txt"})


def test_list_files_returns_sorted_relative_file_paths(tools: ToolRegistry, workspace: Path) -> None:
    for path in ["b.txt", "a/z.txt", "a/b/c.txt", "a.txt"]:
        tools.call("std.write_file", {"path": path, "content": "x"})
    python(tools, "import tempfile; tempfile.NamedTemporaryFile(delete=False).write(b'scratch')")
    assert tools.call("std.list_files", {}) == ["a.txt", "a/b/c.txt", "a/z.txt", "b.txt"]
    assert tools.call("std.list_files", {"path": "a"}) == ["a/b/c.txt", "a/z.txt"]
    with pytest.raises(ToolError, match="'b.txt' is a file"):
        tools.call("std.list_files", {"path": "b.txt"})


def test_list_files_caps_the_number_of_paths(workspace: Path) -> None:
    tools = ToolRegistry({"std.list_files": ToolSpec("std.list_files", options={"max_files": 3})},
                         str(workspace))
    for index in range(5):
        (workspace / f"f{index}.txt").write_text("x")
    assert tools.call("std.list_files", {}) == ["f0.txt", "f1.txt", "f2.txt",
                                                "[listing truncated: 3 of 5 files shown]"]


# ---- where the jail cannot run ----------------------------------------------------------------------------


@pytest.mark.parametrize("tool,args", [("std.python", {"code": "print(1)"}), ("std.shell", {"command": "echo 1"})])
def test_without_bubblewrap_code_running_tools_refuse_naming_the_package(workspace: Path, tool: str,
                                                                        args: dict) -> None:
    tools = ToolRegistry({"std.shell": ToolSpec("std.shell")}, str(workspace), jail_program="/nonexistent/bwrap")
    with pytest.raises(ToolError) as caught:
        tools.call(tool, args)
    message = str(caught.value)
    assert message.startswith(f"{tool}: code runs only inside the jail, and the jail cannot run here: ")
    assert "install the bubblewrap package (apt-get install bubblewrap)" in message
    assert "--unsafe-tools" in message
    assert caught.value.tool == tool
    assert tools.call("std.write_file", {"path": "a.txt", "content": "x"})  # the file tools do not need it


def test_unsafe_tools_run_code_unconfined_where_the_jail_cannot_run(workspace: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SECRET_TOKEN", "token-for-the-test")
    tools = ToolRegistry({"std.shell": ToolSpec("std.shell")}, str(workspace), unsafe_tools=True,
                         jail_program="/nonexistent/bwrap")
    code = "import json, os, tempfile\nprint(json.dumps([os.getpid(), dict(os.environ), tempfile.gettempdir()]))"
    result = tools.call("std.python", {"code": code})
    pid, environment, tmp = json.loads(result["stdout"])
    assert "MY_SECRET_TOKEN" not in environment  # still a clean environment ...
    assert tmp == str(workspace / ".tmp")  # ... but no private /tmp, no jail
    assert wait_until_gone(pid)
    result = tools.call("std.shell", {"command": "sleep 600 & echo $! > bg.pid; echo started"})
    assert result["stdout"] == "started\n"
    assert wait_until_gone(int((workspace / "bg.pid").read_text()))  # its group still dies with the call
