"""The one exception hierarchy of det-k8s.

Every failure a user can meet is one of these classes. Each carries its exit code and an
optional hint, and the CLI turns them into `error: ...` lines in exactly one place
(`det_k8s.cli.main`). Nothing else in the program prints errors or chooses exit codes, so a
message never appears twice and a traceback never reaches a user (except with `--debug`).

Exit codes: 0 ok, 1 the operation failed or the settings are invalid, 2 usage error,
130 interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class DetK8sError(Exception):
    """Base class: an operation failed (exit 1)."""

    exit_code: int = EXIT_FAILURE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(DetK8sError):
    """The command line itself is wrong: a bad argument, a missing consent (exit 2)."""

    exit_code = EXIT_USAGE


class ConsentRequired(UsageError):
    """A destructive action was asked for without a terminal to confirm and without --yes."""


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Location:
    """Where a value came from: a file and a 1-based line, or a command-line argument."""

    source: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.source}:{self.line}" if self.line is not None else self.source


@dataclass(frozen=True)
class Problem:
    """One finding about user input, named by its key path (`checkpointStorage.bucket`)."""

    severity: Severity
    path: str
    message: str
    hint: str | None = None
    location: Location | None = field(default=None, compare=False)

    def render(self) -> str:
        text = f"{self.severity.value}: {self.path}: {self.message}" if self.path else (
            f"{self.severity.value}: {self.message}"
        )
        if self.hint:
            text += f"; {self.hint}"
        if self.location is not None:
            text += f" ({self.location})"
        return text

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


class SettingsError(DetK8sError):
    """User settings are invalid: carries every problem found, not just the first (exit 1)."""

    def __init__(self, problems: Sequence[Problem], *, reported: bool = False) -> None:
        self.problems = tuple(problems)
        self.reported = reported  # the command printed them already; only a summary remains to say
        count = len(self.problems)
        super().__init__(f"settings are invalid: {count} error{'s' * (count != 1)}")


class InputError(DetK8sError):
    """A file the user gave cannot be read or parsed (names the file and line, exit 1)."""


class MalformedObject(InputError):
    """A Kubernetes object of another shape than Kubernetes gives it (names kind, name and field; exit 1)."""

    def __init__(self, kind: str, name: str, problem: str, *, source: str = "") -> None:
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{kind} {name}: {problem}",
                         hint="is this what `kubectl get -o json` prints? fix or remove that object")
        self.kind, self.name, self.problem = kind, name, problem

    def at(self, source: str) -> MalformedObject:
        """The same error, naming the file or listing the object came from."""
        return MalformedObject(self.kind, self.name, self.problem, source=source)


class ToolNotFound(DetK8sError):
    """helm or kubectl is not installed where we looked."""


class ToolFailed(DetK8sError):
    """helm or kubectl ran and exited non-zero; the message keeps the tool's own stderr."""

    def __init__(self, message: str, *, returncode: int, stderr: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.returncode = returncode
        self.stderr = stderr


class OperationTimeout(DetK8sError):
    """An external call did not finish within its time limit."""


class ClusterError(DetK8sError):
    """Talking to the Kubernetes API failed."""


class ClusterUnreachable(ClusterError):
    """The API server could not be reached (names the context)."""


class NotFound(ClusterError):
    """The object does not exist (HTTP 404)."""


class Conflict(ClusterError):
    """Someone else changed or created it first (HTTP 409)."""


class Forbidden(ClusterError):
    """RBAC says no (HTTP 401/403)."""


class Rejected(ClusterError):
    """The API server refused the object itself (HTTP 400/422): invalid, or denied by admission."""


class Expired(ClusterError):
    """A watch's resourceVersion is too old for the API server to replay (HTTP 410 Gone): list again."""


class StorageError(DetK8sError):
    """A checkpoint storage probe could not run at all."""


class StorageCheckFailed(StorageError):
    """The probe ran and checkpoint storage does not do everything the master needs (exit 1).

    The report (printed before this is raised) has the details of each step; the message is the
    one-line summary `main` prints.
    """


class ExperimentError(SettingsError):
    """An experiment file is invalid: carries every problem found, each naming key and file:line (exit 1)."""

    def __init__(self, problems: Sequence[Problem], *, reported: bool = False) -> None:
        super().__init__(problems, reported=reported)
        count = len(self.problems)
        self.message = f"experiment is invalid: {count} error{'s' * (count != 1)}"


class PolicyError(SettingsError):
    """A scheduling policy (its queues) is invalid: every problem, each naming its key path (exit 1)."""

    def __init__(self, problems: Sequence[Problem], *, reported: bool = False) -> None:
        super().__init__(problems, reported=reported)
        count = len(self.problems)
        self.message = f"scheduling policy is invalid: {count} error{'s' * (count != 1)}"


class Unschedulable(DetK8sError):
    """A task can never run as asked: its slots are not a multiple of maxSlotsPerPod (exit 1)."""


class GroupCreationFailed(DetK8sError):
    """Some pod of a group could not be created; the others were removed again, as far as that was possible.

    `leftovers`: what could not be deleted (still there, as far as det-k8s knows). `unconfirmed`: pods
    whose creation got no answer (a timeout, a lost connection, a 5xx) and which were not there to
    delete: the creation may still take effect later. `remaining` is both: what may hold resources
    for a group that is not running, which the caller marks in the queue entry (live/creation_records.py).
    """

    def __init__(self, message: str, *, leftovers: Sequence[str] = (), hint: str | None = None,
                 lasting: bool = False, unconfirmed: Sequence[str] = (), attempt: str = "",
                 pod_group_denied: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.pod_group_denied = pod_group_denied  # the PodGroup's creation was denied (RBAC): no pod was created
        self.leftovers = tuple(leftovers)
        self.lasting = lasting  # trying again unchanged will fail again (see `lasting_refusal`)
        self.unconfirmed = tuple(unconfirmed)
        self.attempt = attempt  # the det-k8s.io/attempt label of this creation's pods ("" when unlabelled)

    @property
    def remaining(self) -> tuple[str, ...]:
        """Pods of this failed creation that exist or may appear (not the Service)."""
        return tuple(n for n in (*self.leftovers, *self.unconfirmed) if "/" not in n)
