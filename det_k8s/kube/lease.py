"""A coordination.k8s.io Lease that serialises scheduling passes between det-k8s clients.

Two researchers running `det-k8s experiment create` at the same moment must not both decide to
use the same free GPUs. Each pass first takes the Lease. Taking it is an optimistic update: the
write carries the resourceVersion read just before, so when two clients race, the API server
accepts one write and answers 409 Conflict to the other. A holder that crashes stops renewing;
after `leaseDurationSeconds` anyone may take the Lease over, so a dead client never blocks the
others for long.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import Conflict, DetK8sError, NotFound
from .api import KubeApi
from .kinds import LEASES

LEASE_NAME = "det-k8s-scheduler"
DEFAULT_DURATION = 30  # seconds a pass may hold the Lease without renewing it

Clock = Callable[[], datetime.datetime]


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _format(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class LeaseState:
    holder: str
    renewed: datetime.datetime | None
    duration: int

    def expired(self, now: datetime.datetime) -> bool:
        """Free when nobody holds it or the holder stopped renewing for longer than its duration."""
        if not self.holder or self.renewed is None:
            return True
        return now > self.renewed + datetime.timedelta(seconds=self.duration)

    @classmethod
    def of(cls, lease: dict[str, Any]) -> LeaseState:
        spec = lease.get("spec") or {}
        return cls(str(spec.get("holderIdentity") or ""), _parse(spec.get("renewTime")),
                   int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION))


class LeaseHeld(DetK8sError):
    """Another client holds the scheduling Lease."""


@dataclass
class SchedulingLease:
    api: KubeApi
    namespace: str
    holder: str
    duration: int = DEFAULT_DURATION
    clock: Clock = utcnow
    name: str = LEASE_NAME

    def try_acquire(self) -> bool:
        """Take (or renew) the Lease if it is free, expired or ours; False when someone else has it."""
        now = self.clock()
        spec = {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration,
                "renewTime": _format(now), "acquireTime": _format(now)}
        try:
            current = self.api.get(LEASES, self.name, self.namespace)
        except NotFound:
            try:
                self.api.create(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                         "metadata": {"name": self.name, "namespace": self.namespace,
                                                      "labels": {"app.kubernetes.io/managed-by": "det-k8s"}},
                                         "spec": spec}, self.namespace)
            except Conflict:
                return False  # another client created it first
            return True
        state = LeaseState.of(current)
        if state.holder != self.holder and not state.expired(now):
            return False
        if state.holder == self.holder:
            spec["acquireTime"] = (current.get("spec") or {}).get("acquireTime") or spec["acquireTime"]
        body = {**current, "spec": {**(current.get("spec") or {}), **spec}}
        try:
            self.api.replace(LEASES, self.name, body, self.namespace)
        except Conflict:
            return False  # someone renewed or took it between our read and our write
        return True

    def holder_now(self) -> LeaseState | None:
        try:
            return LeaseState.of(self.api.get(LEASES, self.name, self.namespace))
        except NotFound:
            return None

    def release(self) -> None:
        """Give the Lease back at once (only if we still hold it), so the next pass need not wait."""
        try:
            current = self.api.get(LEASES, self.name, self.namespace)
        except NotFound:
            return
        if LeaseState.of(current).holder != self.holder:
            return
        body = {**current, "spec": {**(current.get("spec") or {}), "holderIdentity": "", "renewTime": None}}
        # Taken over or deleted meanwhile: either way it is no longer ours to release.
        with contextlib.suppress(Conflict, NotFound):
            self.api.replace(LEASES, self.name, body, self.namespace)

    @contextmanager
    def held(self, wait: float = 0.0, poll: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> Iterator[None]:
        """Hold the Lease for a block; wait up to `wait` seconds for it, else raise LeaseHeld."""
        deadline = time.monotonic() + wait
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                state = self.holder_now()
                who = state.holder if state else "another client"
                until = ""
                if state and state.renewed:
                    until = f" (until {_format(state.renewed + datetime.timedelta(seconds=state.duration))} unless renewed)"
                raise LeaseHeld(f"the scheduling lease {self.namespace}/{self.name} is held by {who}{until}",
                                hint="another det-k8s client is scheduling; try again in a few seconds")
            sleep(poll)
        try:
            yield
        finally:
            self.release()

