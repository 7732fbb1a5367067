"""The probe itself: write, read back and compare, list, delete, against any backend.

Pure logic: a backend (`s3.py`, `gcs.py`, `azure.py`, `shared_fs.py`, or a test double) does the
I/O and translates its SDK's exceptions into `Failure`s; this module decides the order, what to
skip after a failure, and makes sure the probe object never stays behind: once the write may have
happened, the delete is attempted whatever failed in between (and also when the check is
interrupted), and a delete that fails names the object left behind.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Protocol

from .. import stopping
from .report import STEPS, Failure, Reason, Status, Step, StepResult, StorageReport

PROBE_PREFIX = "det-k8s-probe-"

# Failures that prove the write did not happen (the request was refused or never sent), so there
# is nothing to delete; so does a Failure marked `refused` (a 4xx answer). Any other failure, a
# timeout above all, may have written the object.
_NOT_WRITTEN = frozenset({Reason.NO_SUCH_BUCKET, Reason.ACCESS_DENIED, Reason.BAD_CREDENTIALS,
                          Reason.UNREACHABLE})


class Backend(Protocol):
    """One storage service, as the probe needs it. Each call must have a time limit."""

    @property
    def location(self) -> str:
        """Where probes go, for messages: `s3://bucket/prefix/` (no secrets)."""
        ...

    def url(self, key: str) -> str:
        """The full name of an object, for messages: `s3://bucket/key`."""
        ...

    def write(self, key: str, data: bytes) -> None: ...

    def read(self, key: str) -> bytes: ...

    def list(self, prefix: str) -> Iterable[str]:
        """Names of the objects whose names start with `prefix`."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object; succeed when it is already absent (as S3's DeleteObject does)."""
        ...

    def explain(self, exc: Exception, step: Step) -> Failure:
        """Classify an exception raised by one of the calls above."""
        ...


EXPIRES = "expires-"


def probe_key(prefix: str | None, token: str | None = None, *, expires: int | None = None) -> str:
    """`<prefix>/det-k8s-probe-<uuid4>`, or with `expires` (Unix seconds by which the check that writes it has ended,
    however it ended) `<prefix>/det-k8s-probe-expires-<expires>-<uuid4>`: a later check deletes it if it is still
    there then (a check killed outright left it). The prefix is a directory, as Determined treats it: `research`,
    `research/` and `/research/` all give `research/det-k8s-probe-...`."""
    name = PROBE_PREFIX + (token or (f"{EXPIRES}{expires}-{uuid.uuid4()}" if expires else str(uuid.uuid4())))
    directory = (prefix or "").strip("/")
    return f"{directory}/{name}" if directory else name


def expired(key: str, now: float) -> bool:
    """Whether `key` is a probe object whose check has ended by `now` (Unix seconds): its name says by when."""
    name = key.rpartition("/")[2]
    if not name.startswith(PROBE_PREFIX + EXPIRES):
        return False  # another naming: never deleted on a guess
    stamp = name[len(PROBE_PREFIX + EXPIRES):].partition("-")[0]
    return stamp.isdigit() and int(stamp) < now


def run_probe(backend: Backend, key: str, data: bytes, *, storage_type: str,
              scrub: Callable[[str], str] = str, warnings: tuple[str, ...] = (),
              now: Callable[[], float] = time.time) -> StorageReport:
    """Write `data` to `key`, read it back and compare, list it, delete it; report each step.

    The list step lists every probe object in the key's directory: once this probe is deleted, those whose check
    has ended by their name (`probe_key(expires=...)`: a check killed outright, or stopped twice while deleting)
    are deleted too."""
    results: dict[Step, StepResult] = {}
    listed: list[str] = []

    def as_result(step: Step, failure: Failure) -> StepResult:
        return StepResult(step, Status.FAILED, scrub(failure.message), failure.reason)

    def failed(step: Step, exc: Exception) -> StepResult:
        return as_result(step, backend.explain(exc, step))

    may_exist = True  # pessimistic until the write's outcome is known: an interrupt must still clean up
    interrupted = False
    try:
        try:
            backend.write(key, data)
            results[Step.WRITE] = StepResult(Step.WRITE, Status.OK, f"wrote {len(data)} random bytes")
        except Exception as exc:  # classified into the report, never lost
            failure = backend.explain(exc, Step.WRITE)
            results[Step.WRITE] = as_result(Step.WRITE, failure)
            may_exist = not (failure.refused or failure.reason in _NOT_WRITTEN)
        if results[Step.WRITE].ok:
            results[Step.READ] = _read(backend, key, data, failed)
            results[Step.LIST] = _list(backend, key, failed, listed)
        else:
            for step in (Step.READ, Step.LIST):
                results[step] = StepResult(step, Status.SKIPPED, "skipped: the write failed")
    except BaseException:  # a signal or Ctrl-C (det_k8s/stopping.py): the delete below runs all the same
        interrupted = True
        raise
    finally:
        if may_exist:
            try:
                backend.delete(key)
                results[Step.DELETE] = StepResult(Step.DELETE, Status.OK, "deleted the probe object")
                if interrupted:
                    stopping.note(f"deleted the storage probe object {backend.url(key)}")
            except Exception as exc:  # classified into the report, never lost
                result = failed(Step.DELETE, exc)
                results[Step.DELETE] = StepResult(
                    Step.DELETE, Status.FAILED,
                    f"{result.message}; the probe object {backend.url(key)} may be left behind: delete it",
                    result.reason)
                if interrupted:
                    stopping.note(left_behind(backend.url(key)))
            except BaseException:  # a second signal cut the delete short: name the object and how to delete it
                stopping.note(left_behind(backend.url(key)))
                raise
        else:
            results[Step.DELETE] = StepResult(Step.DELETE, Status.SKIPPED, "skipped: nothing was written")
    if results[Step.DELETE].ok and (stale := [k for k in listed if k != key and expired(k, now())]):
        results[Step.DELETE] = _delete_stale(backend, stale, results[Step.DELETE])
    left = backend.url(key) if results[Step.DELETE].status is Status.FAILED else None
    return StorageReport(storage_type=storage_type, location=backend.location, probe=backend.url(key),
                         steps=tuple(results[step] for step in STEPS),
                         left_behind=left, warnings=warnings)


def left_behind(url: str) -> str:
    """The probe object a stopped check may leave, and the command that deletes it."""
    if url.startswith("s3://"):
        command = f"aws s3 rm {url}"
    elif url.startswith("gs://"):
        command = f"gcloud storage rm {url}"
    elif url.startswith(("http://", "https://")):
        account_container, _, blob = url.split("://", 1)[1].partition("/")[2].partition("/")
        command = f"az storage blob delete --container-name {account_container} --name {blob}"
    else:
        command = f"rm {url}"
    return f"the storage probe object {url} may be left behind: {command}"


_Failed = Callable[[Step, Exception], StepResult]


def _read(backend: Backend, key: str, data: bytes, failed: _Failed) -> StepResult:
    try:
        got = backend.read(key)
    except Exception as exc:  # classified into the report, never lost
        return failed(Step.READ, exc)
    if got != data:
        return StepResult(Step.READ, Status.FAILED,
                          f"read back {len(got)} bytes that differ from the {len(data)} bytes written "
                          "(a proxy or gateway changing objects?)", Reason.MISMATCH)
    return StepResult(Step.READ, Status.OK, f"read {len(got)} bytes back, identical")


def _delete_stale(backend: Backend, stale: list[str], done: StepResult) -> StepResult:
    """Delete the probe objects of checks that ended without deleting theirs; say how many, and which stay."""
    gone, kept = 0, []
    for key in stale:
        try:
            backend.delete(key)
            gone += 1
        except Exception:  # noqa: BLE001 - someone else's leftover: named below, never fails this check
            kept.append(backend.url(key))
    message = done.message
    if gone:
        message += f"; deleted {gone} probe object(s) an earlier check left (stopped before it could)"
    if kept:
        message += f"; could not delete {', '.join(kept[:3])}" + (" ..." if len(kept) > 3 else "")
    return StepResult(Step.DELETE, done.status, message, done.reason)


def _list(backend: Backend, key: str, failed: _Failed, listed: list[str]) -> StepResult:
    directory, _, name = key.rpartition("/")
    every_probe = f"{directory}/{PROBE_PREFIX}" if directory else PROBE_PREFIX
    try:
        names = set(backend.list(every_probe if name.startswith(PROBE_PREFIX) else key))
        if key not in names and len(names) >= 100:  # one page of others' probes: ask for this one by name
            names |= set(backend.list(key))
    except Exception as exc:  # classified into the report, never lost
        return failed(Step.LIST, exc)
    listed.extend(sorted(names))
    if key not in names:
        return StepResult(Step.LIST, Status.FAILED,
                          f"listing {backend.url(key)} does not show the object just written",
                          Reason.MISMATCH)
    return StepResult(Step.LIST, Status.OK, "listed the probe object")
