"""The scheduling Lease: one holder at a time, races decided by the API server, crashed holders expire."""

from __future__ import annotations

import datetime
import threading
import time

import pytest

from det_k8s.errors import Forbidden
from det_k8s.kube.kinds import LEASES
from det_k8s.live.lease import LeaseHeld, LeaseLost, LeaseState, SchedulingLease

T0 = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.UTC)


class Clock:
    """Wall time (what gets written into the Lease) and monotonic time (what a client watches with)."""

    def __init__(self) -> None:
        self.now = T0
        self.mono = 1000.0

    def __call__(self) -> datetime.datetime:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)
        self.mono += seconds

ON_REAL_CLUSTER_TOO = True  # Leases with the real API server's optimistic concurrency too


def lease_for(cluster, holder: str, clock=None, duration: int = 30) -> SchedulingLease:
    clock = clock or Clock()
    return SchedulingLease(cluster.connect(), "default", holder, duration=duration, clock=clock,
                           monotonic=clock.monotonic)


def test_the_first_client_creates_and_holds_it(cluster):
    clock = Clock()
    alice = lease_for(cluster, "alice", clock)
    assert alice.try_acquire()
    stored = cluster.api.get("leases", "det-k8s-scheduler")
    assert stored["spec"]["holderIdentity"] == "alice"
    assert stored["spec"]["leaseDurationSeconds"] == 30


def test_a_held_lease_is_taken_over_once_watched_unchanged_for_its_duration(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    assert alice.try_acquire()
    assert not bob.try_acquire()  # bob starts watching
    clock.advance(29)
    assert not bob.try_acquire()
    clock.advance(2)  # alice crashed: bob has seen nothing change for 31 s on his own clock
    assert bob.try_acquire()
    assert cluster.api.get("leases", "det-k8s-scheduler")["spec"]["holderIdentity"] == "bob"


def test_a_fresh_client_takes_over_a_lease_renewed_long_ago(cluster):
    clock = Clock()
    assert lease_for(cluster, "crashed", clock).try_acquire()
    clock.advance(30 + 60 + 1)  # older than duration + skew allowance by any reasonable clock
    assert lease_for(cluster, "newcomer", clock).try_acquire()


def test_a_skewed_clock_alone_cannot_steal_a_live_lease(cluster):
    alice_clock, bob_clock = Clock(), Clock()
    bob_clock.advance(45)  # bob's clock runs 45 s ahead: by his clock alice's renewal looks 45 s old
    alice, bob = lease_for(cluster, "alice", alice_clock), lease_for(cluster, "bob", bob_clock)
    assert alice.try_acquire()
    assert not bob.try_acquire()
    bob_clock.advance(10)
    alice_clock.advance(10)
    alice.renew()  # alice is alive and renews: bob's watch starts again
    bob_clock.advance(25)
    assert not bob.try_acquire()


def test_renew_raises_once_the_lease_was_taken_over(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    assert alice.try_acquire()
    bob.try_acquire()
    clock.advance(31)
    assert bob.try_acquire()
    with pytest.raises(LeaseLost, match="taken over by bob"):
        alice.renew()


def test_renewing_keeps_it(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    assert alice.try_acquire()
    assert not bob.try_acquire()
    clock.advance(25)
    alice.renew()
    clock.advance(25)
    assert not bob.try_acquire()  # 50 s since bob began watching, but only 25 s since the last change


def test_release_frees_it_at_once(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    with alice.held():
        assert not bob.try_acquire()
    assert bob.try_acquire()


def test_release_does_not_free_someone_elses_lease(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    assert alice.try_acquire()
    bob.release()
    assert LeaseState.of(cluster.api.get("leases", "det-k8s-scheduler")).holder == "alice"


def test_held_raises_a_clear_error_when_it_stays_taken(cluster):
    clock = Clock()
    assert lease_for(cluster, "alice", clock).try_acquire()
    with pytest.raises(LeaseHeld) as info, lease_for(cluster, "bob", clock).held(wait=0):
        pass
    assert str(info.value).startswith("the scheduling lease default/det-k8s-scheduler is held by alice")


@pytest.mark.parametrize("round_", range(15))
def test_two_clients_racing_for_it_exactly_one_wins(cluster, round_):
    clock = Clock()
    lease_for(cluster, "crashed", clock).try_acquire()
    clock.advance(120)  # the old holder is long gone (renewed 120 s ago): both racers may take it over
    racers = [lease_for(cluster, f"racer-{i}", clock) for i in range(2)]
    barrier = threading.Barrier(2)
    results: dict[str, bool] = {}

    def race(lease: SchedulingLease) -> None:
        barrier.wait()
        results[lease.holder] = lease.try_acquire()

    threads = [threading.Thread(target=race, args=(r,)) for r in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [holder for holder, won in results.items() if won]
    assert len(winners) == 1
    assert cluster.api.get("leases", "det-k8s-scheduler")["spec"]["holderIdentity"] == winners[0]


def test_racing_to_create_it_exactly_one_wins(cluster):
    clock = Clock()
    racers = [lease_for(cluster, f"racer-{i}", clock) for i in range(3)]
    barrier = threading.Barrier(3)
    results: list[bool] = []

    def race(lease: SchedulingLease) -> None:
        barrier.wait()
        results.append(lease.try_acquire())

    threads = [threading.Thread(target=race, args=(r,)) for r in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, False, True]


def test_renew_fails_if_another_client_took_and_released_it_meanwhile(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    assert alice.try_acquire()
    bob.try_acquire()
    clock.advance(31)
    with bob.held():  # bob takes it over, runs a pass, releases it
        pass
    with pytest.raises(LeaseLost) as lost:
        alice.renew()  # alice's name is gone and someone else wrote since her last write: her plan is stale
    assert str(lost.value).startswith("the scheduling lease was taken over by another client during the pass")
    assert "next pass plans afresh" in (lost.value.hint or "")
    assert LeaseState.of(cluster.api.get("leases", "det-k8s-scheduler")).holder == ""  # alice wrote nothing


def test_renew_fails_if_anything_touched_the_lease_since_our_last_write(cluster):
    clock = Clock()
    alice = lease_for(cluster, "alice", clock)
    assert alice.try_acquire()
    lease = cluster.api.get("leases", "det-k8s-scheduler")
    lease["metadata"].setdefault("annotations", {})["touched"] = "yes"
    cluster.connect().replace(LEASES, "det-k8s-scheduler", lease, "default")  # alice's name, not her write
    with pytest.raises(LeaseLost):
        alice.renew()


def test_renew_after_release_is_refused(cluster):
    alice = lease_for(cluster, "alice", Clock())
    with alice.held():
        pass
    with pytest.raises(LeaseLost, match="does not hold"):
        alice.renew()


def test_renew_succeeds_for_the_holder_nobody_disturbed(cluster):
    clock = Clock()
    alice = lease_for(cluster, "alice", clock)
    assert alice.try_acquire()
    clock.advance(10)
    alice.renew()
    renewed = LeaseState.of(cluster.api.get("leases", "det-k8s-scheduler"))
    assert renewed.holder == "alice" and renewed.renewed == clock()
    alice.renew()


@pytest.mark.emulator_only
def test_no_permission_on_leases_names_the_lease_and_the_way_out(cluster):
    cluster.api.fail("GET", "leases", 403, 'leases.coordination.k8s.io "det-k8s-scheduler" is forbidden')
    with pytest.raises(Forbidden) as refused:
        lease_for(cluster, "alice").try_acquire()
    assert str(refused.value).startswith("cannot use the scheduling lease default/det-k8s-scheduler: ")
    assert "DET_K8S_LEASE_NAMESPACE" in (refused.value.hint or "")


@pytest.mark.emulator_only
def test_no_permission_to_renew_names_the_lease_too(cluster):
    alice = lease_for(cluster, "alice")
    assert alice.try_acquire()
    cluster.api.fail("PUT", "leases", 403, 'leases.coordination.k8s.io "det-k8s-scheduler" is forbidden')
    with pytest.raises(Forbidden) as refused:
        alice.renew()
    assert str(refused.value).startswith("cannot use the scheduling lease default/det-k8s-scheduler: ")


def _holder(cluster) -> str:
    return LeaseState.of(cluster.api.get("leases", "det-k8s-scheduler")).holder


def test_a_take_back_goes_out_while_the_work_alongside_runs_and_the_block_gets_the_work(cluster):
    alice = lease_for(cluster, "alice", Clock())
    with alice.held():
        pass

    def work() -> str:
        # the take-back of alice's own release is on its way meanwhile: its write lands while this still runs
        deadline = time.monotonic() + 30  # a guard against hanging, not a speed assertion
        while _holder(cluster) != "alice":
            assert time.monotonic() < deadline, "the take-back did not go out while the work ran"
            time.sleep(0.01)
        return "plan"

    with alice.held(alongside=work) as early:
        assert early == "plan"
        assert _holder(cluster) == "alice"
    assert _holder(cluster) == ""


def test_work_alongside_a_take_back_is_dropped_when_another_client_held_the_lease_since(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    with alice.held():
        pass
    with bob.held():  # bob's pass ran between alice's: what alice worked out beside her take-back may be stale
        pass
    done = []
    with alice.held(alongside=lambda: done.append("plan") or "plan") as early:
        assert done == ["plan"] and early is None  # the work ran, but the block must do it again
        assert _holder(cluster) == "alice"  # (bob gave it back: alice holds it all the same)


def test_the_first_pass_takes_the_lease_before_any_work_alongside(cluster):
    alice = lease_for(cluster, "alice", Clock())
    done = []
    with alice.held(alongside=lambda: done.append("plan") or "plan") as early:  # no release of ours to take back
        assert early is None and done == []


@pytest.mark.parametrize("stop", [RuntimeError("the plan failed"), KeyboardInterrupt()], ids=["error", "signal"])
def test_work_alongside_that_stops_leaves_the_lease_free(cluster, stop):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    with alice.held():
        pass

    def work() -> str:
        deadline = time.monotonic() + 30
        while _holder(cluster) != "alice":  # the take-back landed: the Lease is alice's when the work stops
            assert time.monotonic() < deadline, "the take-back did not go out"
            time.sleep(0.01)
        raise stop

    with pytest.raises(type(stop)), alice.held(alongside=work):
        pytest.fail("the block must not run")
    assert _holder(cluster) == ""
    assert bob.try_acquire()


@pytest.mark.emulator_only  # (a request held at the API server: fault injection)
def test_a_signal_while_the_take_back_is_answered_waits_for_its_answer_and_gives_the_lease_back(cluster, handlers):
    import os
    import signal

    from det_k8s.stopping import Stopped

    alice = lease_for(cluster, "alice", Clock())
    with alice.held():
        pass
    write = cluster.api.pause("PUT", "leases")  # the take-back reaches the server and waits there

    def work() -> str:
        assert write.reached.wait(30)
        # the plan is done; the signal comes while the take-back's answer is awaited, and the answer after it
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        threading.Timer(0.8, write.release).start()
        return "plan"

    with pytest.raises(Stopped), alice.held(alongside=work):
        pytest.fail("the block must not run")
    assert write.finished.wait(30)
    assert _holder(cluster) == ""  # taken back after the signal, and given back: nobody waits out its duration


@pytest.mark.emulator_only  # (a write held at the API server: fault injection)
def test_a_release_the_cut_undo_cannot_make_is_noted_and_the_stop_goes_on(cluster, patient_handlers):
    """Once the undo is cut, the release has what is left of AFTER_HURRY_SECONDS; failing (its write held), its error
    replaced the signal's `Stopped`, and `scheduler run`'s loop took the stop for a failed pass and went on."""
    import contextlib
    import signal

    from det_k8s import stopping

    main = threading.main_thread().ident or 0
    alice = lease_for(cluster, "alice", Clock())
    with pytest.raises(stopping.Stopped) as stopped, alice.held():
        write = cluster.api.pause("PUT", "leases")  # the release's write is held
        with contextlib.suppress(stopping.Stopped):  # the first signal: an undo inside begins ...
            signal.pthread_kill(main, signal.SIGTERM)
            time.sleep(5)
        signal.pthread_kill(main, signal.SIGTERM)  # ... and the second cuts it
        time.sleep(5)
    assert stopped.value.hurried
    notes = stopping.notes()
    assert write.reached.is_set() and not write.served
    assert any("scheduling Lease default/det-k8s-scheduler could not be given back" in n
               and "it lapses by itself within 30 s" in n for n in notes), notes
