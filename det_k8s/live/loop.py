"""The loop of `det-k8s scheduler run`: a pass on every relevant change of the watch, at least every --interval.

`serve` wires it (one `LiveScheduler` for the whole loop, so that its Lease remembers how long another holder has
been silent) and `run` turns: each turn asks whether the next pass may be a fast one (`fast_next`), reads the policy
at least every --interval, runs the pass (`LiveScheduler.reconcile`: observe -> decide -> act -> its `PassResult`),
lowers the binding taints left lingering once due, and waits for a change (not after a fast pass whose result asks
for a full pass at once). What it says goes through an `Output` (the CLI's): this module prints nothing.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .. import stopping
from ..errors import DetK8sError
from ..scheduling.model import Policy
from .fence import LINGER
from .lease import DEFAULT_DURATION, LeaseHeld
from .scheduler import ARRIVING, LiveScheduler, PassReport, PassResult

if TYPE_CHECKING:
    from ..health import Health
    from ..kube.api import KubeApi
    from ..kube.watch import ClusterView

# The loop's threads (the watch, a gang's bindings, the Lease's take-back beside the plan, the Events) hand the
# interpreter lock over at least this often (Python's default: 5 ms). A binding's answer or a watch event that arrives
# while the main thread plans then waits at most this long for it (the take-back's answer no longer waits for the
# plan to finish).
SWITCH_INTERVAL = 0.0005
LOWER_LATE = 1.0  # seconds a lingering binding taint's lowering may be put off while the master's gangs keep coming


class Output(Protocol):
    """What the loop says (the CLI prints it)."""

    def pass_done(self, report: PassReport, once: bool) -> None:
        """A pass ran (`once`: the only one; its report in full, and its failure to clear up raised)."""
        ...

    def lease_held(self, message: str) -> None:
        """Another client holds the Lease: the loop waits for it (said once until a pass runs)."""
        ...

    def pass_failed(self, exc: Exception) -> None:
        """A pass failed (a DetK8sError, or a bug); the loop goes on."""
        ...

    def warning(self, text: str) -> None:
        ...


def live_scheduler(api: KubeApi, holder: str, serve: str | None, view: ClusterView | None, *, once: bool,
                   interval: float, preemption_grace: float) -> LiveScheduler:
    """The loop's one scheduler. It tells other clients' passes (`experiment create`) in the Lease that it serves the
    master's pods, so that they plan them too (read-only) and keep one priority order; the word lapses if it stops."""

    return LiveScheduler(api, api.namespace, Policy(), holder, lease_wait=0 if not once else 10, serve=serve,
                         view=view, renew_every=DEFAULT_DURATION / 3 if view is not None else 0.0,
                         advertise_for=max(120.0, 3 * interval) if view is not None else 0.0,
                         linger=LINGER if view is not None else 0.0, preemption_grace=preemption_grace)


def serve(scheduler: LiveScheduler, view: ClusterView | None, policy: Callable[[], Policy], interval: float,
          once: bool, health: Health, out: Output) -> None:
    """Run the loop (`run`) until a signal or an error; whatever stops it, no binding taint of the loop's is left
    lingering on a node."""
    switch = sys.getswitchinterval()
    if view is not None:
        sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        run(scheduler, view, policy, interval, once, health, out)
    finally:  # stopped (a signal, an error): no binding taint of the loop's left lingering on a node
        sys.setswitchinterval(switch)
        with stopping.shielded():
            for problem in scheduler.lower_fences(everything=True):
                out.warning(problem)


def run(scheduler: LiveScheduler, view: ClusterView | None, policy: Callable[[], Policy], interval: float,
        once: bool, health: Health, out: Output) -> None:
    """The loop itself (see the module docstring); `policy` reads the policy the passes follow."""

    announced = False
    failures = 0
    policy_read = -math.inf
    full_at, full_seen = -math.inf, -1  # when the last full pass started; the view's other_changes then
    fast = False
    frozen = False
    worked = False  # the last pass ran (it did not find the Lease held, nor fail)
    result: PassResult | None = None
    while True:
        health.beat()
        try:
            fast = view is not None and fast_next(scheduler, view, time.monotonic() - full_at, full_seen, interval)
            if not fast and (once or time.monotonic() - policy_read >= interval):  # an admin may change it meanwhile:
                scheduler.policy = policy()  # read it at least every --interval
                policy_read = time.monotonic()
            if not fast and view is not None:
                full_at, full_seen = time.monotonic(), view.other_changes
            worked = False
            result = None
            result = scheduler.reconcile(fast=fast)
            worked = True
            if not frozen and view is not None:
                _freeze()
                frozen = True
            out.pass_done(result.report, once)
            announced, failures = False, 0
        except LeaseHeld as exc:
            if once:
                raise
            if not announced:
                out.lease_held(exc.message)
                announced = True
        except DetK8sError as exc:  # a pass that failed changed nothing it could not finish; try again
            if once or stopping.received() is not None:  # (stopping: a request its cut undo refused, not a failure)
                raise
            failures += 1
            out.pass_failed(exc)
        except Exception as exc:  # a bug met by one pass must not stop scheduling for everyone: say it, go on
            if once or stopping.received() is not None:
                raise
            failures += 1
            out.pass_failed(exc)
        if once:
            return
        health.beat(ready=True)  # an iteration done: a pass, or waiting as the standby of another holder
        due = scheduler.fence_due()
        if due is not None and due <= time.monotonic():
            if time.monotonic() - due >= LOWER_LATE or not scheduler.gang_coming():
                # the binding taints left up for a next gang that did not come: a round trip or two per node, so not
                # while a gang's pods are arriving or it is ready (its binding would wait for them), at most LOWER_LATE
                # late
                for problem in scheduler.lower_fences():
                    out.warning(problem)
                due = scheduler.fence_due()
            else:
                due += LOWER_LATE  # (put off: the gang's pods wake the loop; this is the latest it waits)
        wait = min(interval * 2 ** min(failures, 5), 300)  # back off while the cluster misbehaves
        if fast and not failures and time.monotonic() - full_at >= interval:
            wait = min(wait, ARRIVING)  # (a full pass put off for a gang on its way: run it once none is)
        if due is not None:
            wait = min(wait, max(due - time.monotonic(), 0.0) + 0.01)
        if view is None or failures:
            time.sleep(wait)
        elif not (result is not None and result.requeue) and not (fast and worked and (
                view.other_changes != full_seen or scheduler.ready())):
            # Not waited for: a fast pass that left a group waiting (a full pass now says why), and a fast pass of ours
            # whose hold of the Lease consumed the wake-up of a change for a full pass or of a gang ready already.
            # (Without the Lease, the wait stays: another holder's pass is not spun against. On the fast path a gang
            # is bound as soon as its last pod is seen: no quiet waited for.)
            view.wait_for_change(wait, debounce=0.0 if scheduler.can_go_fast() else 0.05)


def fast_next(scheduler: LiveScheduler, view: ClusterView, age: float, full_seen: int, interval: float,
              arriving: float | None = None) -> bool:
    """Is the loop's next pass a fast one (live/scheduler.py)? Only the master's pods changed since the last full
    pass, which left nothing waiting (`can_go_fast`), and that pass is not yet --interval old (`age`: seconds since
    it began): the gangs that became complete are bound at once.

    Older than --interval, a full pass is due; until it is twice that old, it waits while a gang of the master's is
    ready or on its way (`LiveScheduler.arriving`, within `arriving` seconds, ARRIVING by default): such a pass only
    looks again at what nothing has changed, and a gang completing during it would wait for it. So it runs when no
    gang is ready or coming, between gangs, or once twice --interval old."""
    if not scheduler.can_go_fast() or view.other_changes != full_seen:
        return False
    if age < interval:
        return True
    coming = scheduler.arriving() if arriving is None else scheduler.arriving(within=arriving)
    return age < 2 * interval and (scheduler.ready() or coming)


def _freeze() -> None:
    """After the loop's first pass: what it read of the cluster (every node and pod of the view, a few hundred thousand
    objects at 2,000 nodes) is moved out of the cycle collector's way (`gc.freeze`). Left in, each full collection
    walked it all, pausing the loop every few seconds. Objects frozen are still freed when nothing refers to them;
    only a cycle among them would stay (the view's models hold none)."""

    gc.collect()
    gc.freeze()
