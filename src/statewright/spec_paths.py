"""Which `.fsm` files a command's PATH arguments stand for.

A file argument stands for itself, whatever its name and whatever an ignore file says. A directory
argument stands for every `.fsm` file under it, in sorted order, except what is skipped:

- hidden directories (`.git`, `.venv`, ...), `node_modules`, `__pycache__`, `site-packages`,
  `__pypackages__`, and any virtual environment (a directory holding `pyvenv.cfg`), whatever its name;
- what the `.gitignore` files ignore, with git's own rules: every `.gitignore` under the directory, and, when
  the directory is inside a git work tree, those of its parent directories up to the top of the work tree
  and `.git/info/exclude`; a deeper file overrides a shallower one, a later line an earlier one, and `!`
  re-includes (but not inside an ignored directory, which is never entered);
- what an `--exclude PATTERN` matches: a `.gitignore` pattern read as if it were the last line of a
  `.gitignore` in the current directory, so it overrides every ignore file.

Symbolic links to directories are not followed. Patterns are matched by `pathspec`'s implementation of
git's rules rather than one of our own: the rules have many corners (anchoring by a slash, `**`, directory
patterns, negation, escapes) that pathspec already gets right and tests against git's behaviour.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

    from .diagnostics import Diagnostic

SPEC_SUFFIX = ".fsm"
SKIPPED_DIRECTORIES = frozenset({"node_modules", "__pycache__", "site-packages", "__pypackages__"})


class SpecFiles:
    """The files the arguments stand for, in order; the directories that held none or could not be read."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.empty_directories: list[str] = []
        self.unreadable: list[tuple[str, OSError]] = []


def find_spec_files(paths: Sequence[str], exclude: Sequence[str] = ()) -> SpecFiles:
    """Expand directories into the `.fsm` files under them; other arguments are kept as they are.

    A path that does not exist is kept too: reading it is what reports the problem, for that path. A file
    named twice (or named and also found in a directory) is listed once, where it first appears."""
    out = SpecFiles()
    seen: set[str] = set()
    excludes = _exclude_spec(exclude) if exclude else None
    for path in paths:
        if os.path.isdir(path):
            unreadable = len(out.unreadable)
            found = _walk(path, excludes, out.unreadable)
            if not found and not any(p == path for p, _ in out.unreadable[unreadable:]):
                out.empty_directories.append(path)
        else:
            found = [path]
        for file in found:
            key = os.path.realpath(file)
            if key not in seen:
                seen.add(key)
                out.files.append(file)
    return out


def unreadable_file(path: str, error: OSError) -> Diagnostic:
    """SW1022 for a file (or a directory to search) that cannot be read, with the system's reason."""
    from .diagnostics import Diagnostic, Severity, did_you_mean

    reason = error.strerror or str(error)
    help = ""
    if isinstance(error, FileNotFoundError):
        folder, name = os.path.split(path)
        try:
            beside = [f for f in os.listdir(folder or os.curdir) if f.endswith(SPEC_SUFFIX)]
        except OSError:
            beside = []
        help = did_you_mean(name, beside)
    elif isinstance(error, IsADirectoryError):
        help = "this command reads one .fsm file; name one of the files in the directory"
    return Diagnostic("SW1022", f"cannot read {path}: {reason}", None, help=help, severity=Severity.ERROR,
                      file=path)


def skipped_directory(path: str, name: str) -> bool:
    """Whether a directory found in a walk is skipped whatever the ignore files say."""
    return (name.startswith(".") or name in SKIPPED_DIRECTORIES
            or os.path.isfile(os.path.join(path, "pyvenv.cfg")))


# ---- the walk ------------------------------------------------------------------------------------


class _Rule:
    """The patterns of one ignore file, and how to turn a path under the walked directory into a path
    relative to that file's directory (patterns are relative to where their file is)."""

    __slots__ = ("add", "spec", "strip")

    def __init__(self, spec: GitIgnoreSpec, *, strip: str = "", add: str = "") -> None:
        self.spec = spec
        self.strip = strip  # the walk-relative directory the file is in, with a final '/' (found in the walk)
        self.add = add  # the walked directory relative to the file's directory, with a final '/' (above it)

    def verdict(self, relative: str) -> bool | None:
        """True: ignored; False: re-included by a `!` line; None: no line matches."""
        return self.spec.check_file(self.add + relative[len(self.strip):]).include


def _walk(root: str, excludes: GitIgnoreSpec | None, unreadable: list[tuple[str, OSError]]) -> list[str]:
    """The `.fsm` files under `root`, in name order, each directory's entries in place (as `tree` shows)."""
    found: list[str] = []
    exclude = None if excludes is None else _Rule(excludes, add=_prefix(_relative(root, os.curdir)))
    # each item: the walk-relative path, whether it is a directory, the ignore files that apply inside it
    stack: list[tuple[str, bool, list[_Rule]]] = [("", True, _inherited_rules(root))]
    while stack:
        relative, is_dir, rules = stack.pop()
        path = _join(root, relative)
        if not is_dir:
            found.append(path)
            continue
        own = _read_ignore_file(os.path.join(path, ".gitignore"))
        if own is not None:
            rules = [*rules, _Rule(own, strip=_prefix(relative))]
        try:
            with os.scandir(path) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError as e:
            unreadable.append((path, e))
            continue
        children = []
        for entry in entries:
            child = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_dir(follow_symlinks=False):
                if not skipped_directory(entry.path, entry.name) and not _ignored(child + "/", rules, exclude):
                    children.append((child, True, rules))
            elif entry.name.endswith(SPEC_SUFFIX) and entry.is_file() and not _ignored(child, rules, exclude):
                children.append((child, False, rules))
        stack.extend(reversed(children))
    return found


def _ignored(relative: str, rules: Sequence[_Rule], exclude: _Rule | None) -> bool:
    """git's verdict: the deepest pattern file with a matching line decides, by its last matching line;
    `--exclude` patterns come before all of them. `relative` ends with '/' for a directory."""
    for rule in ([exclude] if exclude is not None else []) + list(reversed(rules)):
        verdict = rule.verdict(relative)
        if verdict is not None:
            return verdict
    return False


def _join(root: str, relative: str) -> str:
    """How a found file is named in messages: under the argument as typed, without a leading './'."""
    if not relative:
        return root
    if os.path.normpath(root) == os.curdir:
        return relative
    return os.path.join(root, relative)


def _prefix(relative: str) -> str:
    return "" if relative in ("", ".") else relative.rstrip("/") + "/"


def _relative(path: str, base: str) -> str:
    """`path` relative to `base`, with '/' separators."""
    try:
        relative = os.path.relpath(path, base)
    except ValueError:  # another drive (Windows): no relative form; match as if the two were one
        return ""
    return relative.replace(os.sep, "/")


def _inherited_rules(root: str) -> list[_Rule]:
    """The ignore files of a git work tree that apply to `root` from above it, shallowest first."""
    top = _work_tree_top(root)
    if top is None:
        return []
    rules = []
    info_exclude = _read_ignore_file(os.path.join(top, ".git", "info", "exclude"))
    if info_exclude is not None:
        rules.append(_Rule(info_exclude, add=_prefix(_relative(root, top))))
    above = _relative(os.path.abspath(root), top)
    parts = [] if above in ("", ".") else above.split("/")
    for depth in range(len(parts)):  # the work tree's top, then each directory down to root's parent
        directory = os.path.join(top, *parts[:depth])
        spec = _read_ignore_file(os.path.join(directory, ".gitignore"))
        if spec is not None:
            rules.append(_Rule(spec, add=_prefix("/".join(parts[depth:]))))
    return rules


def _work_tree_top(path: str) -> str | None:
    """The nearest directory at or above `path` that holds `.git` (a directory, or a worktree's file)."""
    directory = os.path.abspath(path)
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _read_ignore_file(path: str) -> GitIgnoreSpec | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:  # none there (the usual case), or unreadable: git too goes on without it
        return None
    if not any(line.strip() and not line.startswith("#") for line in lines):
        return None
    from pathspec import GitIgnoreSpec  # here: only a directory argument needs it

    try:
        return GitIgnoreSpec.from_lines(lines)
    except ValueError:  # a line git cannot read either: git skips it, and so do we, keeping the others
        return GitIgnoreSpec.from_lines(line for line in lines if _valid_pattern(line))


def _valid_pattern(line: str) -> bool:
    from pathspec import GitIgnoreSpec

    try:
        GitIgnoreSpec.from_lines([line])
    except ValueError:  # pathspec's pattern error (its name differs between versions) is a ValueError
        return False
    return True


class ExcludePatternError(ValueError):
    """An --exclude PATTERN that is not a valid .gitignore pattern."""


def _exclude_spec(patterns: Sequence[str]) -> GitIgnoreSpec:
    from pathspec import GitIgnoreSpec

    bad = [p for p in patterns if not _valid_pattern(p)]
    if bad:
        raise ExcludePatternError(f"--exclude {bad[0]!r} is not a .gitignore pattern")
    return GitIgnoreSpec.from_lines(patterns)
