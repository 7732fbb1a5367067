"""`check_storage`: the one entry point, from validated settings to a report.

Picks the backend for `checkpointStorage.type`, writes a uniquely named probe of random bytes
under the prefix, and passes every message through the secret scrubber, a last time over the
whole report too, so no path from an SDK exception to the screen skips it.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .. import stopping
from ..errors import StorageError
from ..scrub_output import Scrubber
from . import shared_fs
from .azure import AzureBackend
from .gcs import GCSBackend
from .probe import Backend, probe_key, run_probe
from .report import StepResult, StorageReport
from .s3 import S3Backend

if TYPE_CHECKING:
    from ..settings import Settings

CLOCK_SKEW = 30  # seconds another machine's clock may be behind or ahead of this one's

DEFAULT_TIMEOUT = 10.0
PROBE_SIZE = 256


def check_storage(settings: Settings, *, timeout: float = DEFAULT_TIMEOUT) -> StorageReport:
    """Probe the checkpoint storage the settings name: write, read back, list, delete.

    `timeout` bounds each storage call (connect and read), in seconds; no call is retried. Never
    raises for a storage failure (those are in the report); raises StorageError only for a storage
    type it does not know.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    storage = settings.checkpoint
    scrub = Scrubber(storage.secrets)
    warnings: tuple[str, ...] = ()
    directory = (storage.prefix or "").strip("/") if storage.type in ("s3", "gcs") else ""
    backend: Backend
    if storage.type == "s3":
        backend = S3Backend(storage, timeout=timeout, directory=directory)
    elif storage.type == "gcs":
        backend = GCSBackend(storage, timeout=timeout, directory=directory)
    elif storage.type == "azure":
        backend = AzureBackend(storage, timeout=timeout)
    elif storage.type == "shared_fs":
        path = storage.host_path or ""
        if not Path(path).exists():
            return shared_fs.not_checked(path)
        backend = shared_fs.LocalDirBackend(Path(path))
        warnings = (shared_fs.TESTING_ONLY.format(path=path), shared_fs.PROBED_HERE.format(path=path))
    else:
        raise StorageError(f"checkpointStorage.type {storage.type!r} cannot be checked",
                           hint="use shared_fs, s3, gcs or azure")
    # the probe's name says by when this check has ended whatever happens: its calls (write, read, up to two lists,
    # delete, the SDK's first credential lookup; each up to a connect and a read timeout), a stopped check's grace,
    # and CLOCK_SKEW for another machine's check judging it by its own clock
    expires = int(time.time() + 12 * timeout + stopping.GRACE_SECONDS + CLOCK_SKEW) + 1
    report = run_probe(backend, probe_key(directory, expires=expires), os.urandom(PROBE_SIZE), storage_type=storage.type,
                       scrub=scrub, warnings=warnings)
    return _scrubbed(report, scrub)


def _scrubbed(report: StorageReport, scrub: Scrubber) -> StorageReport:
    return replace(
        report,
        location=scrub(report.location),
        probe=scrub(report.probe),
        left_behind=scrub(report.left_behind) if report.left_behind else None,
        warnings=tuple(scrub(text) for text in report.warnings),
        steps=tuple(StepResult(r.step, r.status, scrub(r.message), r.reason) for r in report.steps),
    )
