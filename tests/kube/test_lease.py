"""The scheduling Lease: one holder at a time, races decided by the API server, crashed holders expire."""

from __future__ import annotations

import datetime
import threading

import pytest

from det_k8s.kube.lease import LeaseHeld, LeaseState, SchedulingLease

T0 = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


def lease_for(cluster, holder: str, clock=None, duration: int = 30) -> SchedulingLease:
    return SchedulingLease(cluster.connect(), "default", holder, duration=duration, clock=clock or Clock())


def test_the_first_client_creates_and_holds_it(cluster):
    clock = Clock()
    alice = lease_for(cluster, "alice", clock)
    assert alice.try_acquire()
    stored = cluster.api.get("leases", "det-k8s-scheduler")
    assert stored["spec"]["holderIdentity"] == "alice"
    assert stored["spec"]["leaseDurationSeconds"] == 30


def test_a_held_lease_refuses_others_until_it_expires(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    assert alice.try_acquire()
    clock.advance(29)
    assert not bob.try_acquire()
    clock.advance(2)  # alice crashed and never renewed
    assert bob.try_acquire()
    assert cluster.api.get("leases", "det-k8s-scheduler")["spec"]["holderIdentity"] == "bob"


def test_renewing_keeps_it(cluster):
    clock = Clock()
    alice, bob = lease_for(cluster, "alice", clock), lease_for(cluster, "bob", clock)
    assert alice.try_acquire()
    clock.advance(25)
    assert alice.try_acquire()  # renew
    clock.advance(25)
    assert not bob.try_acquire()


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
    clock.advance(120)  # the old holder is long gone: both racers may take it over
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
