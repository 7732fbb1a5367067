"""Write a complete chart directory: the bundled chart (or a copy of the user's) plus rendered files.

The directory is built beside its destination and moved into place at the end, so a failure
never leaves half a chart behind, and an existing directory is replaced only when det-k8s wrote
it (a marker file says so). The user's own chart is read, never written. values.yaml is mode
0600 because it holds the database password and any storage keys.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import stopping
from ..determined.versions import parse_version, supported
from ..errors import InputError, UsageError
from ..safe_read import URL_AS_PATH, load_yaml, read_file
from ..settings.jsonschema_export import values_json_schema
from ..settings.merge import deep_merge
from .deploy import CHART_FILE as SCHEDULER_FILE
from .deploy import chart_template
from .facts import FILE as FACTS_FILE
from .facts import versions_tpl
from .render import render_chart_yaml, render_values, templates_dir

MARKER = ".det-k8s"
SECRET_MODE = 0o600


@dataclass(frozen=True)
class ChartResult:
    directory: Path
    values_file: Path
    chart_file: Path
    bundled: bool


def bundled_chart_dir() -> Path:
    return templates_dir() / "chart"


def _copy_user_chart(source: Path, target: Path) -> Mapping[str, Any]:
    """Copy a chart directory or packaged .tgz into `target`; return its Chart.yaml data."""
    scheme = URL_AS_PATH.match(str(source))
    if scheme and not source.exists():  # a URL or OCI reference read as a path: its `//` became `/`
        url = str(source).replace(":/", "://", 1)
        raise InputError(f"--chart {url}: det-k8s renders into a chart on disk, not one fetched from a URL or registry",
                         hint=f"download it first (helm pull {url}) and pass the .tgz or its directory")
    if source.is_dir():
        if not (source / "Chart.yaml").is_file():
            raise InputError(f"{source}: not a Helm chart (no Chart.yaml)", hint="pass the chart's directory")
        shutil.copytree(source, target, symlinks=False, ignore=shutil.ignore_patterns(".git"))
    elif source.is_file() and source.name.endswith((".tgz", ".tar.gz")):
        _extract_chart_archive(source, target)
    elif not source.exists():
        raise InputError(f"{source}: no such chart directory or archive",
                         hint=f"a chart of a helm repository? helm pull {source}, then pass the .tgz")
    else:
        raise InputError(f"{source}: expected a chart directory or a .tgz made by `helm package`")
    data = load_yaml(read_file(target / "Chart.yaml", "Chart.yaml"), f"{source}/Chart.yaml") or {}
    if not isinstance(data, dict):
        raise InputError(f"{source}/Chart.yaml: expected a mapping")
    return data


def chart_app_version(source: Path) -> str | None:
    """The appVersion a user's chart (directory or .tgz) names, when it names a Determined release det-k8s supports:
    the release to install when the settings name none (the v0.38.1 chart's unpackaged placeholder 0.0.0 names
    none). A chart that cannot be read is reported by `write_chart`, later, with its reason."""
    with tempfile.TemporaryDirectory(prefix="det-k8s-chart-") as scratch:
        try:
            data = _copy_user_chart(source, Path(scratch) / "chart")
        except (InputError, OSError, ValueError, EOFError, tarfile.TarError, zlib.error):  # write_chart says why
            return None
    named = data.get("appVersion")
    found = parse_version(named) if isinstance(named, str) else None
    return str(found) if found is not None and supported(found) and named == str(found) else None


MAX_CHART_BYTES = 100 * 2**20  # helm's own limit for a decompressed chart (loader.MaxDecompressedChartSize)
MAX_FILE_BYTES = 5 * 2**20  # helm's own limit for one file of a chart (loader.MaxDecompressedFileSize)
MAX_CHART_FILES = 5_000


class _Bounded:
    """A read-only stream that refuses to give more than `limit` bytes: the gzip bomb stops here, whatever
    the tar headers claim (tarfile reads PAX headers and skipped members from it too)."""

    def __init__(self, raw: Any, limit: int, source: Path) -> None:
        self.raw, self.left, self.source = raw, limit, source

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(self.left + 1 if size is None or size < 0 else min(size, self.left + 1))
        self.left -= len(data)
        if self.left < 0:
            raise InputError(f"{self.source}: unpacks to more than {MAX_CHART_BYTES // 2**20} MiB; "
                             "helm refuses charts that large too")
        return bytes(data)


def _extract_chart_archive(source: Path, target: Path) -> None:
    """Unpack a `helm package` archive, bounded: at most MAX_CHART_BYTES in all, MAX_FILE_BYTES a file,
    MAX_CHART_FILES entries; only regular files and directories, every path inside the chart directory.

    The archive is read as a stream, member by member, so a member that breaks a limit stops the
    unpacking before its data is decompressed; links, devices, absolute paths and `..` are refused,
    never skipped silently.
    """
    try:
        with gzip.open(source, "rb") as raw:
            bounded: Any = _Bounded(raw, MAX_CHART_BYTES + 2**20, source)
            with tarfile.open(fileobj=bounded, mode="r|") as archive:
                _unpack(archive, source, target)
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{source}: not a readable .tgz chart archive ({exc})",
                         hint="make it with `helm package`") from exc
    if not (target / "Chart.yaml").is_file():
        raise InputError(f"{source}: no Chart.yaml in its chart directory; not a packaged chart")


def _unpack(archive: tarfile.TarFile, source: Path, target: Path) -> None:
    top: str | None = None
    total = files = 0
    target.mkdir(parents=True)
    for member in archive:
        files += 1
        if files > MAX_CHART_FILES:
            raise InputError(f"{source}: more than {MAX_CHART_FILES} entries; not a chart")
        name = member.name
        parts = Path(name).parts
        if name.startswith("/") or ".." in parts or "\\" in name or not parts:
            raise InputError(f"{source}: entry {name[:200]!r} points outside the chart directory; refused")
        if top is None:
            top = parts[0]
        elif parts[0] != top:
            raise InputError(f"{source}: expected one chart directory inside the archive, found {top} and {parts[0]}")
        if member.issym() or member.islnk():
            raise InputError(f"{source}: entry {name[:200]!r} is a link; charts made by `helm package` hold none")
        if not (member.isfile() or member.isdir()):
            raise InputError(f"{source}: entry {name[:200]!r} is not a file or directory; refused")
        rel = Path(*parts[1:]) if len(parts) > 1 else None
        if rel is None:
            continue
        dest = target / rel
        if member.isdir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        if member.size > MAX_FILE_BYTES:
            raise InputError(f"{source}: {name[:200]} is {member.size // 2**20} MiB; helm refuses chart files over "
                             f"{MAX_FILE_BYTES // 2**20} MiB")
        total += member.size
        if total > MAX_CHART_BYTES:
            raise InputError(f"{source}: unpacks to more than {MAX_CHART_BYTES // 2**20} MiB; helm refuses charts "
                             "that large too")
        dest.parent.mkdir(parents=True, exist_ok=True)
        extracted = archive.extractfile(member)
        data = extracted.read(MAX_FILE_BYTES + 1) if extracted is not None else b""
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # never through a link, never twice
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)


def _chart_defaults(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(f"{path.name} of the chart: not valid YAML: {exc}") from exc
    return loaded if isinstance(loaded, dict) else {}


MARKER_HEAD = ("rendered by det-k8s; `det-k8s render` may replace this directory, and only if it holds no file "
               "but these, which it wrote:\n")


def _files(root: Path) -> list[str]:
    """Every file and link under `root`, as paths relative to it, sorted (directories are implied)."""
    found: list[str] = []
    for base, dirs, names in os.walk(root):
        here = Path(base)
        found.extend(str((here / name).relative_to(root)) for name in names)
        found.extend(str((here / name).relative_to(root)) for name in dirs if (here / name).is_symlink())
    return sorted(found)


def _refuse_foreign_files(out: Path, written: list[str]) -> None:
    """A previous det-k8s render at `out` is replaced whole: refuse when it holds files det-k8s did not write
    there (the marker lists them) and will not write now, naming them, rather than delete them."""
    if not out.is_dir():
        return
    try:
        listed = (out / MARKER).read_text(encoding="utf-8").splitlines()[1:]
    except (OSError, UnicodeDecodeError):
        listed = []
    ours = set(listed) | set(written) | {MARKER}
    foreign = [name for name in _files(out) if name not in ours]
    if foreign:
        names = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise UsageError(f"--output-dir {out}: holds files det-k8s did not write ({names}); a new render replaces "
                         "the directory and would delete them", hint="move them out, or render into a new directory")


def _prepare_destination(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output-dir {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise UsageError(f"--output-dir {out}: directory is not empty and was not written by det-k8s",
                         hint="choose a new directory, or empty this one")


def write_chart(out: Path, values: Mapping[str, Any], app_version: str, chart: Path | None = None) -> ChartResult:
    """Assemble the chart at `out`, replacing a previous det-k8s render there atomically."""
    try:
        return _write_chart(out, values, app_version, chart)
    except OSError as exc:  # read-only file system, no permission, a file where a directory should be...
        reason = exc.strerror or str(exc)
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(out) else ""
        raise InputError(f"--output-dir {out}: cannot write the chart there: {reason}{where}",
                         hint="choose a directory you can write to") from exc


def _write_chart(out: Path, values: Mapping[str, Any], app_version: str, chart: Path | None) -> ChartResult:
    _prepare_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = stopping.private_dir(f".{out.name}.", out.parent)  # removed whatever stops det-k8s (main's sweep)
    try:
        build = staging / "chart"
        if chart is None:
            shutil.copytree(bundled_chart_dir(), build)
            base = yaml.safe_load((build / "Chart.yaml").read_text(encoding="utf-8"))
        else:
            base = _copy_user_chart(chart, build)
        (build / "Chart.yaml").write_text(render_chart_yaml(app_version, base), encoding="utf-8")
        values_path = build / "values.yaml"
        if values_path.exists():
            if chart is not None:  # the user's chart's own defaults stay; the settings go over them
                values = deep_merge(_chart_defaults(values_path), values)
            values_path.unlink()
        fd = os.open(values_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SECRET_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(render_values(values, app_version))
        if chart is None:
            schema_text = json.dumps(values_json_schema(), indent=2) + "\n"
            (build / "values.schema.json").write_text(schema_text, encoding="utf-8")
            (build / "templates" / FACTS_FILE).write_text(versions_tpl(), encoding="utf-8")
            (build / "templates" / SCHEDULER_FILE).write_text(chart_template(), encoding="utf-8")
        written = _files(build)
        (build / MARKER).write_text(MARKER_HEAD + "".join(f"{name}\n" for name in written), encoding="utf-8")
        _refuse_foreign_files(out, written)
        _swap_into_place(build, out, staging)
    finally:
        stopping.remove_private(staging)
    return ChartResult(out, out / "values.yaml", out / "Chart.yaml", bundled=chart is None)


def _swap_into_place(build: Path, out: Path, staging: Path) -> None:
    if out.exists():
        old = staging / "old"
        os.replace(out, old)
        try:
            os.replace(build, out)
        except OSError:
            os.replace(old, out)  # put the previous render back
            raise
    else:
        os.replace(build, out)
