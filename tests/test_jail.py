"""The jail around std.python and std.shell, tried the way hostile tool code would try it: every escape below
is attempted through a real ToolRegistry (or `statewright run`) and shown to be stopped.

The normal test run is root here; test_the_jail_holds_for_an_unprivileged_runner_too runs this whole module
again as uid 65534, so each escape is tried both ways.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT, cli, read_events
from support.jail import REQUIRE_VARIABLE, jail_problem, jail_required
from support.machines import action, final, go, machine

from statewright.runtime import tools as tools_module
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.engine import Engine
from statewright.runtime.sandbox import (
    SANDBOX_UID,
    Jail,
    SandboxLimits,
    SandboxStopped,
    sandbox_bwrap_options,
    sandbox_run,
)
from statewright.runtime.spec import ToolSpec
from statewright.runtime.tools import ToolError, ToolRegistry

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the jail is Linux-only"),
              pytest.mark.usefixtures("jail")]

SECRET = "sk-jail-test-" + uuid.uuid4().hex


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "workspace"  # the registry makes it, as it makes a run's own


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    return ToolRegistry({"std.shell": ToolSpec("std.shell")}, str(workspace))


def jailed(workspace: Path, **options: Any) -> ToolRegistry:
    return ToolRegistry({"std.python": ToolSpec("std.python", options=options),
                         "std.shell": ToolSpec("std.shell", options=options)}, str(workspace))


def python(tools: ToolRegistry, code: str, **args: Any) -> dict[str, Any]:
    return tools.call("std.python", {"code": code, **args})  # type: ignore[no-any-return]


def report(tools: ToolRegistry, code: str, **args: Any) -> Any:
    """Run code that prints one JSON value last; that value."""
    result = python(tools, code, **args)
    assert result["exit_code"] == 0, result
    return json.loads(result["stdout"].splitlines()[-1])


def processes_named(name: str) -> list[int]:
    """Host processes whose name (/proc/PID/comm, which tool code can set) is `name` and that still run."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as handle:
                comm = handle.read().strip()
            with open(f"/proc/{entry}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if comm == name and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def eventually_none_named(name: str, limit: float = 5.0) -> bool:
    deadline = time.monotonic() + limit
    while processes_named(name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def marker_name() -> str:
    return "sw" + uuid.uuid4().hex[:12]  # at most 15 characters: what comm holds


# ---- the runner's secrets and files -----------------------------------------------------------------------


PROC_SNOOP = r"""
import json, os
seen, refused = [], []
targets = [os.getppid(), 1, RUNNER_PID]
targets += [int(p) for p in os.listdir('/proc') if p.isdigit()]
for pid in targets:
    for what in ('environ', 'cmdline', 'mem'):
        try:
            with open(f'/proc/{pid}/{what}', 'rb') as handle:
                seen.append(handle.read(1 << 20).decode('latin-1'))
        except OSError as exc:
            refused.append(f'{pid}/{what}: {exc.strerror}')
print(json.dumps({'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), 'ppid': os.getppid(),
                  'text': '\n'.join(seen), 'refused': refused}))
"""


def test_tool_code_cannot_read_the_runners_api_keys_through_proc(tools: ToolRegistry,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    result = report(tools, PROC_SNOOP.replace("RUNNER_PID", str(os.getpid())))
    assert SECRET not in json.dumps(result)
    # a pid namespace of its own: no process of the host is there to read, the runner least of all
    assert result["ppid"] in (0, 1)
    assert max(result["pids"]) < 10
    assert "OPENAI_API_KEY" not in result["text"] and "PATH=" in result["text"]  # pid 1's environment is the tool's


def test_tool_code_sees_none_of_the_runners_files(tools: ToolRegistry, tmp_path: Path) -> None:
    private = tmp_path / "private.txt"
    private.write_text(SECRET)
    probes = [str(private), str(tmp_path), tools_module.__file__, os.getcwd(), str(ROOT / "pyproject.toml"),
              os.path.expanduser("~")]
    code = (
        "import json, os\n"
        f"probes = {probes!r}\n"
        "found = {}\n"
        "for path in probes:\n"
        "    try:\n"
        "        found[path] = sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()\n"
        "    except OSError as exc:\n"
        "        found[path] = exc.strerror\n"
        "print(json.dumps(found))\n"
    )
    found = report(tools, code)
    assert found[str(private)] == "No such file or directory"
    assert found[tools_module.__file__] == "No such file or directory"  # the runner's own code
    assert found[str(ROOT / "pyproject.toml")] == "No such file or directory"
    assert SECRET not in json.dumps(found)
    # of the directories around the workspace and the Python installation, only the way to them is there
    assert found[str(tmp_path)] == ["workspace"]
    if found[os.getcwd()] != "No such file or directory":
        bound = [os.path.realpath(p) for p in (tools.workspace, sys.prefix, sys.base_prefix)]
        ways = {os.path.relpath(p, os.getcwd()).split(os.sep)[0] for p in bound
                if p.startswith(os.getcwd().rstrip(os.sep) + os.sep)}
        assert set(found[os.getcwd()]) <= ways


def test_the_system_and_the_python_installation_are_there_read_only(tools: ToolRegistry) -> None:
    found = report(tools, (
        "import json, os, sys\n"
        "print(json.dumps({'prefix': sys.prefix, 'sh': os.path.exists('/bin/sh'),\n"
        "                  'writable': [p for p in ('/usr', '/etc', sys.prefix, sys.base_prefix)\n"
        "                               if os.access(p, os.W_OK)], 'uid': os.getuid()}))\n"))
    assert found["prefix"] == sys.prefix and found["sh"] is True
    assert found["writable"] == []
    if os.geteuid() == 0:
        assert found["uid"] == SANDBOX_UID  # never root, not even for a root runner


def test_a_python_installation_inside_the_workspace_stays_read_only() -> None:
    # `--workspace .` in a project with its .venv: tool code must not change the interpreter that runs the
    # runner (the next import would run its code outside the jail)
    prefix = Path(sys.prefix).resolve()
    if prefix.parent == Path("/") or str(prefix.parent) in ("/usr", "/opt"):
        pytest.skip(f"{prefix} has no parent to use as a workspace here")
    tools = ToolRegistry({}, str(prefix.parent))
    planted = prefix / f"planted-{uuid.uuid4().hex}"
    try:
        outcome = report(tools, f"import json\ntry:\n    open({str(planted)!r}, 'w')\n    print(json.dumps('written'))\n"
                                "except OSError as exc:\n    print(json.dumps(exc.strerror))\n")
        assert outcome == "Read-only file system"
    finally:
        planted.unlink(missing_ok=True)


def test_the_root_directory_is_refused_as_a_workspace() -> None:
    with pytest.raises(ToolError, match="the workspace / is a system directory"):
        python(ToolRegistry({}, "/"), "print(1)")


# ---- the network ------------------------------------------------------------------------------------------


@pytest.fixture
def loopback_server() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on the host's 127.0.0.1 that records every connection it accepts."""
    accepted: list[str] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, address = server.accept()
            except (TimeoutError, OSError):
                continue
            accepted.append(address[0])
            connection.sendall(b"hello from the host\n")
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


CONNECT = (
    "import json, socket\n"
    "try:\n"
    "    with socket.create_connection(('127.0.0.1', PORT), timeout=3) as s:\n"
    "        outcome = s.recv(100).decode()\n"
    "except OSError as exc:\n"
    "    outcome = type(exc).__name__\n"
    "print(json.dumps(outcome))\n"
)


def test_tool_code_cannot_reach_a_server_on_the_hosts_loopback(tools: ToolRegistry,
                                                               loopback_server: tuple[int, list[str]]) -> None:
    port, accepted = loopback_server
    assert report(tools, CONNECT.replace("PORT", str(port))) == "ConnectionRefusedError"  # the jail's own lo
    shell = tools.call("std.shell", {"command": f"exec 3<>/dev/tcp/127.0.0.1/{port} 2>&1 || echo refused; "
                                                "cat /proc/net/dev"})
    assert "eth" not in shell["stdout"] and "wlan" not in shell["stdout"]  # no interface but lo
    assert accepted == []


def test_the_network_option_lets_one_tool_reach_it(workspace: Path, loopback_server: tuple[int, list[str]]) -> None:
    port, accepted = loopback_server
    online = jailed(workspace, network=True)
    assert report(online, CONNECT.replace("PORT", str(port))) == "hello from the host\n"
    assert accepted == ["127.0.0.1"]
    offline = ToolRegistry({"std.shell": ToolSpec("std.shell", options={"network": True})}, str(workspace))
    assert report(offline, CONNECT.replace("PORT", str(port))) == "ConnectionRefusedError"  # std.python: off


# ---- writing outside the workspace ------------------------------------------------------------------------


def test_tool_code_writes_nowhere_but_the_workspace(tools: ToolRegistry, workspace: Path, tmp_path: Path) -> None:
    host_tmp = Path("/tmp") / f"statewright-jail-{uuid.uuid4().hex}"
    targets = ["/etc/planted", "/usr/planted", f"{sys.prefix}/planted", f"{sys.base_prefix}/planted",
               str(tmp_path / "planted"), str(ROOT / "planted"), "/planted", "/proc/sys/kernel/hostname",
               str(host_tmp), str(workspace / "inside.txt")]
    code = (
        "import json\n"
        f"targets = {targets!r}\n"
        "outcome = {}\n"
        "for path in targets:\n"
        "    try:\n"
        "        with open(path, 'w') as handle:\n"
        "            handle.write('planted')\n"
        "        outcome[path] = 'written'\n"
        "    except OSError as exc:\n"
        "        outcome[path] = exc.strerror\n"
        "print(json.dumps(outcome))\n"
    )
    outcome = report(tools, code)
    assert outcome.pop(str(workspace / "inside.txt")) == "written"
    for path in (host_tmp, tmp_path / "planted"):
        assert outcome.pop(str(path)) == "written"  # into the jail's private /tmp ...
        assert not path.exists()  # ... which is not the host's
    # a checkout under /tmp (a fresh clone there) lies inside the jail's private /tmp too: whatever is
    # written there stays in the jail, and never reaches the host
    under_tmp = [p for p in targets[:7] if Path(p).is_relative_to("/tmp")]
    for path in under_tmp:
        outcome.pop(path, None)
    assert "written" not in outcome.values(), outcome
    for path in targets[:7]:
        assert not os.path.exists(path), path
    assert (workspace / "inside.txt").read_text() == "planted"


def test_tmp_is_private_to_each_call_and_capped_at_tmp_mb(workspace: Path) -> None:
    name = f"fill-{uuid.uuid4().hex}"
    tools = jailed(workspace, tmp_mb=4)
    code = (
        "import json\n"
        "written, error = 0, None\n"
        f"with open('/tmp/{name}', 'wb') as handle:\n"
        "    try:\n"
        "        while written < 64 * 1024 * 1024:\n"
        "            handle.write(b'x' * 65536)\n"
        "            handle.flush()\n"
        "            written += 65536\n"
        "    except OSError as exc:\n"
        "        error = exc.errno\n"
        "print(json.dumps([written, error]))\n"
    )
    result = python(tools, code)
    written, error = json.loads(result["stdout"].splitlines()[-1])
    assert error == errno.ENOSPC
    assert 3 * 1024 * 1024 <= written <= 4 * 1024 * 1024
    assert not (Path("/tmp") / name).exists()
    assert report(tools, f"import json, os\nprint(json.dumps(os.path.exists('/tmp/{name}')))") is False


def test_an_older_bubblewrap_without_size_gives_a_tmpdir_in_the_workspace(tools: ToolRegistry,
                                                                          workspace: Path) -> None:
    # a bubblewrap without --size cannot cap a tmpfs: /tmp stays read-only, TMPDIR is the workspace's .tmp
    program = tools.sandbox.program
    assert program is not None
    limits = SandboxLimits(timeout=20, memory_mb=512, max_output=10_000, max_file_mb=8, max_processes=16)
    code = b"import json, os, tempfile\nprint(json.dumps([tempfile.gettempdir(), os.access('/tmp', os.W_OK)]))"
    outcome = asyncio.run(sandbox_run([sys.executable, "-I", "-"], str(workspace), limits,
                                      jail=Jail(program, options=frozenset()), stdin_data=code))
    assert json.loads(outcome["stdout"]) == [str(workspace / ".tmp"), False]
    assert "--size" in asyncio.run(sandbox_bwrap_options(program)) or pytest.skip("this bubblewrap predates --size")


# ---- processes: fork bombs, daemons, the runner's death ---------------------------------------------------


def test_a_fork_bomb_stops_at_max_processes_and_the_call_ends(workspace: Path) -> None:
    name = marker_name()
    tools = jailed(workspace, max_processes=16, timeout=30)
    code = (
        "import json, os, time\n"
        "started, error = 0, None\n"
        "while started < 1000:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        error = exc.errno\n"
        "        break\n"
        "    if pid == 0:\n"
        f"        open('/proc/self/comm', 'w').write('{name}')\n"
        "        time.sleep(600)\n"
        "        os._exit(0)\n"
        "    started += 1\n"
        "print(json.dumps([started, error]), flush=True)\n"
    )
    began = time.monotonic()
    result = python(tools, code)
    took = time.monotonic() - began
    started, error = json.loads(result["stdout"])
    assert error == errno.EAGAIN  # fork failed inside: "Resource temporarily unavailable"
    # The limit counts every process of the user: processes of the same user that an earlier test's jail
    # left exiting free their slots while the bomb runs, so a few more forks than 16 may succeed. Without
    # the limit, all 1,000 would.
    assert 1 <= started <= 32
    assert result["timed_out"] is False and took < 20  # the call ended with its main process ...
    assert eventually_none_named(name)  # ... and took every child with it
    assert subprocess.run(["true"], check=False).returncode == 0  # the host still starts processes


def test_a_setsid_daemon_does_not_outlive_the_call(tools: ToolRegistry, workspace: Path) -> None:
    name = marker_name()
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open('/proc/self/comm', 'w').write('{name}')\n"
        "        while True:\n"
        "            with open('heartbeat', 'a') as handle:\n"
        "                handle.write('.')\n"
        "            time.sleep(0.05)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('parent done')\n"
    )
    began = time.monotonic()
    result = python(tools, code, timeout=20)
    assert result["stdout"] == "parent done\n" and time.monotonic() - began < 10
    assert eventually_none_named(name)
    beats = (workspace / "heartbeat").read_text()
    time.sleep(0.3)
    assert (workspace / "heartbeat").read_text() == beats  # nothing writes any more


def test_killing_the_tool_processes_stops_the_call_without_a_result(tools: ToolRegistry) -> None:
    name = marker_name()

    async def call_then_kill() -> Any:
        call = asyncio.ensure_future(tools.acall("std.python", {"code": (
            f"import time\nopen('/proc/self/comm', 'w').write('{name}')\ntime.sleep(600)\n")}))
        while not processes_named(name):
            await asyncio.sleep(0.05)
        assert tools.kill_processes() == 1
        return await call

    with pytest.raises(SandboxStopped):
        asyncio.run(call_then_kill())
    assert eventually_none_named(name)
    with pytest.raises(SandboxStopped):  # and nothing starts after it
        python(tools, "print(1)")


def test_a_run_killed_on_its_way_out_keeps_its_checkpoint_and_resumes(tmp_path: Path) -> None:
    name = marker_name()
    code = (f"import os, time\nopen('/proc/self/comm', 'w').write('{name}')\n"
            "while not os.path.exists('go'):\n    time.sleep(0.05)\nprint('went')\n")
    spec = machine(action("work", "std.python", lambda scope: {"code": code}, go("done")), final("done"))
    store = CheckpointStore(str(tmp_path / "runs.sqlite"))
    workspace = tmp_path / "workspace"
    engine = Engine(spec, checkpoint=store, workspace=str(workspace))

    async def run_then_stop() -> Any:
        run = asyncio.ensure_future(engine.arun({}, run_id="stopped"))
        while not processes_named(name):
            await asyncio.sleep(0.05)
        assert engine.kill_tool_processes() == 1  # what a SIGTERM handler calls
        return await run

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run_then_stop())
    assert eventually_none_named(name)
    snapshot = store.load("stopped")
    assert snapshot is not None and snapshot.head.status != "failed" and snapshot.head.state == "work"
    (workspace / "go").write_text("")
    resumed = Engine(spec, checkpoint=store, workspace=str(workspace)).run(run_id="stopped", resume=True)
    assert resumed.ok and resumed.outputs["work"]["stdout"] == "went\n"


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_tool_processes_die_with_a_runner_that_is_killed(tmp_path: Path, how: signal.Signals) -> None:
    name, daemon = marker_name(), marker_name()
    spec = tmp_path / "escape.fsm"
    spec.write_text(ACTION_MACHINE)
    code = (f"import os, subprocess, sys, time\nopen('/proc/self/comm', 'w').write('{name}')\n"
            "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); "
            f"open(\"/proc/self/comm\", \"w\").write(\"{daemon}\"); time.sleep(600)'])\n"
            "time.sleep(600)\n")
    runner = subprocess.Popen([sys.executable, "-m", "statewright", "run", str(spec), "--input",
                               f"code={json.dumps(code)}", "--quiet"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (processes_named(name) and processes_named(daemon)):
            assert runner.poll() is None and time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        runner.send_signal(how)
        runner.wait(timeout=30)
        # PR_SET_PDEATHSIG, --die-with-parent, and the end of the pid namespace: the daemon goes too
        assert eventually_none_named(name) and eventually_none_named(daemon)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


# ---- hard links and FIFOs in the workspace ----------------------------------------------------------------


def call_within(seconds: float, tools: ToolRegistry, name: str, args: dict[str, Any]) -> Any:
    """tools.call in a thread: a call that blocks fails the test after `seconds` instead of hanging it."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = tools.call(name, args)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{name}({args}) blocked"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_a_hard_link_to_a_file_outside_is_neither_read_nor_written(tools: ToolRegistry, workspace: Path,
                                                                    tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET)
    os.link(outside, workspace / "linked.txt")
    with pytest.raises(ToolError, match="'linked.txt' has 2 hard links"):
        tools.call("std.read_file", {"path": "linked.txt"})
    with pytest.raises(ToolError, match="'linked.txt' has 2 hard links"):
        tools.call("std.write_file", {"path": "linked.txt", "content": "overwritten"})
    assert outside.read_text() == SECRET
    # and tool code cannot make one: the workspace is its own mount, and nothing else is writable
    made = report(tools, (
        "import json, os, sys\n"
        "outcome = []\n"
        "for source in (sys.executable, '/etc/passwd'):\n"
        "    try:\n"
        "        os.link(source, os.path.basename(source) + '.link')\n"
        "        outcome.append('linked')\n"
        "    except OSError as exc:\n"
        "        outcome.append(errno_name := exc.strerror)\n"
        "print(json.dumps(outcome))\n"))
    assert "linked" not in made


def test_write_file_replaces_a_file_instead_of_writing_into_it(tools: ToolRegistry, workspace: Path) -> None:
    tools.call("std.write_file", {"path": "notes.txt", "content": "first"})
    before = os.stat(workspace / "notes.txt")
    with open(workspace / "notes.txt") as old:
        tools.call("std.write_file", {"path": "notes.txt", "content": "second"})
        assert old.read() == "first"  # the old file is untouched: a new one took its name
    after = os.stat(workspace / "notes.txt")
    assert after.st_ino != before.st_ino and stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode)
    assert (workspace / "notes.txt").read_text() == "second"
    assert sorted(p.name for p in workspace.iterdir()) == ["notes.txt"]  # no temporary file is left


def test_a_fifo_is_refused_at_once_never_blocked_on(tools: ToolRegistry, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    with pytest.raises(ToolError, match=r"'pipe' is a FIFO \(named pipe\), not a regular file"):
        call_within(5, tools, "std.read_file", {"path": "pipe"})
    with pytest.raises(ToolError, match=r"'pipe' is a FIFO"):
        call_within(5, tools, "std.write_file", {"path": "pipe", "content": "x"})
    # one the tool code made itself, too
    assert python(tools, "import os; os.mkfifo('made-inside')")["exit_code"] == 0
    with pytest.raises(ToolError, match=r"'made-inside' is a FIFO"):
        call_within(5, tools, "std.read_file", {"path": "made-inside"})


def test_sockets_and_devices_are_refused(tools: ToolRegistry, workspace: Path) -> None:
    here = os.getcwd()
    os.chdir(workspace)  # a socket's path must be short
    try:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind("sock")
    finally:
        os.chdir(here)
    with pytest.raises(ToolError, match="'sock' is a socket, not a regular file"):
        call_within(5, tools, "std.read_file", {"path": "sock"})
    listener.close()
    if os.geteuid() == 0:
        os.mknod(workspace / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
        with pytest.raises(ToolError, match="'zero' is a device, not a regular file"):
            call_within(5, tools, "std.read_file", {"path": "zero"})


def test_what_the_file_tools_make_belongs_to_the_user_tool_code_runs_as(tools: ToolRegistry,
                                                                          workspace: Path) -> None:
    tools.call("std.write_file", {"path": "a/b/c.txt", "content": "x"})
    expected = SANDBOX_UID if os.geteuid() == 0 else os.geteuid()
    for path in (workspace, workspace / "a", workspace / "a" / "b", workspace / "a" / "b" / "c.txt"):
        assert os.stat(path).st_uid == expected, path
    changed = tools.call("std.shell", {"command": "echo y >> a/b/c.txt && mkdir a/b/d && cat a/b/c.txt"})
    assert changed["stdout"] == "xy\n"


# ---- through `statewright run` ----------------------------------------------------------------------------


ESCAPES = r'''
import json, os, socket
found = {"keys": [], "wrote": [], "connected": False}
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + [str(os.getppid())]:
    try:
        found["keys"].append(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
    except OSError:
        pass
found["keys"].append(json.dumps(dict(os.environ)))
for path in ("/etc/planted", HOST_PATH):
    try:
        open(path, "w").write("x")
        found["wrote"].append(path)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    found["connected"] = True
except OSError:
    pass
print(json.dumps(found))
'''

ACTION_MACHINE = '''
machine escape {
    input code: str
    start state attempt {
        call std.python(code = code)
        when output.exit_code == 0 -> done
        otherwise -> failed
    }
    final state done { result "{{ attempt.output.stdout }}" }
    final state failed
}
'''


def test_statewright_run_keeps_an_action_states_code_in_the_jail(tmp_path: Path,
                                                                loopback_server: tuple[int, list[str]]) -> None:
    port, accepted = loopback_server
    spec = tmp_path / "escape.fsm"
    spec.write_text(ACTION_MACHINE)
    host_path = tmp_path / "planted-by-the-tool"
    code = ESCAPES.replace("HOST_PATH", repr(str(host_path))).replace("PORT", str(port))
    trace = tmp_path / "trace.jsonl"
    done = cli("run", str(spec), "--input", f"code={json.dumps(code)}", "--trace", str(trace),
               "--trace-content", cwd=tmp_path, env={"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    found = json.loads(result["result"])
    assert SECRET not in done.stdout and SECRET not in trace.read_text()
    assert not any("OPENAI_API_KEY" in text for text in found["keys"])
    assert "/etc/planted" not in found["wrote"] and not host_path.exists()  # (it wrote to its private /tmp)
    assert found["connected"] is False and accepted == []
    assert "unsafe_tools" not in read_events(trace)[0]


def test_statewright_run_refuses_code_without_bubblewrap_unless_unsafe_tools(tmp_path: Path) -> None:
    spec = tmp_path / "escape.fsm"
    spec.write_text(ACTION_MACHINE)
    no_bwrap = tmp_path / "bin"  # a PATH that holds the interpreter and nothing else
    no_bwrap.mkdir()
    os.symlink(sys.executable, no_bwrap / "python")
    env = {"PATH": str(no_bwrap)}
    code = "import os; print(os.environ['TMPDIR'])"
    refused = cli("run", str(spec), "--input", f"code={json.dumps(code)}", cwd=tmp_path, env=env)
    assert refused.returncode == 1
    failure = json.loads(refused.stdout)["failure"]
    assert failure["kind"] == "tool"
    assert "install the bubblewrap package (apt-get install bubblewrap)" in failure["message"]
    assert "--unsafe-tools" in failure["message"]

    trace = tmp_path / "trace.jsonl"
    allowed = cli("run", str(spec), "--input", f"code={json.dumps(code)}", "--unsafe-tools", "--trace",
                  str(trace), cwd=tmp_path, env=env)
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["result"].strip().endswith(os.path.join("workspace", ".tmp"))  # no jail
    start = read_events(trace)[0]
    assert start["event"] == "run_start" and start["unsafe_tools"] is True


def test_unsafe_tools_do_not_turn_the_jail_off_where_it_runs(tmp_path: Path) -> None:
    spec = tmp_path / "escape.fsm"
    spec.write_text(ACTION_MACHINE)
    code = "import os; print(os.environ['TMPDIR'])"
    done = cli("run", str(spec), "--input", f"code={json.dumps(code)}", "--unsafe-tools", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"].strip() == "/tmp"  # still jailed


# ---- where the jail is required, and for an unprivileged runner --------------------------------------------


def test_the_jail_runs_where_it_is_required() -> None:
    """CI sets STATEWRIGHT_REQUIRE_BWRAP=1: there, a missing bubblewrap fails instead of skipping the jail tests."""
    if not jail_required():
        pytest.skip(f"{REQUIRE_VARIABLE} is not set")
    assert jail_problem() is None


def _blocked_ancestor(path: str) -> str | None:
    """The highest directory above `path` that another user could not search (mode without o+x)."""
    parts = Path(path).resolve().parts
    for depth in range(2, len(parts)):
        ancestor = os.path.join(*parts[:depth])
        if not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return ancestor
    return None


def _unprivileged_preexec(needed: list[str]) -> Any:
    """As root, between fork and exec: a private mount namespace in which every directory in `needed`
    can be reached by uid 65534 (a tmpfs over each unsearchable ancestor, the needed directories bound
    back inside it) — only so that the interpreter and this checkout can run as that user at all."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    blocked: dict[str, list[str]] = {}
    for path in needed:
        ancestor = _blocked_ancestor(path)
        if ancestor is not None:
            blocked.setdefault(ancestor, []).append(os.path.realpath(path))

    def setup() -> None:
        def check(result: int) -> None:
            if result != 0:
                raise OSError(ctypes.get_errno(), "mount")

        check(libc.unshare(0x00020000))
        check(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None))
        for ancestor, paths in blocked.items():
            fds = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in paths]
            check(libc.mount(b"tmpfs", ancestor.encode(), b"tmpfs", 0, b"mode=0755"))
            for fd, path in zip(fds, paths):
                os.makedirs(path, exist_ok=True)
                check(libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, 0x1000 | 0x4000, None))
                os.close(fd)

    return setup


def test_the_jail_holds_for_an_unprivileged_runner_too(tmp_path: Path) -> None:
    """Every test above again, in a runner that runs as uid 65534 instead of root."""
    if os.geteuid() != 0:
        pytest.skip("this run is already unprivileged")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed, so this test cannot run the jail tests as uid 65534")
    scratch = Path("/tmp") / f"statewright-unprivileged-{uuid.uuid4().hex}"
    scratch.mkdir(mode=0o755)
    try:
        os.chown(scratch, SANDBOX_UID, SANDBOX_UID)
        needed = [sys.base_prefix, sys.prefix, str(ROOT), str(scratch)]
        env = {"PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"]),
               "HOME": str(scratch), "TMPDIR": str(scratch), "LANG": "C.UTF-8", REQUIRE_VARIABLE: "1",
               "PYTHONDONTWRITEBYTECODE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        done = subprocess.run(
            [setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", sys.executable, "-m",
             "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={scratch / 'base'}", "-k", "not unprivileged",
             str(Path(__file__))],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
            preexec_fn=_unprivileged_preexec(needed))
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
        # STATEWRIGHT_REQUIRE_BWRAP=1 there: a jail that did not run would fail, not skip
        assert " passed" in done.stdout and "failed" not in done.stdout and "skipped" not in done.stdout
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
