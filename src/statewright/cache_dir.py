"""Where statewright keeps its caches: the grammar's parse table and the runtime's index.

`STATEWRIGHT_CACHE_DIR` names the directory when it is set (the user's own choice, used as it is).
Otherwise each user has a private directory of their own under the system's temporary directory,
made with mode 0700. A cache file is loaded and trusted (the parse table is a pickle; the runtime's index
chooses what every runner imports), so a directory that is not this user's, or that another user may write
to, is never used: a file planted there would run as this user. Without a usable directory every
command still works, only without its caches.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def cache_dir() -> Path | None:
    """The directory to keep caches in, or None when there is none that is safe to use."""
    chosen = os.environ.get("STATEWRIGHT_CACHE_DIR")
    if chosen:
        return Path(chosen)
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # no users to keep apart (Windows): the temporary directory is the user's own
        return Path(tempfile.gettempdir())
    path = Path(tempfile.gettempdir()) / f"statewright-{getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        found = os.lstat(path)
    except OSError:
        return None
    private = stat.S_ISDIR(found.st_mode) and found.st_uid == getuid() and not found.st_mode & 0o077
    return path if private else None
