"""Run checkpoints in SQLite: the run state after every transition, so a stopped run resumes where it was."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from typing import Any

from .structured import to_jsonable

# Log deltas collect in the run's own row until they hold about this many bytes, then move to a chunk row:
# a commit that rewrites one row is several times cheaper than one that also appends to a growing table.
_CHECKPOINT_TAIL_BYTES = 2000

_CHECKPOINT_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    machine TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    state TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    snapshot TEXT NOT NULL,
    log_tail TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS run_log_chunks (
    run_id TEXT NOT NULL,
    chunk INTEGER NOT NULL,
    deltas TEXT NOT NULL,
    PRIMARY KEY (run_id, chunk)
) WITHOUT ROWID;
"""


class CheckpointError(Exception):
    """A checkpoint cannot be used: no such run, or it was made by a different machine."""


class CheckpointStore:
    """Snapshots of runs, one row per run, committed on every `save`.

    A snapshot is a JSON-able dict. Its "logs" entry maps names to lists that only grow (the path, each
    agent's memory): a save stores just what the lists gained since the previous save (a "delta", one JSON
    line), so a checkpoint costs the same at step 10 and at step 10,000. A list that shrank is stored whole.
    Recent deltas live in the run's row (its log tail); full tails move to chunk rows.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        # the engine may run in a worker thread (`arun`); access is serialised by the lock
        self._conn = sqlite3.connect(path, check_same_thread=False)
        self._lock = threading.Lock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_CHECKPOINT_SCHEMA)
        self._conn.commit()
        # per run: how long each log is in the database; the next chunk's number and the log tail
        self._log_lengths: dict[str, dict[str, int]] = {}
        self._tails: dict[str, list[Any]] = {}

    def save(self, run_id: str, snapshot: dict[str, Any]) -> None:
        head = dict(snapshot)
        logs = head.pop("logs", None) or {}
        now = time.time()
        with self._lock, self._conn:
            conn = self._conn
            lengths = self._log_lengths.get(run_id)
            if lengths is None:
                lengths = self._replay(run_id, None)
            delta: dict[str, Any] = {}
            for name, items in logs.items():
                stored = lengths.get(name, 0)
                if len(items) < stored:
                    delta[name] = {"reset": items}
                elif len(items) > stored:
                    delta[name] = items[stored:]
                lengths[name] = len(items)
            tail = self._tails[run_id]
            if delta:
                line = json.dumps(delta, ensure_ascii=False, default=to_jsonable)
                tail[1] = f"{tail[1]}\n{line}" if tail[1] else line
                if len(tail[1]) > _CHECKPOINT_TAIL_BYTES:
                    conn.execute("INSERT INTO run_log_chunks VALUES (?, ?, ?)", (run_id, tail[0], tail[1]))
                    tail[0], tail[1] = tail[0] + 1, ""
            conn.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
                "status = excluded.status, state = excluded.state, updated = excluded.updated, "
                "snapshot = excluded.snapshot, log_tail = excluded.log_tail, machine = excluded.machine, "
                "source_sha256 = excluded.source_sha256",
                (run_id, str(head.get("machine", "")), str(head.get("source_sha256", "")),
                 str(head.get("status", "running")), head.get("state"), now, now,
                 json.dumps(head, ensure_ascii=False, default=to_jsonable), tail[1]),
            )

    def _replay(self, run_id: str, logs: dict[str, list[Any]] | None) -> dict[str, int]:
        """Read a run's log deltas in order (into `logs` when given) and cache where its logs stand."""
        lengths: dict[str, int] = {}
        next_chunk = 0
        texts = []
        for chunk, text in self._conn.execute(
            "SELECT chunk, deltas FROM run_log_chunks WHERE run_id = ? ORDER BY chunk", (run_id,)
        ):
            next_chunk = chunk + 1
            texts.append(text)
        row = self._conn.execute("SELECT log_tail FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        tail = row[0] if row is not None else ""
        for text in [*texts, tail]:
            for line in text.split("\n") if text else ():
                for name, change in json.loads(line).items():
                    if isinstance(change, dict):
                        lengths[name] = len(change["reset"])
                        if logs is not None:
                            logs[name] = list(change["reset"])
                    else:
                        lengths[name] = lengths.get(name, 0) + len(change)
                        if logs is not None:
                            logs.setdefault(name, []).extend(change)
        self._log_lengths[run_id] = lengths
        self._tails[run_id] = [next_chunk, tail]
        return lengths

    def load(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            snapshot = json.loads(row[0])
            logs: dict[str, list[Any]] = {}
            self._replay(run_id, logs)
        snapshot["logs"] = logs
        return snapshot

    def list_runs(self) -> list[dict[str, Any]]:
        """Every stored run, most recently updated first: run_id, machine, status, state, created, updated."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT run_id, machine, status, state, created, updated FROM runs ORDER BY updated DESC"
            ).fetchall()
        return [{"run_id": r[0], "machine": r[1], "status": r[2], "state": r[3], "created": r[4],
                 "updated": r[5]} for r in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
