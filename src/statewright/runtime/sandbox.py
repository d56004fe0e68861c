"""Running tool code (std.python, std.shell): in a bubblewrap jail, under resource limits, killed whole.

A jailed call runs `bwrap` with new user, pid, ipc, uts, cgroup and network namespaces. Inside it sees the
system directories and the Python installation read-only, a fresh /proc and /dev, a private size-capped
/tmp, and the workspace as the only writable place — nothing else of the machine it runs on: not the
runner's files, not its home, not the directory the run started from. A runner that runs as root drops to
SANDBOX_UID before bubblewrap starts, so tool code never holds root's privileges and process limits hold
(the kernel never applies RLIMIT_NPROC to uid 0, not even inside a user namespace). docs/tools.md says
exactly what the jail does and what it does not do.
"""

from __future__ import annotations

import asyncio
import ctypes
import math
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, MutableSet
from dataclasses import dataclass
from typing import Any

# The package that provides `bwrap` on Debian and Ubuntu (and under that name on most other distributions).
SANDBOX_PACKAGE = "bubblewrap"
# Who tool code runs as when the runner is root: "nobody", on every Linux distribution.
SANDBOX_UID = 65534
SANDBOX_GID = 65534
# Without the jail, tool code gets its own temporary directory inside the workspace, hidden from
# std.list_files; in the jail it gets a private /tmp instead.
SANDBOX_TMP_DIR = ".tmp"
_READ_CHUNK = 65536
# seconds a killed call's pipes get to deliver what is already in them
_DRAIN_GRACE = 0.5
# The system, as tool code needs it to run; bound read-only. A top-level symlink (/bin -> usr/bin on merged
# /usr systems) is recreated as the same symlink.
_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Where systemd-resolved keeps the resolv.conf that /etc/resolv.conf points to: bound when the network is on.
_RESOLVER_DIR = "/run/systemd/resolve"
# Options of newer bubblewraps the jail uses where the installed one has them: `--size` (a capped private
# /tmp; without it TMPDIR is the workspace's .tmp directory) and `--disable-userns` (no nested user
# namespaces).
_OPTIONAL = ("--size", "--disable-userns")
_HELP_OPTION = re.compile(r"^\s+(--[a-z0-9-]+)", re.MULTILINE)
# Processes bubblewrap itself adds to a call: itself, and the reaper that is pid 1 inside.
_JAIL_PROCESSES = 2
# Where a root runner stages what SANDBOX_UID could not reach on its own (a Python installation under
# /root, a workspace under a 0700 directory): a tmpfs mounted here in the runner's child, in a private
# mount namespace that only that child and the jail see.
_STAGE_ROOT = "/tmp"
# Linux constants for the calls made through libc between fork and exec
_CLONE_NEWNS = 0x00020000
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_PR_SET_PDEATHSIG = 1


class SandboxError(Exception):
    """Tool code could not be started: the jail is missing or broken, or the process did not start."""


class SandboxStopped(KeyboardInterrupt):
    """The runner is stopping (`Sandbox.kill`, on SIGTERM): the call was killed and has no result.

    A KeyboardInterrupt, so that it ends the run the way Ctrl-C does — past the core, which never records
    a result for the step: the checkpoint stays at the last transition, and --resume runs the step again."""


@dataclass(frozen=True)
class SandboxLimits:
    timeout: float  # wall-clock seconds
    memory_mb: int
    max_output: int  # bytes kept of stdout and of stderr each
    max_file_mb: int
    max_processes: int


@dataclass(frozen=True)
class Jail:
    """How a call is jailed: the bubblewrap program, whether the network is on, the size of /tmp, and which
    of the newer bubblewrap options that program has (see _OPTIONAL)."""

    program: str
    network: bool = False
    tmp_bytes: int = 64 * 1024 * 1024
    options: frozenset[str] = frozenset(_OPTIONAL)


def sandbox_find_bwrap() -> str | None:
    """The bubblewrap program on PATH, or None (never on anything but Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    return shutil.which("bwrap")


def sandbox_drops_privileges() -> bool:
    """True when tool code must not run as this process's user: root runs it as SANDBOX_UID."""
    return os.name == "posix" and os.geteuid() == 0


def sandbox_give_to_tool_user(path: str) -> None:
    """Make `path` (a workspace, or what a file tool created in it) owned by the user tool code runs as,
    so that code can change it. Nothing to do unless this process is root."""
    if sandbox_drops_privileges():
        os.chown(path, SANDBOX_UID, SANDBOX_GID, follow_symlinks=False)


def sandbox_environment(workspace: str, tmpdir: str) -> dict[str, str]:
    """A fresh environment with nothing taken from the parent: API keys and tokens never reach tool code.
    It is also bubblewrap's own environment, so nothing inside the jail (its pid 1 included) holds more."""
    interpreter_dir = os.path.dirname(sys.executable)
    return {
        "PATH": os.pathsep.join([interpreter_dir, "/usr/local/bin", "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "HOME": workspace,
        "TMPDIR": tmpdir,
        "PYTHONIOENCODING": "utf-8",
        # no bytecode cache in the workspace: a module rewritten within the same second (and at the same
        # size) would otherwise run as its stale cached version
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def sandbox_python_roots() -> list[str]:
    """The directories of the running Python installation that tool code needs (read-only): its prefix and
    base prefix (a virtual environment's and the interpreter's own), minus what the system paths cover."""
    # Only the prefixes: guessing more from where the interpreter's file lies could bind a whole home
    # directory. An interpreter outside them fails the jail's trial run, with a message saying so.
    candidates = [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix]
    roots: list[str] = []
    for candidate in candidates:
        real = os.path.realpath(candidate) if candidate else ""
        if not real or real == os.sep or not os.path.isdir(real) or _under(real, _SYSTEM_PATHS):
            continue
        if real not in roots:
            roots.append(real)
    # a root inside another one is already bound with it
    return [root for root in roots if not _under(root, tuple(r for r in roots if r != root))]


def _under(path: str, parents: tuple[str, ...]) -> bool:
    return any(path == parent or path.startswith(parent.rstrip(os.sep) + os.sep) for parent in parents)


def sandbox_jail_argv(jail: Jail, workspace: str, command: list[str],
                      sources: dict[str, str] | None = None) -> list[str]:
    """The bubblewrap command line that runs `command` in `workspace` inside the jail.

    `sources` maps a path bound into the jail to where bubblewrap finds it, when that differs (the staged
    copies of a root runner); the jail sees every path at its own name either way."""
    sources = sources or {}
    argv = [jail.program, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--hostname", "statewright"]
    if "--disable-userns" in jail.options:
        argv.append("--disable-userns")
    if jail.network:
        argv.append("--share-net")
    # (destination, arguments) of every mount; made parents first, so a path inside another bound one
    # (a virtual environment inside the workspace, say) lies on top of it, read-only stays read-only
    mounts: list[tuple[str, list[str]]] = [("/proc", ["--proc", "/proc"]), ("/dev", ["--dev", "/dev"])]
    if "--size" in jail.options:
        mounts.append(("/tmp", ["--size", str(jail.tmp_bytes), "--tmpfs", "/tmp"]))
    else:
        # no way to cap a tmpfs: /tmp stays read-only and empty, TMPDIR is the workspace's .tmp instead
        mounts.append(("/tmp", ["--dir", "/tmp"]))
    for path in _SYSTEM_PATHS:
        if os.path.islink(path):
            mounts.append((path, ["--symlink", os.readlink(path), path]))
        elif os.path.isdir(path):
            mounts.append((path, ["--ro-bind", path, path]))
    if jail.network and os.path.isdir(_RESOLVER_DIR):
        mounts.append((_RESOLVER_DIR, ["--ro-bind", _RESOLVER_DIR, _RESOLVER_DIR]))
    mounts.append((workspace, ["--bind", sources.get(workspace, workspace), workspace]))
    for root in sandbox_python_roots():
        mounts.append((root, ["--ro-bind", sources.get(root, root), root]))
    for _, arguments in sorted(mounts, key=lambda mount: len(mount[0].rstrip(os.sep).split(os.sep))):
        argv += arguments
    # the jail's root is bubblewrap's own tmpfs, which has no size cap: nothing may be written there
    argv += ["--remount-ro", "/", "--chdir", workspace, "--", *command]
    return argv


def _process_ceiling(uid: int, extra: int) -> int:
    """RLIMIT_NPROC counts every process and thread of a user, not of a call, so the ceiling is what `uid`
    runs now plus `extra`. Counting needs /proc; without it the ceiling is `extra` alone."""
    count = 0
    try:
        with os.scandir("/proc") as entries:
            for entry in entries:
                if not entry.name.isdigit():
                    continue
                try:
                    if entry.stat().st_uid == uid:
                        count += len(os.listdir(os.path.join(entry.path, "task")))
                except OSError:
                    continue  # the process ended while we counted
    except OSError:
        pass
    return count + extra


def _libc() -> Any:
    """libc's unshare, mount and prctl, set up in the parent so the child only calls them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def _stage(libc: Any, stage: tuple[tuple[bytes, bytes], ...]) -> None:
    """In the child, as root: a private mount namespace where each (source, staged) pair is bound at
    `staged`, on a fresh tmpfs that uid SANDBOX_UID can search — it can reach nothing else of the source's
    parents. The sources are opened before the tmpfs hides anything, then bound through /proc/self/fd."""
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None),
                   "making the mounts private")
    fds = [os.open(source, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for source, _ in stage]
    _check(libc.mount(b"statewright", _STAGE_ROOT.encode(), b"tmpfs",
                              _MS_NOSUID | _MS_NODEV, b"mode=0755,size=64k"), "mounting the stage")
    for fd, (_, staged) in zip(fds, stage):
        os.mkdir(staged, 0o755)
        _check(libc.mount(f"/proc/self/fd/{fd}".encode(), staged, None,
                          _MS_BIND | _MS_REC, None), "staging a bind mount")
        os.close(fd)


def _child_setup(limits: SandboxLimits, workspace: str, *, jailed: bool) -> tuple[Callable[[], None], dict[str, str]]:
    """The function the child runs between fork and exec, and the staged sources the jail's command line
    must name. Everything is computed here, in the parent, so the child does as little as possible.

    In order, in the child: stage what the jail binds (root only), set the resource limits, drop to
    SANDBOX_UID (root only: setgroups, setgid, setuid), then ask for SIGKILL when the runner dies
    (PR_SET_PDEATHSIG — after setuid, which clears it) and check the runner did not die already."""
    import resource  # POSIX only: imported here so the module still loads where tools are never run

    drop = jailed and sandbox_drops_privileges()
    linux = sys.platform.startswith("linux")
    libc = _libc() if linux else None
    wanted = [
        # soft == hard, so the tool code cannot raise its own limits again
        (resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024, limits.memory_mb * 1024 * 1024),
        # CPU time a little above the wall timeout: SIGXCPU at the soft limit, SIGKILL at the hard one
        (resource.RLIMIT_CPU, math.ceil(limits.timeout) + 1, math.ceil(limits.timeout) + 2),
        (resource.RLIMIT_FSIZE, limits.max_file_mb * 1024 * 1024, limits.max_file_mb * 1024 * 1024),
    ]
    if drop:
        ceiling: int | None = _process_ceiling(SANDBOX_UID, limits.max_processes + _JAIL_PROCESSES)
    elif os.geteuid() == 0:
        ceiling = None  # unjailed root: the kernel would not enforce it
    else:
        extra = limits.max_processes + (_JAIL_PROCESSES if jailed else 0)
        ceiling = _process_ceiling(os.getuid(), extra)
    if ceiling is not None:
        wanted.append((resource.RLIMIT_NPROC, ceiling, ceiling))
    settings = []
    for which, soft, hard in wanted:
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        settings.append((which, (soft, hard)))
    sources: dict[str, str] = {}
    stage: tuple[tuple[bytes, bytes], ...] = ()
    if drop:
        staged = [*sandbox_python_roots(), workspace]
        for index, path in enumerate(staged):
            sources[path] = os.path.join(_STAGE_ROOT, f"source-{index}")
        stage = tuple((path.encode(), sources[path].encode()) for path in staged)
    parent = os.getpid()
    death_signal = int(signal.SIGKILL)

    def setup() -> None:
        if stage:
            _stage(libc, stage)
        for which, pair in settings:
            resource.setrlimit(which, pair)
        if drop:
            os.setgroups([])
            os.setgid(SANDBOX_GID)
            os.setuid(SANDBOX_UID)
        if libc is not None:
            _check(libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0), "PR_SET_PDEATHSIG")
        if os.getppid() != parent:
            os._exit(1)  # the runner died before the death signal was set: nobody is left to wait for us

    return setup, sources


def sandbox_kill_group(pid: int) -> None:
    """SIGKILL the process group a call started (its leader is the call's first process)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _text(data: bytes | bytearray, truncated: bool, cap: int) -> str:
    text = bytes(data).decode("utf-8", errors="replace")
    if truncated:
        text += f"\n[output truncated at {cap} bytes]"
    return text


class _SandboxProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's subprocess protocol, telling when the main process exits — `Process.wait()` also waits
    for the pipes to close, which a background child may keep open for as long as it lives."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=_READ_CHUNK, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


async def sandbox_run(argv: list[str], workspace: str, limits: SandboxLimits, *, jail: Jail | None,
                      stdin_data: bytes | None = None, live: MutableSet[int] | None = None) -> dict[str, Any]:
    """Run argv in the workspace under the limits — in `jail`, or unconfined when it is None — and return
    {exit_code, stdout, stderr, timed_out}.

    The whole process group is killed when the wall clock runs out, when either stream passes the byte
    cap, and when the main process ends (so nothing the call started outlives it; in the jail, the end of
    its pid namespace takes everything in it along). exit_code is negative (minus the signal number) when
    the runner killed the process; `live` holds the group's id while the call runs.
    """
    if os.name != "posix":
        raise SandboxError("the tool sandbox needs a POSIX system (Linux or macOS)")
    if jail is not None and (workspace == os.sep or workspace in _SYSTEM_PATHS):
        raise SandboxError(f"the workspace {workspace} is a system directory; the jail would make it "
                           "writable for tool code. Give the run a workspace of its own (--workspace DIR)")
    tmpdir, cwd = _directories(jail, workspace)
    setup, sources = _child_setup(limits, workspace, jailed=jail is not None)
    command = sandbox_jail_argv(jail, workspace, argv, sources) if jail is not None else argv
    deadline = asyncio.get_running_loop().time() + limits.timeout
    transport, protocol = await _start(command, cwd, sandbox_environment(workspace, tmpdir), setup,
                                       piped_stdin=stdin_data is not None, jail=jail, staged=bool(sources))
    pid = transport.get_pid()
    if live is not None:
        live.add(pid)
    try:
        return await _collect(transport, protocol, limits, stdin_data, deadline)
    finally:
        sandbox_kill_group(pid)
        transport.close()  # kills the main process if it still runs, and closes the pipes
        if live is not None:
            live.discard(pid)


def _directories(jail: Jail | None, workspace: str) -> tuple[str, str]:
    """The call's TMPDIR and the directory it starts in (made where they do not exist yet)."""
    if jail is not None and "--size" in jail.options:
        return "/tmp", "/"
    tmpdir = os.path.join(workspace, SANDBOX_TMP_DIR)
    if jail is not None:  # an older bubblewrap: see sandbox_jail_argv
        if not os.path.isdir(tmpdir):
            os.mkdir(tmpdir)
            sandbox_give_to_tool_user(tmpdir)
        return tmpdir, "/"
    os.makedirs(tmpdir, exist_ok=True)
    return tmpdir, workspace


async def _start(command: list[str], cwd: str, env: dict[str, str], setup: Callable[[], None], *,
                 piped_stdin: bool, jail: Jail | None,
                 staged: bool) -> tuple[asyncio.SubprocessTransport, _SandboxProtocol]:
    """The call's process started, in a session of its own; SandboxError saying why it could not start
    (`staged`: a root runner's child stages what the tool user cannot reach before it drops to that user)."""
    loop = asyncio.get_running_loop()
    try:
        return await loop.subprocess_exec(
            lambda: _SandboxProtocol(loop),
            *command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if piped_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # The child only makes system calls with values computed above: none of the locks that make
            # preexec_fn unsafe next to threads are taken between fork and exec.
            preexec_fn=setup,
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        if isinstance(exc, subprocess.SubprocessError) and jail is not None and staged:
            raise SandboxError(f"could not prepare the jail for uid {SANDBOX_UID} as root (private mounts, "
                               f"then setuid, between fork and exec): {exc}") from exc
        cause = _unreachable(command[0]) if jail is not None and sandbox_drops_privileges() else None
        if cause is not None:
            raise SandboxError(f"could not start {command[0]}: {cause}") from exc
        raise SandboxError(f"could not start {command[0]}: {exc}") from exc


def _unreachable(program: str) -> str | None:
    """Why a root runner's child cannot start the bubblewrap `program` it can see itself, or None: the child
    has mounted the stage over /tmp (hiding whatever lies below it there) and dropped to SANDBOX_UID, which
    must be able to search every directory on the way to the program and to execute it."""
    path = os.path.abspath(program)
    stage = _STAGE_ROOT.rstrip("/") + "/"
    if path.startswith(stage):
        return (f"it lies under {_STAGE_ROOT}, which a root runner covers with the jail's own staging "
                f"area (a private tmpfs) before it starts bubblewrap, so from there the program is not to be "
                f"found. Install bubblewrap outside {_STAGE_ROOT} (the {SANDBOX_PACKAGE} package puts "
                "it in /usr/bin), or run as a user other than root")
    parent = os.path.dirname(path)
    while True:
        allowed = _tool_user_may_run(parent)
        if allowed is None:
            return None
        if not allowed:
            return (f"a root runner starts bubblewrap as uid {SANDBOX_UID}, and that user cannot search "
                    f"{parent} (mode {os.stat(parent).st_mode & 0o777:o}) on the way to it. Install bubblewrap "
                    f"where every user can reach it (the {SANDBOX_PACKAGE} package puts it in /usr/bin)")
        if parent == os.path.dirname(parent):
            break
        parent = os.path.dirname(parent)
    if _tool_user_may_run(path) is False:
        return (f"a root runner starts bubblewrap as uid {SANDBOX_UID}, and that user may not execute it (mode "
                f"{os.stat(path).st_mode & 0o777:o}). Make it executable for every user, or install the "
                f"{SANDBOX_PACKAGE} package")
    return None


def _tool_user_may_run(path: str) -> bool | None:
    """Whether SANDBOX_UID (in group SANDBOX_GID) may search the directory or execute the file `path`, by
    its owner, group and other bits; None when it cannot be told (`path` does not exist)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if info.st_uid == SANDBOX_UID:
        return bool(info.st_mode & 0o100)
    if info.st_gid == SANDBOX_GID:
        return bool(info.st_mode & 0o010)
    return bool(info.st_mode & 0o001)


async def sandbox_bwrap_options(program: str) -> frozenset[str]:
    """Which of _OPTIONAL the bubblewrap `program` knows, read from its --help."""
    try:
        process = await asyncio.create_subprocess_exec(program, "--help", stdin=subprocess.DEVNULL,
                                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                       env={"PATH": "/usr/bin:/bin", "LANG": "C"})
        output, _ = await process.communicate()
    except OSError:
        return frozenset()
    known = set(_HELP_OPTION.findall(output.decode("utf-8", errors="replace")))
    return frozenset(option for option in _OPTIONAL if option in known)


async def sandbox_jail_problem(jail: Jail, workspace: str) -> str | None:
    """Why the jail cannot run code in `workspace` here, or None when it can: one trial run of the Python
    interpreter inside it, the way std.python would start it."""
    probe = [sys.executable, "-I", "-S", "-c", ""] if sys.executable else ["/bin/sh", "-c", ":"]
    limits = SandboxLimits(timeout=20.0, memory_mb=512, max_output=4000, max_file_mb=1, max_processes=8)
    try:
        outcome = await sandbox_run(probe, workspace, limits, jail=jail)
    except SandboxError as exc:
        return str(exc)
    if outcome["exit_code"] == 0:
        return None
    said = outcome["stderr"].strip() or f"exit status {outcome['exit_code']}"
    if outcome["timed_out"]:
        said = "it did not start within 20 seconds"
    hint = (f" (tool code runs as uid {SANDBOX_UID} when the runner is root: the workspace must be searchable "
            "by that user)") if sandbox_drops_privileges() else ""
    return f"bubblewrap could not start code in the jail: {said}{hint}"


class Sandbox:
    """Where one tool registry runs code: in the jail when it can run here; unconfined only when
    `unsafe` allows it. Knows the process groups of the calls running now, to kill them on the way out."""

    def __init__(self, *, unsafe: bool = False, program: str | None = None) -> None:
        self.unsafe = unsafe
        self.program = program or sandbox_find_bwrap()
        self.live: set[int] = set()
        self.stopping = False
        self._problem: str | None = None
        self._options: frozenset[str] = frozenset()
        self._checked = False

    async def problem(self, workspace: str) -> str | None:
        """Why code cannot run in the jail here (None when it can), found once by a trial run."""
        if not self._checked:
            if self.program is None or not os.path.exists(self.program):
                self._problem = (f"bubblewrap (bwrap) is not installed; install the {SANDBOX_PACKAGE} package "
                                 f"(apt-get install {SANDBOX_PACKAGE})")
            else:
                self._options = await sandbox_bwrap_options(self.program)
                self._problem = await sandbox_jail_problem(Jail(self.program, options=self._options), workspace)
            self._checked = True
        return self._problem

    async def run(self, argv: list[str], workspace: str, limits: SandboxLimits, *, network: bool = False,
                  tmp_bytes: int = 64 * 1024 * 1024, stdin_data: bytes | None = None) -> dict[str, Any]:
        """`sandbox_run` in the jail; unconfined where the jail cannot run, if `unsafe`; SandboxError else.
        SandboxStopped once `kill` was called: a call it killed has no result, and no call starts after it."""
        self._check_stopping()
        problem = await self.problem(workspace)
        jail: Jail | None = None
        if problem is None:
            assert self.program is not None
            jail = Jail(self.program, network=network, tmp_bytes=tmp_bytes, options=self._options)
        elif not self.unsafe:
            raise SandboxError(f"code runs only inside the jail, and the jail cannot run here: {problem}. To "
                               "run tool code with no confinement at all, pass --unsafe-tools "
                               "(unsafe_tools=True)")
        self._check_stopping()
        outcome = await sandbox_run(argv, workspace, limits, jail=jail, stdin_data=stdin_data, live=self.live)
        self._check_stopping()
        return outcome

    def kill(self) -> int:
        """SIGKILL the process group of every call running now and start no more; the number killed. Safe
        in a signal handler (it only sends signals and sets a flag). A jailed call's group holds bubblewrap,
        whose death ends the jail's pid namespace and everything in it."""
        self.stopping = True
        groups = list(self.live)
        for pid in groups:
            sandbox_kill_group(pid)
        return len(groups)

    def _check_stopping(self) -> None:
        if self.stopping:
            raise SandboxStopped("the runner is stopping: tool processes were killed")


async def _collect(transport: asyncio.SubprocessTransport, protocol: _SandboxProtocol,
                   limits: SandboxLimits, stdin_data: bytes | None, deadline: float) -> dict[str, Any]:
    """Read the call's output until its main process ends, a stream passes the byte cap, or the deadline;
    then kill its group and say what it did."""
    loop = asyncio.get_running_loop()
    pid = transport.get_pid()
    output = _SandboxOutput(limits.max_output)
    assert protocol.stdout is not None and protocol.stderr is not None
    readers = [asyncio.ensure_future(output.pump("stdout", protocol.stdout)),
               asyncio.ensure_future(output.pump("stderr", protocol.stderr))]
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(protocol.exited.wait()),
                                        asyncio.ensure_future(output.over_cap.wait())]
    if protocol.stdin is not None and stdin_data is not None:
        waits.append(asyncio.ensure_future(_feed(protocol.stdin, stdin_data)))
    timed_out = False
    try:
        # the call ends with its main process (background children may still hold the pipes open), at the
        # byte cap, or at the deadline
        done, _ = await asyncio.wait(waits[:2], timeout=max(deadline - loop.time(), 0.0),
                                     return_when=asyncio.FIRST_COMPLETED)
        if not done:
            timed_out = True
        sandbox_kill_group(pid)
        # what the killed group left in the pipes is still read, until the pipes close or the deadline —
        # with a moment's grace, so output written just before a kill at the deadline is not lost
        if not output.capped:
            _, pending = await asyncio.wait(readers, timeout=max(deadline - loop.time(), _DRAIN_GRACE))
            if pending:
                timed_out = True
    finally:
        for task in (*readers, *waits):
            task.cancel()
        await asyncio.gather(*readers, *waits, return_exceptions=True)
    await _reap(transport, protocol)
    truncated = output.capped[0] if output.capped else None
    return {
        "exit_code": transport.get_returncode(),
        "stdout": _text(output.buffers["stdout"], truncated == "stdout", limits.max_output),
        "stderr": _text(output.buffers["stderr"], truncated == "stderr", limits.max_output),
        "timed_out": timed_out,
    }


class _SandboxOutput:
    """What a call wrote to stdout and stderr, each kept up to the byte cap; the first stream to pass it
    ends the call."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buffers = {"stdout": bytearray(), "stderr": bytearray()}
        self.capped: list[str] = []  # the stream that passed the byte cap first
        self.over_cap = asyncio.Event()

    async def pump(self, name: str, stream: asyncio.StreamReader) -> None:
        buffer = self.buffers[name]
        while True:
            chunk = await stream.read(_READ_CHUNK)
            if not chunk:
                return
            buffer += chunk
            if len(buffer) > self.cap:
                del buffer[self.cap:]
                self.capped.append(name)
                self.over_cap.set()
                return


async def _feed(stream: asyncio.StreamWriter, data: bytes) -> None:
    try:
        stream.write(data)
        await stream.drain()
        stream.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the process stopped reading; its output says why


async def _reap(transport: asyncio.SubprocessTransport, protocol: _SandboxProtocol) -> None:
    """Once its group was killed, wait for asyncio's child watcher to see the main process exit (killing
    through the transport would reap the child under the watcher's feet, and it would report status 255)."""
    if transport.get_returncode() is not None:
        return
    sandbox_kill_group(transport.get_pid())
    exited = asyncio.ensure_future(protocol.exited.wait())
    await asyncio.wait({exited}, timeout=5.0)
    if not exited.done():
        exited.cancel()
        transport.kill()
