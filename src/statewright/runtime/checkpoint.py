"""Run checkpoints in SQLite: what a run changed at every transition, so a stopped run resumes where it was.

A run's checkpoint is a small head (status, the state to run next, usage, ...) rewritten at every save,
and a log of pieces, one per save, each holding only what changed: the outputs produced, the visit and
bound counters that moved, the path and memory messages appended. A save costs the same at step 10 and at
step 10,000, with 10 states or 10,000, with a 20-byte input or a 20 MB one. Loading replays the pieces;
a missing or damaged piece is found (the head counts them) and the run is refused, never resumed wrong.

One process owns a run at a time: a lease in the same database, renewed while the run goes on, refuses a
second process (or engine) that tries to run it too; a lease is taken over only once it has expired, or
once the process holding it is gone from this machine.

SQLite runs in WAL mode with `synchronous=NORMAL`: a commit is durable against a crash of the process,
and against power loss up to the last WAL checkpoint. The `-wal` file beside the database is part of it:
copy or move the database only with its `-wal` (and `-shm`) files, or after every writer has closed it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from typing import Any

from .snapshot import (
    Delta,
    Snapshot,
    SnapshotError,
    changes_to_json,
    head_fixed_json,
    head_moving_json,
    read_changes,
    read_head,
    read_snapshot_json,
)
from .trace import redact_data, redacted_json, secret_values

CHECKPOINT_VERSION = 2
LEASE_SECONDS = 30.0  # a lease not renewed for this long has expired

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    machine TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    state TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    head TEXT NOT NULL,
    pieces INTEGER NOT NULL,
    tail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_pieces (
    run_id TEXT NOT NULL,
    piece INTEGER NOT NULL,
    changes TEXT NOT NULL,
    PRIMARY KEY (run_id, piece)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_leases (
    run_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    expires REAL NOT NULL
);
"""
# The changes of recent saves collect in the run's own row (its tail, one JSON line per save) until they
# hold about this many bytes, then move to a piece row: rewriting one row is several times cheaper than
# also appending to a growing table on every commit.
_TAIL_BYTES = 2000


class CheckpointError(Exception):
    """A checkpoint cannot be used: no such run, another machine's run, a damaged record, a run another
    process holds."""


class CheckpointStore:
    """The runs of one SQLite database. `save` writes one run's head and the piece of what changed.

    Alone, every save is committed at once. An engine that runs many runs on one event loop calls
    `group_commits()`: saves then join one transaction, and `await durable()` — which the engine awaits
    before it performs the next effect of a run — commits every save made so far in a single commit.
    Nothing a run does after a transition happens before that transition is durable.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        import sqlite3  # here: a process that never checkpoints (a Temporal worker) does not load it

        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise CheckpointError(f"{path} is not a checkpoint database: {exc}") from None
        if tables and version != CHECKPOINT_VERSION:
            self._conn.close()
            raise CheckpointError(f"{path} holds checkpoints in another format (version {version}, this "
                                  f"statewright writes version {CHECKPOINT_VERSION}); resume its runs with the "
                                  "statewright that made them, or checkpoint new runs to another file")
        self._conn.executescript(_SCHEMA)
        self._conn.execute(f"PRAGMA user_version = {CHECKPOINT_VERSION}")
        self._positions: dict[str, tuple[int, str]] = {}  # run id -> (pieces in the database, its tail)
        self._fixed: dict[str, tuple[dict[str, Any], str]] = {}  # run id -> its head's fixed fields, as JSON
        self._active = 0  # runs holding a lease through this store now
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._grouping = False
        self._in_transaction = False
        self._flush: asyncio.Future[None] | None = None
        # keys and tokens are never written to disk: the environment's are read once, as traces do
        self._secrets = secret_values()

    # -- writing ---------------------------------------------------------------------------------

    def group_commits(self) -> None:
        """Let saves share commits; the caller promises to `await durable()` before acting on a save."""
        self._grouping = True

    def save(self, run_id: str, delta: Delta, redactions: list[str] | None = None) -> None:
        """Write a run's head and what changed (snapshot.py: `make_delta` builds the delta). `redactions` are
        values no record may hold (the forms of the run's tool secrets), besides the environment's keys."""
        fixed, moving = head_fixed_json(delta.head), head_moving_json(delta.head)
        changes = changes_to_json(delta.changes) if not delta.changes.empty() else None
        if redactions:
            fixed, moving, changes = (redact_data(fixed, redactions), redact_data(moving, redactions),
                                      redact_data(changes, redactions))
        now = time.time()
        with self._lock:
            head_text = self._head_text(run_id, fixed, moving)
            position = self._positions.get(run_id)
            if position is None:
                row = self._conn.execute("SELECT pieces, tail FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                position = (int(row[0]), str(row[1])) if row is not None else (0, "")
            pieces, tail = position
            if changes:
                line = redacted_json(changes, self._secrets)
                tail = f"{tail}\n{line}" if tail else line
            full = len(tail) > _TAIL_BYTES
            # one statement commits on its own (autocommit): a transaction only for two, or to share commits
            alone = not full and not self._in_transaction and (not self._grouping or self._active <= 1)
            if not alone:
                self._begin()
            try:
                if full:
                    self._conn.execute("INSERT INTO run_pieces VALUES (?, ?, ?)", (run_id, pieces, tail))
                    pieces, tail = pieces + 1, ""
                self._conn.execute(
                    "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
                    "status = excluded.status, state = excluded.state, updated = excluded.updated, "
                    "head = excluded.head, pieces = excluded.pieces, tail = excluded.tail, "
                    "machine = excluded.machine, source_sha256 = excluded.source_sha256",
                    (run_id, delta.head.machine, delta.head.source_sha256, delta.head.status, delta.head.state, now, now,
                     head_text, pieces, tail))
            except BaseException:
                self._rollback()
                self._positions.pop(run_id, None)
                self._fixed.pop(run_id, None)
                raise
            self._positions[run_id] = (pieces, tail)
            if not self._grouping or self._active <= 1:
                self._commit()  # alone on the store: nothing to share a commit with

    def _head_text(self, run_id: str, fixed: dict[str, Any], moving: dict[str, Any]) -> str:
        """The head's JSON: the fields fixed for the run written once (and kept while they stay the same),
        then the fields a transition changes. One JSON object, as `head_to_json` makes it."""
        known = self._fixed.get(run_id)
        if known is None or known[0] != fixed:
            known = (fixed, redacted_json(fixed, self._secrets))
            self._fixed[run_id] = known
        return f"{known[1][:-1]}, {redacted_json(moving, self._secrets)[1:]}"

    async def durable(self) -> None:
        """Commit every save made so far — once, for every run waiting on it in this turn of the loop."""
        if not self._in_transaction:
            return
        if self._flush is None:
            loop = asyncio.get_running_loop()
            self._flush = loop.create_future()
            loop.call_soon(self._commit_group)
        await asyncio.shield(self._flush)

    def _commit_group(self) -> None:
        flush, self._flush = self._flush, None
        try:
            with self._lock:
                self._commit()
        except BaseException as exc:  # noqa: BLE001 - every waiting run hears of it
            if flush is not None and not flush.done():
                flush.set_exception(exc)
            return
        if flush is not None and not flush.done():
            flush.set_result(None)

    def _begin(self) -> None:
        if not self._in_transaction:
            self._conn.execute("BEGIN IMMEDIATE")
            self._in_transaction = True

    def _commit(self) -> None:
        if self._in_transaction:
            self._conn.execute("COMMIT")
            self._in_transaction = False

    def _rollback(self) -> None:
        if self._in_transaction:
            self._conn.execute("ROLLBACK")
            self._in_transaction = False

    # -- reading ---------------------------------------------------------------------------------

    def load(self, run_id: str) -> Snapshot | None:
        """The run as its checkpoints left it — the head with every piece replayed — or None for an unknown
        run. Raises CheckpointError for a damaged record: a piece missing, or a record that does not read
        as the snapshot's shape (snapshot.py) — it cannot be resumed."""
        with self._lock:
            row = self._conn.execute("SELECT head, pieces, tail FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            pieces = list(self._conn.execute(
                "SELECT piece, changes FROM run_pieces WHERE run_id = ? ORDER BY piece", (run_id,)))
        damaged = f"the checkpoint of run '{run_id}' in {self.path} is damaged"
        expected = int(row[1])
        numbers = [number for number, _ in pieces]
        if numbers != list(range(expected)):
            missing = sorted(set(range(expected)) - set(numbers))
            what = f"piece {missing[0]} of {expected} is missing" if missing else "it has pieces it should not"
            raise CheckpointError(f"{damaged}: {what}. It cannot be resumed; start the run again under a new id")
        try:
            snapshot = Snapshot(read_head(read_snapshot_json(str(row[0]), "its record")))
            lines = [(f"piece {number}", False, line) for number, text in pieces
                     for line in str(text).split("\n") if line]
            lines += [("the latest changes", True, line) for line in str(row[2]).split("\n") if line]
            for where, plural, text in lines:
                snapshot.apply(read_changes(read_snapshot_json(text, where, plural=plural), where))
            snapshot.prune()
        except SnapshotError as exc:
            raise CheckpointError(f"{damaged}: {exc}. It cannot be resumed; start the run again under a new id"
                                  ) from None
        with self._lock:
            self._positions[run_id] = (expected, str(row[2]))
        return snapshot

    def exists(self, run_id: str) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None

    def list_runs(self) -> list[dict[str, Any]]:
        """Every stored run, most recently updated first: run_id, machine, status, state, created, updated."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT run_id, machine, status, state, created, updated FROM runs ORDER BY updated DESC"
            ).fetchall()
        return [{"run_id": r[0], "machine": r[1], "status": r[2], "state": r[3], "created": r[4],
                 "updated": r[5]} for r in rows]

    # -- one owner per run -----------------------------------------------------------------------

    def acquire(self, run_id: str) -> None:
        """Take the run for this store's process; CheckpointError when another holds a live lease on it."""
        now = time.time()
        with self._lock:
            self._begin()
            try:
                row = self._conn.execute("SELECT owner, pid, host, expires FROM run_leases WHERE run_id = ?",
                                         (run_id,)).fetchone()
                if row is not None and row[0] != self._owner and not _lease_is_dead(row, now):
                    owner_pid, owner_host, expires = int(row[1]), str(row[2]), float(row[3])
                    raise CheckpointError(
                        f"run '{run_id}' is being run by process {owner_pid} on {owner_host} (its lease runs "
                        f"until {time.strftime('%H:%M:%S', time.localtime(expires))}, and is renewed while "
                        "the run goes on); wait for that process to finish, or stop it — a lease is taken "
                        f"over {LEASE_SECONDS:g} s after its holder stops renewing it")
                self._conn.execute(
                    "INSERT INTO run_leases VALUES (?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
                    "owner = excluded.owner, pid = excluded.pid, host = excluded.host, expires = excluded.expires",
                    (run_id, self._owner, os.getpid(), socket.gethostname(), now + LEASE_SECONDS))
            except BaseException:
                self._rollback()
                raise
            self._active += 1
            if not self._grouping:
                self._commit()

    def renew(self, run_id: str) -> None:
        """Extend this store's lease on a run (the engine does it while a long call is under way)."""
        with self._lock:
            self._begin()
            self._renew(run_id, time.time())
            if not self._grouping:
                self._commit()

    def release(self, run_id: str) -> None:
        with self._lock:
            self._active = max(0, self._active - 1)
            self._begin()
            self._conn.execute("DELETE FROM run_leases WHERE run_id = ? AND owner = ?", (run_id, self._owner))
            if not self._grouping:
                self._commit()

    def _renew(self, run_id: str, now: float) -> None:
        self._conn.execute("UPDATE run_leases SET expires = ? WHERE run_id = ? AND owner = ?",
                           (now + LEASE_SECONDS, run_id, self._owner))

    def close(self) -> None:
        with self._lock:
            try:
                self._commit()
            finally:
                self._conn.close()


def _lease_is_dead(row: tuple[Any, ...], now: float) -> bool:
    """A lease that expired, or whose holder is a process of this machine that no longer exists."""
    _owner, pid, host, expires = row
    if float(expires) <= now:
        return True
    if str(host) != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, as another user's process
        return False
    return False
