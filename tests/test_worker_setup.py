"""`statewright worker` keeps the machines it serves, not the compilations they were made from: a worker
serves for days, and a large file's syntax tree, symbol tables and IR would stay with it."""

from __future__ import annotations

import gc
from pathlib import Path

from statewright.cli.app import build_parser
from statewright.cli.running import _served_machines
from statewright.compiler.compilation import Compilation
from statewright.grammar import ast

ROOT = Path(__file__).resolve().parents[1]


def test_the_machines_a_worker_serves_outlive_their_compilations() -> None:
    newsroom = ROOT / "examples" / "newsroom"  # a folder project: files that use files
    args = build_parser().parse_args(["worker", str(newsroom), str(ROOT / "examples" / "parallel_review.fsm"),
                                      "--temporal", "127.0.0.1:1"])
    gc.collect()
    before = {id(o) for o in gc.get_objects() if isinstance(o, (Compilation, ast.Machine))}  # other tests'
    machines = _served_machines(args)
    assert machines is not None and {m.name for m in machines} >= {"newsroom", "research", "parallel_review"}
    gc.collect()
    alive = [o for o in gc.get_objects() if isinstance(o, (Compilation, ast.Machine)) and id(o) not in before]
    assert alive == [], f"{len(alive)} compilations or trees outlive the worker's set-up"
    assert all(m.states for m in machines)  # the machines themselves are whole
