"""A coordination.k8s.io Lease that serialises scheduling passes between det-k8s clients.

Two researchers running `det-k8s experiment create` at the same moment must not both decide to
use the same free GPUs. Each pass first takes the Lease. Taking it is an optimistic update: the
write carries the resourceVersion read just before, so when two clients race, the API server
accepts one write and answers 409 Conflict to the other. A holder that crashes stops renewing,
and the others take the Lease over; a long pass renews it before each write and stops the moment
it finds the Lease gone.

When is a holder gone? Not by comparing its renewTime with our clock alone: clocks differ. As
client-go does, a client that has itself watched the Lease stay unchanged for
`leaseDurationSeconds` (on its own monotonic clock) may take it. A client that just started has
watched nothing yet, so a renewTime older than the duration plus a generous skew allowance also
counts as gone: a crashed holder never blocks short-lived commands for more than about 90 s. And a
holder whose process is known to have ended is gone at once: every write names the holder's process
(`HOLDER_PROCESS`: boot id, PID namespace, PID), and a client on the same machine and PID namespace that finds
that process ended (kill -9, a crash) takes the Lease over without waiting. A process stopped by a
signal releases it itself (det_k8s/stopping.py).

There is one Lease for the whole cluster (GPUs are cluster-wide, whatever namespace a queue is
in): `default/det-k8s-scheduler`, or the namespace in DET_K8S_LEASE_NAMESPACE. Two clients that
disagree on that namespace would each hold their own Lease and hand out the same GPUs, so a
client checks the cluster's other det-k8s Leases (same name, any namespace) before and after it
takes its own: if one at another location is held, or finished a pass within `ACTIVE_WINDOW`
(its `det-k8s.io/last-pass` annotation), this client refuses to schedule and names both
locations (`LeaseLocationConflict`). Checking after taking its own Lease too makes the race safe:
of two clients starting together, at least one sees the other.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .. import stopping
from ..errors import Conflict, DetK8sError, Forbidden, NotFound
from ..kube.api import KubeApi
from ..kube.kinds import LEASES
from ..labels import HOLDER_PROCESS, LAST_PASS, MANAGED_BY, MANAGER, PODS_VERSION, SERVED_BY, SERVING
from ..names import check_namespace

LEASE_NAME = "det-k8s-scheduler"
NAMESPACE_ENV = "DET_K8S_LEASE_NAMESPACE"
DEFAULT_DURATION = 30  # seconds a pass may hold the Lease without renewing it
SKEW_ALLOWANCE = 60  # seconds of clock difference tolerated when judging a renewTime we never watched
DEFAULT_NAMESPACE = "default"
RECHECK = 60.0  # seconds: a take-back of our own released Lease checks the other locations at most this often
T = TypeVar("T")
ACTIVE_WINDOW = datetime.timedelta(minutes=10)  # a scheduler loop backs off to at most 5 minutes between passes

Clock = Callable[[], datetime.datetime]


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _format(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)  # a zone-less time: UTC


def process_key(pid: int | None = None) -> str:
    """This machine's boot, this PID namespace and the process: who can tell whether the holder still runs ("" when
    /proc cannot say)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        space = os.stat("/proc/self/ns/pid").st_ino
    except (OSError, ValueError):
        return ""
    return f"{boot}/{space}/{os.getpid() if pid is None else pid}" if boot else ""


def died_here(key: str) -> bool:
    """Did the process of `key` (`process_key`) run on this machine, in this PID namespace, and end? A killed holder
    (kill -9, a crash) is then known gone at once, with no need to wait for its Lease to expire. Anything uncertain
    (another machine, a PID in use again, no /proc) is False: the Lease then expires as usual."""
    mine = process_key()
    where, _, pid_text = key.rpartition("/")
    if not key or not mine or where != mine.rpartition("/")[0] or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid() or pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    try:  # a zombie (ended, not yet reaped by its parent) holds nothing
        return Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace").rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _with_process(obj: dict[str, Any]) -> dict[str, Any]:
    """The Lease object naming this process as the holder's (HOLDER_PROCESS), or without a stale name when /proc says
    none."""
    meta = dict(obj.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != HOLDER_PROCESS}
    key = process_key()
    if key:
        annotations[HOLDER_PROCESS] = key
    meta["annotations"] = annotations
    return {**obj, "metadata": meta}


@dataclass(frozen=True)
class LeaseState:
    holder: str
    renewed: datetime.datetime | None
    duration: int

    def stale(self, now: datetime.datetime) -> bool:
        """Free by the clock: nobody holds it, or its renewal is older than duration + skew allowance."""
        if not self.holder or self.renewed is None:
            return True
        return now > self.renewed + datetime.timedelta(seconds=self.duration + SKEW_ALLOWANCE)

    @classmethod
    def of(cls, lease: dict[str, Any]) -> LeaseState:
        spec = lease.get("spec") or {}
        return cls(str(spec.get("holderIdentity") or ""), _parse(spec.get("renewTime")),
                   int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION))


class LeaseHeld(DetK8sError):
    """Another client holds the scheduling Lease."""


class LeaseLost(DetK8sError):
    """The Lease was taken over while a pass held it: the pass must stop writing."""


class LeaseLocationConflict(DetK8sError):
    """Another det-k8s scheduler uses a Lease at another location: scheduling here could double-book GPUs."""


def served_now(api: KubeApi, clock: Callable[[], datetime.datetime] | None = None) -> str:
    """The scheduler name a `scheduler run` loop says in the Lease it serves now (SERVING, not expired), or ""
    (no Lease, no loop, or the Lease cannot be read): whose pods the next pass will plan with the queue's."""
    try:
        found = api.get(LEASES, LEASE_NAME, lease_namespace())
    except DetK8sError:
        return ""
    annotations = (found.get("metadata") or {}).get("annotations") or {}
    name, _, until = str(annotations.get(SERVING) or "").partition(" until ")
    moment = _parse(until)
    return name if moment is not None and moment > (clock or utcnow)() else ""


def lease_namespace() -> str:
    value = os.environ.get(NAMESPACE_ENV)
    return check_namespace(value, NAMESPACE_ENV) if value else DEFAULT_NAMESPACE


@dataclass
class SchedulingLease:
    api: KubeApi
    namespace: str  # where the Lease lives: lease_namespace() for the cluster-wide one
    holder: str
    duration: int = DEFAULT_DURATION
    clock: Clock = utcnow
    name: str = LEASE_NAME
    monotonic: Callable[[], float] = time.monotonic
    fence: str = ""  # written with the release (PODS_VERSION), for the next holder's watch to catch up to
    serving: str = ""  # written with the release (SERVING): "<scheduler name> until <time>" ("" leaves it)
    _watched: tuple[tuple[str, str], float] | None = field(default=None, repr=False)
    _written: dict[str, Any] | None = field(default=None, repr=False)  # the Lease as our own last write left it
    _released: dict[str, Any] | None = field(default=None, repr=False)  # ... as our own release left it
    _taken_back: bool = field(default=False, repr=False)  # the last acquisition was a take-back of our own release
    _checked: float = field(default=-math.inf, repr=False)  # (monotonic) the last check that found no other location
    _writer: ThreadPoolExecutor | None = field(default=None, repr=False)  # the take-back beside `held`'s `alongside`

    def _gone(self, current: dict[str, Any], state: LeaseState) -> bool:
        """Has the holder stopped renewing? (see the module docstring)"""
        if state.stale(self.clock()):
            return True
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        if isinstance(annotations, dict) and died_here(str(annotations.get(HOLDER_PROCESS) or "")):
            return True  # its process ended on this machine without releasing it (kill -9, a crash)
        record = (str((current.get("metadata") or {}).get("resourceVersion", "")), state.holder)
        now = self.monotonic()
        if self._watched is None or self._watched[0] != record:
            self._watched = (record, now)
            return False
        return now - self._watched[1] >= state.duration

    def try_acquire(self) -> bool:
        """Take (or renew) the Lease if it is free, expired or ours; False when someone else has it."""
        try:
            return self._try_acquire()
        except Forbidden as exc:
            raise self._forbidden(exc) from exc

    def _forbidden(self, exc: Forbidden) -> Forbidden:
        return Forbidden(f"cannot use the scheduling lease {self.namespace}/{self.name}: {exc}",
                         hint=f"scheduling needs get, create and update on leases in namespace {self.namespace}; "
                              f"ask a cluster admin, or set {NAMESPACE_ENV} to a namespace where you have them "
                              "(every det-k8s client of the cluster must use the same one)")

    def _try_acquire(self) -> bool:
        now = self.clock()
        spec = {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration,
                "renewTime": _format(now), "acquireTime": _format(now)}
        released, self._released = self._released, None
        self._taken_back = False
        if released is not None:
            # Nobody wrote it since our own release? Then one conditional write takes it back (no read first).
            try:
                self._written = self.api.replace(LEASES, self.name, _with_process({**released, "spec": {
                    **(released.get("spec") or {}), **spec}}), self.namespace)
                self._taken_back = True
                return True
            except (Conflict, NotFound):
                pass  # someone else has written it since: decide on what it holds now
        try:
            current = self.api.get(LEASES, self.name, self.namespace)
        except NotFound:
            try:
                created = self.api.create(LEASES, _with_process({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "labels": {MANAGED_BY: MANAGER}},
                    "spec": spec}), self.namespace)
            except Conflict:
                return False  # another client created it first
            self._written = created
            return True
        state = LeaseState.of(current)
        if state.holder not in ("", self.holder) and not self._gone(current, state):
            return False
        if state.holder == self.holder:
            spec["acquireTime"] = (current.get("spec") or {}).get("acquireTime") or spec["acquireTime"]
        body = _with_process({**current, "spec": {**(current.get("spec") or {}), **spec}})
        try:
            written = self.api.replace(LEASES, self.name, body, self.namespace)
        except Conflict:
            return False  # someone renewed or took it between our read and our write
        self._written = written
        return True

    def renew(self) -> None:
        """Renew the Lease this client took; raise LeaseLost if anyone else wrote it since our last write.

        "Still our name on it" is not enough: another client may have taken it, run its own pass and
        released it meanwhile, and this client's plan would then be stale. So the renewal is one write
        that carries the resourceVersion of our own last write: the API server refuses it (409) if
        anything else touched the Lease in between, with no gap between checking and writing.
        """
        if self._written is None:
            raise LeaseLost("this client does not hold the scheduling lease; it stopped before writing anything",
                            hint="a scheduling pass must take the lease first")
        last = self._written
        body = {**last, "spec": {**(last.get("spec") or {}), "holderIdentity": self.holder,
                                 "renewTime": _format(self.clock())}}
        try:
            self._written = self.api.replace(LEASES, self.name, body, self.namespace)
        except Forbidden as exc:
            raise self._forbidden(exc) from exc
        except (Conflict, NotFound):
            self._written = None
            state = self.holder_now()
            if state is not None and state.holder not in ("", self.holder):
                who, hint = state.holder, "the pass took too long; the other client's pass carries on"
            else:
                who, hint = "another client", "the pass took too long; the next pass plans afresh"
            raise LeaseLost(f"the scheduling lease was taken over by {who} during the pass; "
                            "it stopped before writing anything more", hint=hint) from None

    def served_by_loop(self) -> str:
        """The scheduler name a `scheduler run` loop said it serves (SERVING, not yet expired), or ""."""
        annotations = ((self._written or {}).get("metadata") or {}).get("annotations") or {}
        name, _, until = str(annotations.get(SERVING) or "").partition(" until ")
        moment = _parse(until)
        return name if moment is not None and moment > self.clock() else ""

    @property
    def previous_fence(self) -> str:
        """The PODS_VERSION the Lease held when this client took it (the previous holder's writes), or ""."""
        annotations = ((self._written or {}).get("metadata") or {}).get("annotations") or {}
        return str(annotations.get(PODS_VERSION) or "")

    def holder_now(self) -> LeaseState | None:
        try:
            return LeaseState.of(self.api.get(LEASES, self.name, self.namespace))
        except NotFound:
            return None

    def release(self, passed: bool = True) -> None:
        """Give the Lease back at once (only if we still hold it), so the next pass need not wait.

        One write conditional on our own last one; without it (an interrupted acquisition), read it first.
        With `passed`, the Lease records when this pass ended (LAST_PASS), which is how clients at
        another location see that this one is in use between passes.
        """
        current = self._written
        if current is None:
            try:
                current = self.api.get(LEASES, self.name, self.namespace)
            except NotFound:
                return
            if LeaseState.of(current).holder != self.holder:
                return
        body = {**current, "spec": {**(current.get("spec") or {}), "holderIdentity": "", "renewTime": None}}
        added = {key: value for key, value in ((PODS_VERSION, self.fence), (SERVING, self.serving)) if value}
        if self.serving:
            added[SERVED_BY] = self.holder  # who serves between passes, when the Lease itself is free (`status`)
        if passed:
            added[LAST_PASS] = _format(self.clock())
        if added:
            meta = dict(current.get("metadata") or {})
            meta["annotations"] = {**(meta.get("annotations") or {}), **added}
            body["metadata"] = meta
        # Taken over or deleted meanwhile: either way it is no longer ours to release.
        self._written = None
        with contextlib.suppress(Conflict, NotFound):
            self._released = self.api.replace(LEASES, self.name, body, self.namespace)

    # -- one location for everyone -----------------------------------------------------------

    def other_location(self) -> str | None:
        """A description of another det-k8s Lease location in use now (held, or a pass within ACTIVE_WINDOW)."""
        now = self.clock()
        for lease in self._other_leases():
            meta = lease.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            where = f"{meta.get('namespace')}/{meta.get('name')}"
            try:
                state = LeaseState.of(lease)
            except (ValueError, TypeError, AttributeError, OverflowError):
                state = LeaseState("", None, DEFAULT_DURATION)  # not written by det-k8s: judged by its annotation
            if state.holder and not state.stale(now):
                return f"{where} (held by {state.holder[:100]})"
            annotations = meta.get("annotations")
            last = _parse(str(annotations.get(LAST_PASS) or "")) if isinstance(annotations, dict) else None
            if last is not None and now - last < ACTIVE_WINDOW:
                return f"{where} (last pass {_format(last)})"
        return None

    def _other_leases(self) -> list[dict[str, Any]]:
        try:
            found = self.api.list(LEASES, all_namespaces=True, field_selector=f"metadata.name={self.name}")
        except Forbidden:  # no cluster-wide view: at least the default location, which others use unless told
            if self.namespace == DEFAULT_NAMESPACE:
                return []
            try:
                found = [self.api.get(LEASES, self.name, DEFAULT_NAMESPACE)]
            except (NotFound, Forbidden):
                return []
        return [lease for lease in found if isinstance(lease, dict)
                and (lease.get("metadata") or {}).get("namespace") != self.namespace]

    def _refuse_if_split(self) -> None:
        other = self.other_location()
        if other is not None:
            theirs = other.split("/", 1)[0]
            source = f"{NAMESPACE_ENV}={os.environ[NAMESPACE_ENV]}" if os.environ.get(NAMESPACE_ENV) else \
                f"the default; {NAMESPACE_ENV} is not set"
            raise LeaseLocationConflict(
                f"another det-k8s scheduler uses the scheduling lease {other}, and this client uses "
                f"{self.namespace}/{self.name} ({source}); with two lease locations two passes could hand out the "
                "same GPUs, so this client does not schedule",
                hint=f"every det-k8s client of the cluster must use one location: set {NAMESPACE_ENV}={theirs} "
                     f"here{' (or unset it where it is set)' if theirs == DEFAULT_NAMESPACE else ''}")

    @contextmanager
    def held(self, wait: float = 0.0, poll: float = 0.5, sleep: Callable[[float], None] = time.sleep,
             alongside: Callable[[], T] | None = None) -> Iterator[T | None]:
        """Hold the Lease for a block; wait up to `wait` seconds for it, else raise LeaseHeld.

        Refuses (LeaseLocationConflict) when another det-k8s Lease location is in use: checked before
        taking the Lease and again once it is held, so two clients racing never both go on.

        `alongside`: work that reads and writes nothing another holder could change (a fast pass's plan, made
        from the watch's view), run while the take-back of our own release is on its way, so the write and the
        work overlap (`_take_back_alongside`). The block gets what it returned when the take-back succeeded
        (nobody wrote the Lease since our release, so no other pass ran meanwhile), else None: the work is to be
        done again, under the Lease.
        """
        if self._released is None:  # (taking it back right after our own pass, the check once held suffices)
            self._refuse_if_split()
        deadline = time.monotonic() + wait
        early: T | None = None
        try:
            got = False
            if alongside is not None and self._released is not None:
                early, got = self._take_back_alongside(alongside)
            while not got and not self.try_acquire():
                if time.monotonic() >= deadline:
                    state = self.holder_now()
                    who = state.holder if state else "another client"
                    until = ""
                    if state and state.renewed:
                        ends = state.renewed + datetime.timedelta(seconds=state.duration)
                        if ends > self.clock():
                            until = f" (until {_format(ends)} unless renewed)"
                        else:  # the real time left: a client that never watched it waits out the skew allowance
                            latest = ends + datetime.timedelta(seconds=SKEW_ALLOWANCE)
                            until = (f" (not renewed since {_format(state.renewed)}: its holder may have stopped; "
                                     f"it is free by {_format(latest)} at the latest)")
                    raise LeaseHeld(f"the scheduling lease {self.namespace}/{self.name} is held by {who}{until}",
                                    hint="another det-k8s client is scheduling; try again in a few seconds")
                sleep(poll)
        except KeyboardInterrupt:  # Ctrl-C or a signal between our write and its answer: give back what may be ours
            with contextlib.suppress(DetK8sError), stopping.shielded():
                self.release(passed=False)
            raise
        try:
            # Taken back with nobody's write since our own release, and checked a moment ago: no check again (a
            # cluster-wide list, slow on a busy API server). A client at another location that took its Lease since
            # our last check finds ours held, or its last pass (written at every release) within ACTIVE_WINDOW, and
            # refuses; one that took it before, our last check found.
            if not (self._taken_back and self.monotonic() - self._checked < RECHECK):
                self._refuse_if_split()
                self._checked = self.monotonic()
        except BaseException:
            self._release_on_the_way_out()
            raise
        try:
            yield early
        except BaseException:  # what ended the block goes on; a release failing after it is said, never raised instead
            self._release_on_the_way_out(passed=True)
            raise
        with stopping.shielded():  # a signal arriving now waits for the release (a second one cuts it short)
            self.release()

    def _release_on_the_way_out(self, passed: bool = False) -> None:
        """`release` while an exception (a signal's, a failed pass's) is on its way out: a release that fails then
        (once a stop's undo is cut, a slow API server is not waited for) must not replace it, or a loop would take a
        stop for a failed pass and go on. It is noted for the stop's last line: the Lease lapses by itself."""
        with stopping.shielded():
            try:
                self.release(passed=passed)
            except DetK8sError as exc:
                stopping.note(f"the scheduling Lease {self.namespace}/{self.name} could not be given back "
                              f"({exc.message}): it lapses by itself within {self.duration} s")

    def _take_back_alongside(self, alongside: Callable[[], T]) -> tuple[T | None, bool]:
        """`held`'s first try while `alongside` runs: (what it returned if the take-back succeeded, else None;
        whether the Lease was taken). The try goes out on a thread of its own, and its answer is waited for: whatever
        stops `alongside` (a signal), the Lease may be ours and must then be given back (`held` does it for a signal,
        this for anything else). Only once a stop's undo is cut is it waited for no longer than what is left: a
        take-back landing after that keeps the Lease until it lapses (`DEFAULT_DURATION`), as after a kill -9."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="det-k8s-lease")
        with stopping.shielded():  # (a signal now: raised once the write is on its way, so that it is waited for)
            taking = self._writer.submit(self.try_acquire)
        try:
            done = alongside()
        except BaseException as exc:
            with contextlib.suppress(Exception), stopping.shielded():
                got = taking.result(timeout=stopping.wait_limit())  # (the undo cut: no longer than it has left)
                if got and not isinstance(exc, KeyboardInterrupt):
                    self.release(passed=False)
            raise
        with stopping.shielded():  # a signal while the answer is awaited is raised once `_written` says what we hold
            got = taking.result()
        return (done if got and self._taken_back else None), got

