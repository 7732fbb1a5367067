"""The probe's order, skips and cleanup, against in-memory test doubles of a storage *backend*.

The doubles implement the Backend protocol (they stand in for a bucket, not for det-k8s code), so
each failure a real service can produce at each step is reachable here, including the ones no
emulator can be made to produce (a delete that fails while everything else works).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from det_k8s.scrub_output import Scrubber
from det_k8s.storage.probe import PROBE_PREFIX, probe_key, run_probe
from det_k8s.storage.report import Failure, Reason, Status, Step

DATA = b"\x00probe\xff" * 8


class BoomError(Exception):
    """What a backend double raises; `reason` says how its explain() classifies it."""

    def __init__(self, reason: Reason, text: str = "boom", *, refused: bool = False) -> None:
        super().__init__(text)
        self.reason = reason
        self.refused = refused


class MemoryBucket:
    """A bucket in a dict; `fail` maps a step to the error that step raises."""

    def __init__(self, fail: dict[Step, BaseException] | None = None, *, corrupt: bool = False,
                 hide_from_list: bool = False) -> None:
        self.objects: dict[str, bytes] = {}
        self.fail = fail or {}
        self.corrupt = corrupt
        self.hide_from_list = hide_from_list
        self.calls: list[Step] = []

    location = "mem://bucket/"

    def url(self, key: str) -> str:
        return f"mem://bucket/{key}"

    def _maybe_fail(self, step: Step) -> None:
        self.calls.append(step)
        if step in self.fail:
            raise self.fail[step]

    def write(self, key: str, data: bytes) -> None:
        self.objects[key] = data  # written first: a failure after the upload (a lost answer)
        self._maybe_fail(Step.WRITE)

    def read(self, key: str) -> bytes:
        self._maybe_fail(Step.READ)
        return self.objects[key][::-1] if self.corrupt else self.objects[key]

    def list(self, prefix: str) -> Iterable[str]:
        self._maybe_fail(Step.LIST)
        return [] if self.hide_from_list else [k for k in self.objects if k.startswith(prefix)]

    def delete(self, key: str) -> None:
        self._maybe_fail(Step.DELETE)
        self.objects.pop(key, None)

    def explain(self, exc: Exception, step: Step) -> Failure:
        assert isinstance(exc, BoomError)
        return Failure(exc.reason, f"{step.value}: {exc}", refused=exc.refused)


class RefusingBucket(MemoryBucket):
    """A service that refuses the write outright: nothing is stored."""

    def write(self, key: str, data: bytes) -> None:
        self._maybe_fail(Step.WRITE)
        self.objects[key] = data


def statuses(report):
    return {r.step: (r.status, r.reason) for r in report.steps}


def test_all_four_steps_pass_and_nothing_is_left():
    bucket = MemoryBucket()
    report = run_probe(bucket, "p/det-k8s-probe-1", DATA, storage_type="mem")
    assert report.ok and report.checked
    assert [r.step for r in report.steps] == [Step.WRITE, Step.READ, Step.LIST, Step.DELETE]
    assert all(r.status is Status.OK and r.reason is None for r in report.steps)
    assert bucket.objects == {} and report.left_behind is None
    assert report.probe == "mem://bucket/p/det-k8s-probe-1"
    assert "works" in report.summary()


def test_a_delete_that_fails_names_the_object_left_behind():
    bucket = MemoryBucket({Step.DELETE: BoomError(Reason.ACCESS_DENIED, "no s3:DeleteObject")})
    report = run_probe(bucket, "k", DATA, storage_type="mem")
    assert not report.ok
    assert statuses(report)[Step.DELETE] == (Status.FAILED, Reason.ACCESS_DENIED)
    assert report.left_behind == "mem://bucket/k"
    delete = report.result(Step.DELETE)
    assert "no s3:DeleteObject" in delete.message and "mem://bucket/k may be left behind" in delete.message
    assert bucket.objects == {"k": DATA}  # really left behind: the report is telling the truth


@pytest.mark.parametrize("step", [Step.READ, Step.LIST])
def test_the_probe_is_deleted_whatever_failed_after_the_write(step):
    bucket = MemoryBucket({step: BoomError(Reason.ACCESS_DENIED)})
    report = run_probe(bucket, "k", DATA, storage_type="mem")
    assert statuses(report)[step] == (Status.FAILED, Reason.ACCESS_DENIED)
    assert statuses(report)[Step.DELETE] == (Status.OK, None)
    assert bucket.objects == {} and not report.ok


def test_read_and_list_are_each_tried_when_the_other_fails():
    bucket = MemoryBucket({Step.READ: BoomError(Reason.ACCESS_DENIED)})
    report = run_probe(bucket, "k", DATA, storage_type="mem")
    assert bucket.calls == [Step.WRITE, Step.READ, Step.LIST, Step.DELETE]
    assert statuses(report)[Step.LIST] == (Status.OK, None)
    assert [r.step for r in report.failures] == [Step.READ]


def test_different_bytes_read_back_are_a_mismatch():
    report = run_probe(MemoryBucket(corrupt=True), "k", DATA, storage_type="mem")
    assert statuses(report)[Step.READ] == (Status.FAILED, Reason.MISMATCH)
    assert "differ" in report.result(Step.READ).message


def test_a_listing_without_the_probe_is_a_mismatch():
    report = run_probe(MemoryBucket(hide_from_list=True), "k", DATA, storage_type="mem")
    assert statuses(report)[Step.LIST] == (Status.FAILED, Reason.MISMATCH)


@pytest.mark.parametrize("reason", [Reason.NO_SUCH_BUCKET, Reason.ACCESS_DENIED, Reason.BAD_CREDENTIALS,
                                    Reason.UNREACHABLE])
def test_a_refused_write_skips_everything_else(reason):
    bucket = RefusingBucket({Step.WRITE: BoomError(reason)})
    report = run_probe(bucket, "k", DATA, storage_type="mem")
    assert bucket.calls == [Step.WRITE]
    assert statuses(report) == {Step.WRITE: (Status.FAILED, reason), Step.READ: (Status.SKIPPED, None),
                                Step.LIST: (Status.SKIPPED, None), Step.DELETE: (Status.SKIPPED, None)}
    assert report.left_behind is None


def test_a_write_the_service_refused_whatever_the_reason_needs_no_delete():
    bucket = RefusingBucket({Step.WRITE: BoomError(Reason.OTHER, "405 Method Not Allowed", refused=True)})
    report = run_probe(bucket, "k", DATA, storage_type="mem")
    assert bucket.calls == [Step.WRITE]
    assert statuses(report)[Step.DELETE] == (Status.SKIPPED, None) and report.left_behind is None


@pytest.mark.parametrize("reason", [Reason.TIMEOUT, Reason.OTHER])
def test_a_write_that_may_have_happened_is_cleaned_up(reason):
    bucket = MemoryBucket({Step.WRITE: BoomError(reason, "no answer")})  # stored, but the answer was lost
    report = run_probe(bucket, "k", DATA, storage_type="mem")
    assert bucket.calls == [Step.WRITE, Step.DELETE]
    assert statuses(report)[Step.DELETE] == (Status.OK, None)
    assert bucket.objects == {}


def test_a_write_that_may_have_happened_and_cannot_be_deleted_is_named():
    bucket = MemoryBucket({Step.WRITE: BoomError(Reason.TIMEOUT), Step.DELETE: BoomError(Reason.TIMEOUT)})
    report = run_probe(bucket, "k", DATA, storage_type="mem")
    assert report.left_behind == "mem://bucket/k"


def test_an_interrupt_still_deletes_the_probe():
    bucket = MemoryBucket({Step.READ: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        run_probe(bucket, "k", DATA, storage_type="mem")
    assert bucket.calls == [Step.WRITE, Step.READ, Step.DELETE]
    assert bucket.objects == {}


def test_messages_pass_through_the_scrubber():
    bucket = MemoryBucket({Step.READ: BoomError(Reason.OTHER, "denied for key hunter2-key")})
    report = run_probe(bucket, "k", DATA, storage_type="mem", scrub=Scrubber(["hunter2-key"]))
    assert report.result(Step.READ).message == "read: denied for key ***"


@pytest.mark.parametrize(("prefix", "expected"), [
    (None, "det-k8s-probe-T"),
    ("", "det-k8s-probe-T"),
    ("research", "research/det-k8s-probe-T"),
    ("research/", "research/det-k8s-probe-T"),
    ("/research/", "research/det-k8s-probe-T"),
    ("a/b//", "a/b/det-k8s-probe-T"),
])
def test_probe_key_treats_the_prefix_as_a_directory(prefix, expected):
    assert probe_key(prefix, "T") == expected


def test_probe_keys_are_unique():
    first, second = probe_key("p"), probe_key("p")
    assert first != second and first.startswith("p/" + PROBE_PREFIX)


def test_a_probe_left_by_a_check_that_has_ended_is_deleted_by_the_next_one():
    """Issue 19: a check killed outright (kill -9) after its write left its probe object for good."""
    from det_k8s.storage.probe import expired

    bucket = MemoryBucket()
    ended = probe_key("p", expires=1000)
    running = probe_key("p", expires=3000)  # a check still within its time: its probe is its own to delete
    unnamed = "p/" + PROBE_PREFIX + "0123-4567"  # no expiry in its name: never deleted on a guess
    other = "p/checkpoint-1000"
    for key in (ended, running, unnamed, other):
        bucket.objects[key] = b"x"
    report = run_probe(bucket, probe_key("p", expires=3100), DATA, storage_type="mem", now=lambda: 2000.0)
    assert report.ok and sorted(bucket.objects) == sorted([running, unnamed, other])
    assert "deleted 1 probe object(s) an earlier check left" in report.steps[-1].message
    assert expired(ended, 2000) and not expired(running, 2000) and not expired(unnamed, 2000)
    assert ended.startswith("p/" + PROBE_PREFIX + "expires-1000-")
