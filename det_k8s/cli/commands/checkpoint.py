"""`det-k8s checkpoint check`: prove checkpoint storage works before Determined needs it.

`require_working_storage` is also what `install` and `upgrade` call (unless
`--skip-storage-check`): it probes with a spinner, prints the report, and raises
StorageCheckFailed, so `main` prints the one summary line and exits 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ...errors import StorageCheckFailed
from .. import output
from ..inputs import SetOpt, SetStringOpt, ValuesOpt, load_settings_from_cli
from ..options import OFFLINE, OutputOpt, with_options
from ..output import OutputFormat

if TYPE_CHECKING:  # the storage package and settings load when the command runs, not for --help
    from ...settings import Settings
    from ...storage import StorageReport

HELP = "Checkpoint storage: prove the bucket works before Determined needs it."

TimeoutOpt = Annotated[str | None, typer.Option(
    "--timeout", metavar="DURATION", show_default=False,
    help="Time limit of each storage call, as a Go duration such as 10s or 1m (a bare number means seconds; "
         "default 10s): to connect, and again for the answer. Calls are never retried.")]


MAX_STORAGE_TIMEOUT = 3600.0  # one storage call; beyond an hour it is not a time limit


def storage_timeout(text: str | None) -> float | None:
    """--timeout as seconds, parsed like every other duration (a bare number is seconds)."""
    from ...tools.duration import parse_duration

    return None if text is None else parse_duration(text, maximum=MAX_STORAGE_TIMEOUT)


def print_report(report: StorageReport, output_format: OutputFormat = OutputFormat.table) -> None:
    """The report's data on stdout (a table, or JSON/YAML), its warnings on stderr."""
    for text in report.warnings:
        output.warning(text)
    if output_format is not OutputFormat.table:
        output.data(report.to_dict(), output_format)
    else:
        rows = [(r.step.value, r.status.value, r.reason.value if r.reason else "", r.message)
                for r in report.steps]
        output.table(["step", "result", "reason", "detail"], rows,
                     title=f"checkpoint storage: {report.storage_type} {report.location}")
    if report.left_behind:
        output.warning(f"the probe object {report.left_behind} may be left behind: delete it by hand")


def require_working_storage(settings: Settings, *, timeout: float | None = None,
                            output_format: OutputFormat = OutputFormat.table) -> StorageReport:
    """Probe checkpoint storage, print the report, raise StorageCheckFailed unless it works.

    `timeout` bounds each storage call, in seconds (None: `storage.DEFAULT_TIMEOUT`).
    """
    from ...storage import DEFAULT_TIMEOUT, check_storage

    with output.spinner(f"Probing {settings.checkpoint.type} checkpoint storage"):
        report = check_storage(settings, timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
    print_report(report, output_format)
    if not report.ok:
        first = report.failures[0] if report.failures else None
        detail = f"{first.step.value}: {first.message}" if first else report.summary()
        raise StorageCheckFailed(f"checkpoint storage check failed: {detail}")
    if output_format is OutputFormat.table and report.checked:
        output.success(report.summary())
    return report


@with_options(*OFFLINE)  # the storage only: no cluster
def check(
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    timeout: TimeoutOpt = None,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Write, read back, list and delete a probe object in checkpoint storage; exit 0 only if all work.

    shared_fs is checked only when hostPath exists on this machine; otherwise nothing is probed, a
    warning says so, and the exit code is 0.
    """
    loaded = load_settings_from_cli(values, set_, set_string)
    require_working_storage(loaded.settings(), timeout=storage_timeout(timeout), output_format=output_format)
