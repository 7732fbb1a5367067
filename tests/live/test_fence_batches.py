"""The binding fence goes up batch by batch (live/fence.py `batches`): a pass placing many gangs never taints more than
`fence_batch` nodes at once, so kube-scheduler keeps the rest and a stopped det-k8s has at most one batch to lower
(issue 24's 5,000-node run left the taint on 3,656 nodes when the whole backlog was fenced at once)."""

from __future__ import annotations

import time

import pytest

from det_k8s.kube.kinds import PODS
from det_k8s.live.fence import batches
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, master_task

ON_REAL_CLUSTER_TOO = True


def _fenced(cluster) -> list[str]:
    return [n["metadata"]["name"] for n in cluster.api.items("nodes")
            if any(t.get("key") == "det-k8s.io/binding" for t in (n.get("spec") or {}).get("taints") or ())]


def test_batches_keep_order_and_hold_at_most_the_limit_of_distinct_nodes():
    groups = [("a", [("a-0", "n1"), ("a-1", "n2")]), ("b", [("b-0", "n2"), ("b-1", "n3")]),
              ("c", [("c-0", "n4"), ("c-1", "n5"), ("c-2", "n6"), ("c-3", "n7")]), ("d", [("d-0", "n1")])]
    cut = batches(groups, 3)
    assert [[g for g, _ in run] for run in cut] == [["a", "b"], ["c"], ["d"]]  # c alone names more than 3
    assert all(len({n for _, placement in run for _, n in placement}) <= 3 for run in cut if len(run) > 1)
    assert [g for run in batches(groups, 256) for g, _ in run] == ["a", "b", "c", "d"]  # one batch when it fits
    assert batches([], 3) == []


@pytest.mark.emulator_only  # the emulator records every API call: the real server keeps no call log
def test_a_pass_binding_many_gangs_fences_one_batch_at_a_time_and_binds_them_all(cluster):
    for i in range(6):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    api = cluster.connect()
    tasks = [create_task(api, master_task("0.26.2", experiment=n, slots_per_trial=8)) for n in (1, 2, 3)]  # 2 x 4 GPUs
    scheduler = LiveScheduler(api, "default", Policy(), "pass", serve="coscheduler", fence_batch=2)
    report = scheduler.run_pass()
    assert len(report.placed) == 3
    assert all(cluster.api.get("pods", name)["spec"].get("nodeName") for task in tasks for name in task.names)
    assert _fenced(cluster) == []  # every batch lowered
    # the order of writes: never more than 2 nodes tainted before a batch's bindings, and lowered before the next
    fenced: set[str] = set()
    most = 0
    for method, path, _ in cluster.api.calls:
        if method == "PATCH" and path.startswith("/api/v1/nodes/"):
            name = path.rsplit("/", 1)[-1]
            fenced ^= {name}  # raised, then lowered: each node is patched twice per batch it is in
            most = max(most, len(fenced))
    assert most == 2 and not fenced
    bindings = [i for i, (method, path, _) in enumerate(cluster.api.calls) if path.endswith("/binding")]
    patches = [i for i, (method, path, _) in enumerate(cluster.api.calls)
               if method == "PATCH" and path.startswith("/api/v1/nodes/")]
    assert len(patches) == 12  # 3 batches x 2 nodes x (raise, lower)
    assert sum(1 for i in patches if i < bindings[0]) == 2  # only the first batch was up before the first binding


def _fence_values(cluster, name: str) -> list[str]:
    return [str(t.get("value")) for t in (cluster.api.get("nodes", name).get("spec") or {}).get("taints") or ()
            if t.get("key") == "det-k8s.io/binding"]


def test_a_lingering_fence_lowered_later_never_removes_another_schedulers_fence(cluster):
    """Lingering taints are lowered outside the Lease: another det-k8s may hold it by then and have fenced the node
    for a binding of its own. Its taint is not ours to remove (the review of issue 24's lingering fence)."""
    from det_k8s.live.fence import Fence

    cluster.api.put(node("gpu-0", gpus=4))
    now = [100.0]
    a = Fence(cluster.connect(), settle=0, linger=2.0, monotonic=lambda: now[0], clock=lambda: 1000.0)
    b = Fence(cluster.connect(), settle=0, clock=lambda: 2000.0)
    a.raise_on(["gpu-0"])
    a.finish()  # lingers until 102
    assert _fence_values(cluster, "gpu-0") == ["1000.000"]
    b.raise_on(["gpu-0"])  # the next Lease holder fences the node for its binding
    assert _fence_values(cluster, "gpu-0") == ["2000.000"]
    now[0] = 103.0
    a.lower_due()
    assert _fence_values(cluster, "gpu-0") == ["2000.000"]  # still up for b's binding
    b.lower()
    assert _fence_values(cluster, "gpu-0") == []


def test_a_binding_keeps_only_its_own_nodes_lingering_and_the_others_go_down_on_time(cluster):
    """Each binding used to push back the lowering of every lingering taint, its own nodes' or not: in a burst of
    gangs (issue 24's paced stage) the nodes fenced first, full since, stayed tainted for the whole burst, until a full
    pass's sweep took our own taints, 30 s old, for those of a det-k8s that had died."""
    from det_k8s.live.fence import Fence

    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    now = [100.0]
    fence = Fence(cluster.connect(), settle=0, linger=2.0, monotonic=lambda: now[0], clock=lambda: 1000.0 + now[0])
    fence.raise_on(["gpu-0"])
    fence.finish()  # lingers until 102
    fence.raise_ahead(["gpu-2"])  # a guess: until 102 too (written in the background)
    deadline = time.monotonic() + 60  # a guard against hanging, not a speed assertion
    while "gpu-2" not in _fenced(cluster):
        assert time.monotonic() < deadline, "the taint raised ahead never landed"
        time.sleep(0.05)
    now[0] = 101.5
    fence.raise_on(["gpu-1"])  # the next gang, elsewhere
    fence.finish()  # gpu-1 until 103.5; the others keep their time
    assert _fenced(cluster) == ["gpu-0", "gpu-1", "gpu-2"]
    now[0] = 102.5
    fence.lower_due()
    assert _fenced(cluster) == ["gpu-1"]
    now[0] = 103.6
    fence.lower_due()
    assert _fenced(cluster) == [] and fence.next_due() is None


def test_a_fence_raised_ahead_in_the_background_never_replaces_another_schedulers_fence(cluster):
    from det_k8s.live.fence import Fence

    cluster.api.put(node("gpu-0", gpus=4))
    b = Fence(cluster.connect(), settle=0, clock=lambda: 2000.0)
    b.raise_on(["gpu-0"])
    a = Fence(cluster.connect(), settle=0, linger=2.0, clock=lambda: 1000.0)
    a.raise_ahead(["gpu-0"])  # a loop's guess, written after it gave the Lease to b
    a.lower()  # (waits for the background write first)
    assert _fence_values(cluster, "gpu-0") == ["2000.000"]
    b.lower()
    assert _fence_values(cluster, "gpu-0") == []


def _reads_of(cluster, name: str) -> int:
    """GETs of the node and lists of its pods (step 3's reads) so far."""
    return sum(1 for method, path, params in cluster.api.calls if method == "GET" and (
        path == f"/api/v1/nodes/{name}" or params.get("fieldSelector") == f"spec.nodeName={name}"))


def _list_version(cluster) -> str:
    """The API server's current revision (a list's), as a view that has caught up would have it."""
    return str(cluster.connect().list_page(PODS, all_namespaces=True)[1])


def _gang(cluster, api, experiment: int):
    from det_k8s.scheduling.master import master_groups, master_pod

    task = create_task(api, master_task("0.26.2", experiment=experiment, slots_per_trial=4, max_slots_per_pod=2))
    (group,) = master_groups([master_pod(p) for p in cluster.api.items("pods") if p["metadata"]["name"] in task.names])
    return group


def _placement(group, where: str):
    return [(group.id, [(p.name, where) for p in group.pending], {p.name: dict(p.pod.requests) for p in group.pending})]


@pytest.mark.emulator_only  # counts the reads in the emulator's call log: the real server keeps none
def test_a_node_read_once_its_fence_settled_is_not_read_again_while_the_watch_confirms_it(cluster):
    """Step 3 once per fenced node (issue 24's p99): read after our taint settled, the node cannot have been given to
    kube-scheduler since while the taint stays up, so the next gang there is checked against the watch's view only;
    a watch that does not confirm it (behind that read, or showing our taint gone) means a read as before."""
    from det_k8s.live.fence import Fence

    cluster.api.put(node("gpu-0", gpus=8))
    api = cluster.connect()
    confirmed = [True]
    asked: list[tuple[str, str, str]] = []

    def confirms(name: str, version: str, stamp: str) -> bool:
        asked.append((name, version, stamp))
        return confirmed[0]

    fence = Fence(api, settle=0, linger=30.0, confirms=confirms)
    first, second, third = (_gang(cluster, api, n) for n in (1, 2, 3))
    fence.raise_on(["gpu-0"])
    before = _reads_of(cluster, "gpu-0")
    assert fence.still_fits(_placement(first, "gpu-0")) == set()
    assert _reads_of(cluster, "gpu-0") == before + 1  # its pods (the node came back with our write)
    fence.finish()
    fence.raise_on(["gpu-0"])
    reads = _reads_of(cluster, "gpu-0")
    assert fence.still_fits(_placement(second, "gpu-0")) == set()  # no plan revision given: read as before
    assert _reads_of(cluster, "gpu-0") == reads + 2 and asked == []
    checked = int(_list_version(cluster))  # (a revision after the read above)
    reads = _reads_of(cluster, "gpu-0")
    assert fence.still_fits(_placement(second, "gpu-0"), planned_at=str(checked)) == set()
    assert _reads_of(cluster, "gpu-0") == reads  # nothing read: planned from a view past the read, and confirmed
    (name, version, stamp), = asked
    assert name == "gpu-0" and int(version) <= checked and stamp == _fence_values(cluster, "gpu-0")[0]
    # a plan made from a view older than that read may lack a pod kube-scheduler placed before the taint settled
    assert fence.still_fits(_placement(second, "gpu-0"), planned_at=str(int(version) - 1)) == set()
    assert _reads_of(cluster, "gpu-0") == reads + 2
    reads = _reads_of(cluster, "gpu-0")
    confirmed[0] = False  # the watch is behind the read, or shows the taint gone
    assert fence.still_fits(_placement(third, "gpu-0"), planned_at=str(10**12)) == set()
    assert _reads_of(cluster, "gpu-0") == reads + 2  # read again, the node too (to see the taint is still ours)
    fence.lower()


@pytest.mark.emulator_only  # counts the reads in the emulator's call log: the real server keeps none
def test_a_node_raised_ahead_is_read_in_the_background_once_settled_so_its_first_gang_reads_nothing(cluster):
    from det_k8s.live.fence import Fence

    cluster.api.put(node("gpu-0", gpus=8))
    api = cluster.connect()
    fence = Fence(api, settle=0.05, linger=30.0, confirms=lambda name, version, stamp: True)
    gang = _gang(cluster, api, 1)
    fence.raise_ahead(["gpu-0"])
    deadline = time.monotonic() + 60  # a guard against hanging, not a speed assertion
    while _reads_of(cluster, "gpu-0") < 2:  # the write's read of the node, then the read of its pods once settled
        assert time.monotonic() < deadline, "the background read never came"
        time.sleep(0.02)
    time.sleep(0.1)  # (its answer recorded)
    assert fence.settled(["gpu-0"])
    fence.raise_on(["gpu-0"])
    reads = _reads_of(cluster, "gpu-0")
    assert fence.still_fits(_placement(gang, "gpu-0"), planned_at=_list_version(cluster)) == set()
    assert _reads_of(cluster, "gpu-0") == reads
    fence.lower()
    assert _fence_values(cluster, "gpu-0") == []


def test_settled_says_whether_raising_the_fence_would_cost_a_wait(cluster):
    from det_k8s.live.fence import Fence

    cluster.api.put(node("gpu-0", gpus=8))
    cluster.api.put(node("gpu-1", gpus=8))
    now = [100.0]
    fence = Fence(cluster.connect(), settle=0.25, linger=30.0, monotonic=lambda: now[0], sleep=lambda s: None)
    assert not fence.settled(["gpu-0"])  # never raised
    fence.raise_on(["gpu-0"])
    assert not fence.settled(["gpu-0"])  # up, not for its settle yet
    now[0] += 0.25
    assert fence.settled(["gpu-0"]) and not fence.settled(["gpu-0", "gpu-1"])
    fence.lower()
    assert not fence.settled(["gpu-0"])


@pytest.mark.emulator_only  # (a write held at the API server: fault injection)
def test_a_second_signal_while_the_fence_goes_down_does_not_wait_for_the_writes_on_their_way(cluster, handlers):
    """The kill harness (DET_K8S_KILL_ROUNDS=3) found a stopped `scheduler run` still running 30 s after the signal:
    its fence's lowering (shielded: the first signal waits for it) had a PATCH the API server held, and once the
    grace's signal cut the undo, the thread pool of the writes waited at its exit for the held one (two tries of a
    read timeout each). Once the undo is cut, the writes on their way are left: one that lands after det-k8s left is a
    STALE taint, which the next full pass of `scheduler run` removes."""
    import signal
    import threading

    from det_k8s import stopping
    from det_k8s.live.fence import Fence

    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    fence = Fence(cluster.connect(), settle=0, workers=2)
    fence.raise_on(["gpu-0", "gpu-1"])
    held = cluster.api.pause("PATCH", "nodes")
    main = threading.main_thread().ident or 0

    def stop() -> None:
        assert held.reached.wait(30)
        # (to the main thread: sent by a thread of this process to the process, the kernel may hand it to another
        # thread, and Python's handler then runs once the main thread's wait ends by itself)
        signal.pthread_kill(main, signal.SIGTERM)  # deferred: the lowering is shielded
        time.sleep(0.2)
        signal.pthread_kill(main, signal.SIGTERM)  # the second: the undo is cut

    threading.Thread(target=stop, daemon=True).start()
    late = threading.Timer(10.0, held.release)  # (without the fix, the lowering returns only after this)
    late.daemon = True
    late.start()
    with pytest.raises(stopping.Stopped) as stopped, stopping.shielded():
        fence.lower()
    late.cancel()
    assert stopped.value.hurried and not held.served  # cut while its write was still held: not waited for
    assert stopping.hurried()


@pytest.mark.emulator_only  # (a write held at the API server: fault injection)
def test_a_first_signal_while_the_fence_goes_up_waits_for_its_writes_so_the_lowering_finds_them(cluster, handlers):
    """A taint write on its way when the first signal comes is waited for (the whole grace is left): left behind, it
    would land after the shielded lowering had read the node, and stay."""
    import signal
    import threading

    from det_k8s import stopping
    from det_k8s.live.fence import Fence

    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    fence = Fence(cluster.connect(), settle=0, workers=2)
    held = cluster.api.pause("PATCH", "nodes")

    def stop() -> None:
        assert held.reached.wait(30)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
        time.sleep(0.5)
        held.release()  # (the write lands, late)

    threading.Thread(target=stop, daemon=True).start()
    with pytest.raises(stopping.Stopped):
        fence.raise_on(["gpu-0", "gpu-1"])
    with stopping.shielded():  # what `_fenced_batch` does then
        fence.lower()
    assert held.served and _fenced(cluster) == [] and fence.problems == []


@pytest.mark.emulator_only  # (a write held at the API server: fault injection)
def test_once_the_undo_is_cut_what_still_runs_waits_seconds_and_then_sends_nothing(cluster, patient_handlers):
    """After the grace's signal (the last: none comes to cut what follows) an outer cleanup ran in full: the loop's
    `lower_fences`, the Lease given back, each request up to its timeouts (two tries of 5 s connect and 30 s read),
    the nodes in turn. Now all of it shares AFTER_HURRY_SECONDS: a held write is given up when they are spent, said as
    a problem, and no request is sent after."""
    import signal
    import threading

    from det_k8s import stopping
    from det_k8s.errors import OperationTimeout
    from det_k8s.kube.kinds import NODES
    from det_k8s.live.fence import Fence

    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    api = cluster.connect()
    fence = Fence(api, settle=0, workers=2)
    fence.raise_on(["gpu-0", "gpu-1"])
    for _ in range(2):  # a signal, then a second one: the undo is cut
        with pytest.raises(stopping.Stopped):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
            time.sleep(5)
    assert stopping.hurried() and 0 < (stopping.after_hurry() or 0) <= stopping.AFTER_HURRY_SECONDS
    held = cluster.api.pause("PATCH", "nodes")  # the API server holds one node's write of the lowering ...
    late = threading.Timer(20.0, held.release)  # ... for 20 s: a client waiting its full 30 s would be answered
    late.start()
    try:
        fence.lower()  # (the loop's last cleanup, after the cut undo)
    finally:
        late.cancel()
    assert held.reached.is_set() and not held.served  # given up, not waited for
    assert len(fence.problems) == 1
    assert "the next full pass of det-k8s scheduler run removes it once it is 30 s old" in fence.problems[0]
    assert (stopping.after_hurry() or 0) <= 0  # (spent on the held write: it waited what was left, no longer)
    sent = len(cluster.api.calls)
    with pytest.raises(OperationTimeout, match="not sent: det-k8s is stopping"):
        api.get(NODES, "gpu-0")
    assert len(cluster.api.calls) == sent
