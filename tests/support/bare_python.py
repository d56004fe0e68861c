"""A Python without statewright: a virtual environment that can import litellm, pydantic and jinja2 only."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path


def _module_file(name: str) -> str:
    """Where a package is installed, found without importing it."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, f"{name} is not installed"
    return spec.origin


def make_bare_python(home: Path) -> Path:
    """A virtual environment in `home` whose python imports litellm, pydantic and jinja2, but not statewright.

    The environment borrows this interpreter's site-packages through a .pth line. Python does not read
    .pth files in a directory added that way, so the editable statewright install (itself a .pth file
    there) stays invisible."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    python = home / "bin" / "python"
    probe = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site_packages = Path(subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                                        check=True).stdout.strip())
    borrowed = sorted({str(Path(_module_file(name)).parents[1]) for name in ("litellm", "pydantic", "jinja2")})
    (site_packages / "borrowed_dependencies.pth").write_text("\n".join(borrowed) + "\n", encoding="utf-8")

    dependencies = subprocess.run([str(python), "-c", "import litellm, pydantic, jinja2"], capture_output=True,
                                  text=True, check=False, timeout=120)
    assert dependencies.returncode == 0, dependencies.stderr
    statewright = subprocess.run([str(python), "-c", "import statewright"], capture_output=True, text=True,
                                 check=False, timeout=60)
    assert statewright.returncode != 0, "statewright is importable in the bare environment: the test proves nothing"
    assert "No module named 'statewright'" in statewright.stderr
    return python


# What `import pydantic, jinja2` needs, and nothing else: the packages a runner of OpenAI-compatible models
# is documented to need.
RUNNER_MINIMUM = ("pydantic", "pydantic_core", "typing_extensions", "annotated_types", "typing_inspection",
                  "jinja2", "markupsafe")


def make_minimal_python(home: Path) -> Path:
    """A virtual environment in `home` whose python imports pydantic and jinja2 (RUNNER_MINIMUM) and
    nothing else that is not the standard library: no litellm, no httpx, no statewright.

    Each package is linked into a directory of its own that a .pth line puts on the path."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    python = home / "bin" / "python"
    probe = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site_packages = Path(subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                                        check=True).stdout.strip())
    borrowed = home / "borrowed"
    borrowed.mkdir()
    for name in RUNNER_MINIMUM:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, f"{name} is not installed"
        source = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
        (borrowed / source.name).symlink_to(source)
    (site_packages / "borrowed_dependencies.pth").write_text(f"{borrowed}\n", encoding="utf-8")
    for present, module in ((True, "pydantic, jinja2"), (False, "litellm"), (False, "httpx"),
                            (False, "statewright")):
        done = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True,
                              check=False, timeout=120)
        assert (done.returncode == 0) is present, f"import {module}: {done.stderr[-500:]}"
    return python
