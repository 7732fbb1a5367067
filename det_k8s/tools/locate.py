"""Finding a tool binary and asking it its version, once per binary per process."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import ToolNotFound
from .process import run

_VERSIONS: dict[str, str] = {}


def locate(tool: str, explicit: str | None, env_var: str, how_to_get: str,
           environ: Mapping[str, str] | None = None) -> str:
    """The binary to run: the flag, else the environment variable, else PATH; missing is one line."""
    env = os.environ if environ is None else environ
    for origin, given in ((f"--{tool}-binary", explicit), (env_var, env.get(env_var))):
        if given:
            path = Path(given).expanduser()
            found = shutil.which(str(path)) if path.parent == Path(".") else (
                str(path) if path.is_file() and os.access(path, os.X_OK) else None)
            if not found:
                raise ToolNotFound(f"{origin} {given}: no executable {tool} there", hint=how_to_get)
            return found
    found = shutil.which(tool, path=env.get("PATH"))
    if not found:
        raise ToolNotFound(f"{tool} not found on PATH", hint=how_to_get)
    return found


def version_of(path: str, args: tuple[str, ...], tool: str, timeout: float = 30.0,
               log: Callable[[str], None] | None = None) -> str:
    """The tool's version output (stripped), asked only once per binary path."""
    if path not in _VERSIONS:
        _VERSIONS[path] = run([path, *args], timeout=timeout, tool=tool, log=log).stdout.strip()
    return _VERSIONS[path]


def forget_versions() -> None:
    """Tests swap binaries behind the same path; they call this to ask again."""
    _VERSIONS.clear()
