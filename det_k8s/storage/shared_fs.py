"""shared_fs: a hostPath directory on the nodes, checked only as far as it can be from here.

`checkpointStorage.hostPath` is a path on the Kubernetes *nodes*, mounted into the master and
task pods; det-k8s runs somewhere else, usually a laptop. So: when the path exists on this
machine (a single-node cluster, or det-k8s run on a node), it is probed like a bucket, and the
report says that the nodes' directory may still differ; when it does not, nothing is probed and
the report says plainly that it cannot be checked from here. Either way it warns that shared_fs is
for testing only.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path

from .report import STEPS, Failure, Reason, Status, Step, StepResult, StorageReport

TESTING_ONLY = ("shared_fs is for testing only: checkpoints go to hostPath {path} on whichever node "
                "runs a task, and the nodes of most clusters share no file system; use s3, gcs or azure "
                "for real work")
PROBED_HERE = ("hostPath {path} exists on this machine and was probed here; the nodes' {path} may still be a "
               "different directory")
NOT_HERE = ("cannot check hostPath from here: {path} is a directory on the nodes and does not exist on "
            "this machine")

_VERB = {Step.WRITE: "create files in", Step.READ: "read files in", Step.LIST: "list",
         Step.DELETE: "delete files in"}


class LocalDirBackend:
    """A directory on this machine, with the probe's four operations."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def location(self) -> str:
        return f"{self.directory}/"

    def url(self, key: str) -> str:
        return str(self.directory / key)

    def write(self, key: str, data: bytes) -> None:
        with open(self.directory / key, "xb") as handle:  # "x": never overwrite anything
            handle.write(data)

    def read(self, key: str) -> bytes:
        return (self.directory / key).read_bytes()

    def list(self, prefix: str) -> Iterable[str]:
        return [name for name in os.listdir(self.directory) if name.startswith(prefix)]

    def delete(self, key: str) -> None:
        (self.directory / key).unlink(missing_ok=True)

    def explain(self, exc: Exception, step: Step) -> Failure:
        where = self.directory
        if isinstance(exc, FileNotFoundError) and step is not Step.READ:
            return Failure(Reason.NO_SUCH_BUCKET, f"directory {where} does not exist; create it or fix "
                                                  "checkpointStorage.hostPath")
        if isinstance(exc, NotADirectoryError):
            return Failure(Reason.OTHER,
                           f"{where} is not a directory; checkpointStorage.hostPath must name one")
        if isinstance(exc, PermissionError):
            return Failure(Reason.ACCESS_DENIED, f"access denied: this user (uid {os.getuid()}) cannot "
                                                 f"{_VERB[step]} {where}")
        if isinstance(exc, OSError) and exc.errno == errno.EROFS:
            return Failure(Reason.ACCESS_DENIED, f"access denied: {where} is on a read-only file system")
        if isinstance(exc, OSError):
            return Failure(Reason.OTHER, f"{where}: {exc.strerror or exc}")
        return Failure(Reason.OTHER, f"{type(exc).__name__}: {exc}")


def not_checked(path: str) -> StorageReport:
    """The report for a hostPath that is not on this machine: every step skipped, said why."""
    reason = NOT_HERE.format(path=path)
    return StorageReport(storage_type="shared_fs", location=f"{path}/", probe="",
                         steps=tuple(StepResult(step, Status.SKIPPED, reason) for step in STEPS),
                         warnings=(TESTING_ONLY.format(path=path), reason), checked=False)
