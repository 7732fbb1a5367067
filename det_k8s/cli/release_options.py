"""The flags the release commands share (install, upgrade, uninstall, list, diff, history, rollback, get).

Declarations only, so that building a command's `--help` imports nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import UsageError
from ..tools.duration import HELP as DURATION_HELP
from .options import output_format as output_format_of
from .output import OutputFormat

ReleaseArg = Annotated[str, typer.Argument(metavar="RELEASE", help="The helm release name, e.g. determined.",
                                           show_default=False)]
ChartOpt = Annotated[Path | None, typer.Option(
    "--chart", metavar="PATH", help="Install your copy of the Determined chart (directory or .tgz) instead of the "
    "bundled one; it is copied and rendered, never modified.")]
TimeoutOpt = Annotated[str, typer.Option("--timeout", metavar="DURATION",
                                         help=f"How long helm waits: {DURATION_HELP}.")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Print the helm command and the manifests (Secret values redacted); contact no cluster.")]
RollbackOpt = Annotated[bool, typer.Option(
    "--rollback-on-failure", "--atomic", help="Undo a failed change (helm 4 --rollback-on-failure, helm 3 --atomic).")]
ReleaseOutputOpt = Annotated[OutputFormat, typer.Option(
    "--output", "-o", parser=output_format_of, metavar="FORMAT",
    help="table: the messages only; json or yaml: also the release (name, namespace, status, Determined version, "
    "master URL) on stdout, as helm's -o.")]
AlwaysWaitsOpt = Annotated[bool, typer.Option(
    "--wait", help="Accepted as helm takes it: det-k8s always waits until the master and database are ready (up to "
    "--timeout).")]

def _no_chart_version(value: str | None) -> str | None:
    if value is not None:
        raise UsageError(f"--version {value}: the bundled chart has no versions of its own; the Determined release is "
                         "appVersion", hint=f"add --set appVersion={value} (or appVersion: in a -f file)")
    return value


VersionOpt = Annotated[str | None, typer.Option(
    "--version", metavar="VERSION", hidden=True, callback=_no_chart_version, show_default=False,
    help="helm's chart version: refused with the appVersion to set instead.")]
SkipStorageOpt = Annotated[bool, typer.Option("--skip-storage-check", help="Do not probe the checkpoint storage.")]
