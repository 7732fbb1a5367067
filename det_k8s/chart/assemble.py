"""Write a complete chart directory: the bundled chart (or a copy of the user's) plus rendered files.

The directory is built beside its destination and moved into place at the end, so a failure
never leaves half a chart behind, and an existing directory is replaced only when det-k8s wrote
it (a marker file says so). The user's own chart is read, never written. values.yaml is mode
0600 because it holds the database password and any storage keys.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..bounded import load_yaml, read_file
from ..errors import InputError, UsageError
from ..settings.jsonschema_export import values_json_schema
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
    if source.is_dir():
        if not (source / "Chart.yaml").is_file():
            raise InputError(f"{source}: not a Helm chart (no Chart.yaml)", hint="pass the chart's directory")
        shutil.copytree(source, target, symlinks=False, ignore=shutil.ignore_patterns(".git"))
    elif source.is_file() and source.name.endswith((".tgz", ".tar.gz")):
        _extract_chart_archive(source, target)
    elif not source.exists():
        raise InputError(f"{source}: no such chart directory or archive")
    else:
        raise InputError(f"{source}: expected a chart directory or a .tgz made by `helm package`")
    data = load_yaml(read_file(target / "Chart.yaml", "Chart.yaml"), f"{source}/Chart.yaml") or {}
    if not isinstance(data, dict):
        raise InputError(f"{source}/Chart.yaml: expected a mapping")
    return data


def _extract_chart_archive(source: Path, target: Path) -> None:
    with tarfile.open(source, "r:gz") as archive:
        members = archive.getmembers()
        tops = {m.name.split("/", 1)[0] for m in members}
        if len(tops) != 1:
            raise InputError(f"{source}: expected one chart directory inside the archive")
        top = tops.pop()
        target.mkdir(parents=True)
        for member in members:
            rel = member.name.split("/", 1)[1] if "/" in member.name else ""
            if not rel or member.issym() or member.islnk() or ".." in Path(rel).parts:
                continue
            dest = target / rel
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                dest.parent.mkdir(parents=True, exist_ok=True)
                extracted = archive.extractfile(member)
                dest.write_bytes(extracted.read() if extracted else b"")
        if not (target / "Chart.yaml").is_file():
            raise InputError(f"{source}: {top}/Chart.yaml missing; not a packaged chart")


def _prepare_destination(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise UsageError(f"--output {out}: directory is not empty and was not written by det-k8s",
                         hint="choose a new directory, or empty this one")


def write_chart(out: Path, values: Mapping[str, Any], app_version: str, chart: Path | None = None) -> ChartResult:
    """Assemble the chart at `out`, replacing a previous det-k8s render there atomically."""
    try:
        return _write_chart(out, values, app_version, chart)
    except OSError as exc:  # read-only file system, no permission, a file where a directory should be...
        reason = exc.strerror or str(exc)
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(out) else ""
        raise InputError(f"--output {out}: cannot write the chart there: {reason}{where}",
                         hint="choose a directory you can write to") from exc


def _write_chart(out: Path, values: Mapping[str, Any], app_version: str, chart: Path | None) -> ChartResult:
    _prepare_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
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
            values_path.unlink()
        fd = os.open(values_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SECRET_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(render_values(values))
        if chart is None:
            schema_text = json.dumps(values_json_schema(), indent=2) + "\n"
            (build / "values.schema.json").write_text(schema_text, encoding="utf-8")
        (build / MARKER).write_text("rendered by det-k8s; `det-k8s render` may replace this directory\n",
                                    encoding="utf-8")
        _swap_into_place(build, out, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
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
