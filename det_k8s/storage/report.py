"""What a storage check found, as plain frozen data.

The report is the contract between the probe, the `checkpoint check` command and the release
commands: each of the four operations the master needs (write, read, list, delete) is reported on
its own, because each needs its own permission and a user must know which one is missing. Nothing
here prints; `to_dict` and `summary` give the CLI what it shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Step(str, Enum):
    WRITE = "write"
    READ = "read"
    LIST = "list"
    DELETE = "delete"


STEPS = (Step.WRITE, Step.READ, Step.LIST, Step.DELETE)


class Status(str, Enum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class Reason(str, Enum):
    """Why a step failed, in categories a user can act on."""

    NO_SUCH_BUCKET = "no_such_bucket"  # bucket, container or directory missing
    ACCESS_DENIED = "access_denied"  # the credentials are valid but lack a permission
    UNREACHABLE = "unreachable"  # no connection: refused, name not resolved, connect timeout
    BAD_CREDENTIALS = "bad_credentials"  # unknown key, wrong secret, no credentials found
    TIMEOUT = "timeout"  # connected, but no answer in time: the request may have been done
    MISMATCH = "mismatch"  # the call worked but the data is not what was written
    OTHER = "other"


@dataclass(frozen=True)
class Failure:
    """A classified failure: the category and one line naming the missing permission or setting.

    `refused` says the service answered that it did not do it (an HTTP 4xx), whatever the reason:
    a write refused so has certainly left nothing behind.
    """

    reason: Reason
    message: str
    refused: bool = False


@dataclass(frozen=True)
class StepResult:
    step: Step
    status: Status
    message: str
    reason: Reason | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class StorageReport:
    """The outcome of one probe of checkpoint storage.

    `checked` is False only for shared_fs when the hostPath cannot be reached from this machine:
    then every step is skipped, `warnings` say why, and `ok` is True because nothing was found
    wrong (det-k8s cannot see the nodes' disks). Otherwise `ok` means all four steps passed.
    """

    storage_type: str
    location: str
    probe: str
    steps: tuple[StepResult, ...]
    left_behind: str | None = None
    warnings: tuple[str, ...] = field(default=())
    checked: bool = True

    @property
    def ok(self) -> bool:
        if not self.checked:
            return not self.failures
        return all(result.ok for result in self.steps)

    @property
    def failures(self) -> tuple[StepResult, ...]:
        return tuple(result for result in self.steps if result.status is Status.FAILED)

    def result(self, step: Step) -> StepResult:
        return next(result for result in self.steps if result.step is step)

    def summary(self) -> str:
        """One line: what works, or the first failure with its reason."""
        if not self.checked:
            return f"{self.storage_type} storage at {self.location} was not checked from here"
        if self.ok:
            return f"{self.storage_type} storage at {self.location} works: write, read, list and delete pass"
        failed = self.failures
        if not failed:  # steps skipped without a failure: cannot happen from run_probe, said plainly anyway
            return f"{self.storage_type} storage at {self.location} was not fully checked"
        names = ", ".join(result.step.value for result in failed)
        return f"{self.storage_type} storage at {self.location} failed ({names}): {failed[0].message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON/YAML-ready data with stable keys."""
        return {
            "ok": self.ok,
            "checked": self.checked,
            "type": self.storage_type,
            "location": self.location,
            "probe": self.probe,
            "steps": [
                {"step": r.step.value, "status": r.status.value,
                 "reason": r.reason.value if r.reason else None, "message": r.message}
                for r in self.steps
            ],
            "leftBehind": self.left_behind,
            "warnings": list(self.warnings),
        }
