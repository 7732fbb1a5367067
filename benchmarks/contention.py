"""Benchmark 3: contention, simulated. det-k8s's scheduling core against per-pod placement.

The same jobs meet the same cluster twice, in a discrete-event simulation (events: arrivals and
job ends; time in seconds):

- det-k8s: at every event, one pass of the real `schedule()` over the queue of that moment (the
  simulated clock is `now`, default policy: the starvation guard engages after 300 s). A placed
  group's pods all start at once. (The live scheduler passes at every submission and every 10 s;
  a pass at every event is that, idealised.)
- per pod, as plain Kubernetes schedules: a job's pods join one FIFO queue when it arrives, in
  rank order (the pods of jobs submitted together interleave, as concurrent controllers create
  them). At every event each pending pod, in queue order, is bound to the node with the most free
  GPUs that fits it (LeastAllocated), if any; the others stay pending and are retried later (no
  head-of-line blocking). A job starts when its last pod is bound; until then its bound pods hold
  their GPUs doing nothing.

Reported for each: GPU-hours held by pods of jobs that have not started (partial groups), jobs
that were ever partly bound, deadlock (after the last arrival, a state in which nothing can ever
progress: no job runs, none can start, and pods hold GPUs for jobs that never will), mean and
95th-percentile and longest queue wait (arrival to start) of the jobs that started, jobs that
never started, and the makespan. GPU-hours are counted over the same window for both: from the
first arrival until 24 hours after the last one.

Teams (`teams_scenario`): four teams entitled to 40/30/20/10% of the GPUs submit 10/20/30/40% of the jobs of an
overloaded trace (load 1.2). det-k8s with a queue per team (each guaranteed its share, borrowing what others leave,
reclaiming it: a reclaimed job starts again from the beginning) against det-k8s without queues and per-pod placement:
each team's share of the GPU-hours of the busy window beside its entitlement, Jain's fairness index over what each
team got of what it was owed (its entitlement, or what it asked when less), utilisation, the team-hours a guarantee
was owed (a team below it had a waiting job that fit what it leaves), and the partial-group and deadlock figures,
which must stay 0 for det-k8s.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from det_k8s.cluster.model import GPU, PODS, Node, Pod, Snapshot
from det_k8s.scheduling import labels as L
from det_k8s.scheduling.model import PodGroup, PodRequest, Policy
from det_k8s.scheduling.plan import schedule

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)
TAIL = 24 * 3600.0  # the window ends this long after the last arrival
HOUR = 3600.0


@dataclass(frozen=True)
class Job:
    id: str
    arrival: float
    pods: int
    gpus_per_pod: int
    duration: float
    user: str = "alice"

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


@dataclass
class Outcome:
    """What happened to the jobs in one simulation."""

    started: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    ever_partial: set[str] = field(default_factory=set)
    partial_gpu_seconds: float = 0.0
    deadlock: dict[str, Any] | None = None
    broken_plans: int = 0  # placements that were not whole (must stay 0)
    runs: list[tuple[str, float, float]] = field(default_factory=list)  # (job, start, end) of every run
    reclaimed: int = 0  # runs ended early by reclaim (their jobs were queued again)
    owed_team_hours: dict[str, float] = field(default_factory=dict)  # per team: time its guarantee was owed

    def summary(self, jobs: list[Job]) -> dict[str, Any]:
        waits = sorted(self.started[j.id] - j.arrival for j in jobs if j.id in self.started)
        large = [self.started[j.id] - j.arrival for j in jobs if j.id in self.started and j.gpus >= 16]
        return {
            "jobs": len(jobs), "started": len(self.started), "finished": len(self.finished),
            "never_started": len(jobs) - len(self.started) - len(self.rejected), "rejected": len(self.rejected),
            "partial_gpu_hours": round(self.partial_gpu_seconds / HOUR, 1),
            "jobs_ever_partial": len(self.ever_partial), "deadlocked": self.deadlock is not None,
            "deadlock": self.deadlock, "broken_plans": self.broken_plans,
            "mean_wait_h": round(statistics.fmean(waits) / HOUR, 2) if waits else None,
            "p95_wait_h": round(waits[min(len(waits) - 1, math.ceil(0.95 * len(waits)) - 1)] / HOUR, 2)
            if waits else None,
            "max_wait_h": round(waits[-1] / HOUR, 2) if waits else None,
            "mean_wait_16plus_gpus_h": round(statistics.fmean(large) / HOUR, 2) if large else None,
            "makespan_h": round((max(self.finished.values()) - min(j.arrival for j in jobs)) / HOUR, 1)
            if len(self.finished) == len(jobs) - len(self.rejected) and self.finished else None,
        }


def _window(jobs: list[Job]) -> tuple[float, float]:
    start = min(j.arrival for j in jobs)
    return start, max(j.arrival for j in jobs) + TAIL


# -- det-k8s --------------------------------------------------------------------------------------------


def _group(job: Job, sequence: int) -> PodGroup:
    when = (EPOCH + timedelta(seconds=job.arrival)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods = tuple(PodRequest(f"{job.id}-{r}", r, {GPU: job.gpus_per_pod * 1000}) for r in range(job.pods))
    return PodGroup(job.id, job.id, job.user, 50, when, sequence, pods, job.gpus)


def _running_pods(job: Job, placement: tuple[tuple[str, str], ...], started: float) -> list[Pod]:
    labels = {L.MANAGED_BY: L.MANAGER, L.GROUP: job.id, L.USER: job.user,
              L.PRIORITY: "50", L.SIZE: str(job.pods)}
    created = (EPOCH + timedelta(seconds=started)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [Pod(name, "research", node, "Running", {GPU: job.gpus_per_pod * 1000}, {**labels, L.RANK: str(rank)},
                created=created) for rank, (name, node) in enumerate(placement)]


def simulate_det_k8s(nodes: list[tuple[str, int]], jobs: list[Job], policy: Policy,
                     guarantees: dict[str, int] | None = None) -> Outcome:
    """With team queues in `policy`, reclaim's victims stop at once and go back to the queue (their run's work is
    lost: they start again from the beginning). `guarantees` (team = user -> GPUs) counts the time each team's
    guarantee was owed: it had a waiting job that fits within what its guarantee leaves."""
    outcome = Outcome()
    node_objs = tuple(Node(name, {GPU: gpus * 1000, "cpu": 96000, PODS: 110000}) for name, gpus in nodes)
    by_id = {job.id: job for job in jobs}
    sequence = {job.id: i for i, job in enumerate(sorted(jobs, key=lambda j: (j.arrival, j.id)))}
    events: list[tuple[float, int, str]] = [(job.arrival, 1, job.id) for job in jobs]  # 0: end, 1: arrival
    heapq.heapify(events)
    queue: dict[str, PodGroup] = {}
    running: dict[str, list[Pod]] = {}
    began: dict[str, float] = {}  # running job -> when this run started
    clock = 0.0
    while events:
        now = events[0][0]
        if guarantees:
            _owe(outcome, guarantees, queue, running, by_id, now - clock)
        clock = now
        while events and events[0][0] == now:
            _, kind, job_id = heapq.heappop(events)
            if kind == 0:
                if job_id not in running or began[job_id] + by_id[job_id].duration != now:
                    continue  # the end of a run reclaim cut short
                running.pop(job_id)
                outcome.runs.append((job_id, began.pop(job_id), now))
                outcome.finished[job_id] = now
            else:
                queue[job_id] = _group(by_id[job_id], sequence[job_id])
        if not queue:
            continue
        snapshot = Snapshot(node_objs, tuple(pod for pods in running.values() for pod in pods))
        plan = schedule(snapshot, list(queue.values()), policy, now=EPOCH + timedelta(seconds=now))
        for victim in plan.victims:  # reclaimed (or preempted): stops now, queued again from the start
            running.pop(victim)
            outcome.runs.append((victim, began.pop(victim), now))
            outcome.reclaimed += 1
            queue[victim] = _group(by_id[victim], sequence[victim])
        for job_id, placement in plan.placements.items():
            job = by_id[job_id]
            if len(placement) != job.pods or not all(node for _, node in placement):
                outcome.broken_plans += 1
                continue
            del queue[job_id]
            outcome.started.setdefault(job_id, now)
            running[job_id] = _running_pods(job, placement, now)
            began[job_id] = now
            heapq.heappush(events, (now + job.duration, 0, job_id))
        for job_id in plan.rejected:
            del queue[job_id]
            outcome.rejected.append(job_id)
    if queue:  # nothing runs, nothing arrives, groups still wait: they can never start
        outcome.deadlock = {"jobs": sorted(queue), "gpus_held": 0}
    return outcome


def _owe(outcome: Outcome, guarantees: dict[str, int], queue: dict[str, PodGroup], running: dict[str, list[Pod]],
         by_id: dict[str, Job], seconds: float) -> None:
    """Over the last `seconds` (nothing changed in them): each team below its guarantee with a waiting job that
    fits what the guarantee leaves was owed it."""
    if seconds <= 0:
        return
    used: dict[str, int] = {}
    for job_id in running:
        job = by_id[job_id]
        used[job.user] = used.get(job.user, 0) + job.gpus
    for job_id in queue:
        job = by_id[job_id]
        if used.get(job.user, 0) + job.gpus <= guarantees.get(job.user, 0):
            owed = outcome.owed_team_hours
            owed[job.user] = owed.get(job.user, 0.0) + seconds / HOUR
            used[job.user] = guarantees[job.user] + 1  # counted once per team
    return


# -- per pod, as kube-scheduler ----------------------------------------------------------------------


def simulate_per_pod(nodes: list[tuple[str, int]], jobs: list[Job]) -> Outcome:
    outcome = Outcome()
    free = dict(nodes)
    order = [name for name, _ in nodes]
    by_id = {job.id: job for job in jobs}
    arrivals: dict[float, list[Job]] = {}
    for job in jobs:
        arrivals.setdefault(job.arrival, []).append(job)
    events: list[tuple[float, int, str]] = [(t, 1, "") for t in arrivals]
    heapq.heapify(events)
    pending: list[tuple[str, int]] = []  # (job, rank), FIFO
    bound: dict[str, list[str]] = {}
    window_start, window_end = _window(jobs)
    clock = window_start
    last_progress = window_start

    def held_idle() -> int:
        return sum(len(on) * by_id[j].gpus_per_pod for j, on in bound.items() if j not in outcome.started)

    while events:
        now = events[0][0]
        outcome.partial_gpu_seconds += held_idle() * (min(now, window_end) - min(clock, window_end))
        clock = now
        while events and events[0][0] == now:
            _, kind, job_id = heapq.heappop(events)
            if kind == 0:
                job = by_id[job_id]
                for node in bound.pop(job_id):
                    free[node] += job.gpus_per_pod
                outcome.finished[job_id] = now
                last_progress = now
            else:
                arrived = sorted(arrivals[now], key=lambda j: j.id)
                for rank in range(max(j.pods for j in arrived)):  # controllers create pods concurrently
                    pending.extend((j.id, rank) for j in arrived if rank < j.pods)
        still = []
        for job_id, rank in pending:
            need = by_id[job_id].gpus_per_pod
            fitting = [n for n in order if free[n] >= need]
            if not fitting:
                still.append((job_id, rank))
                continue
            node = max(fitting, key=lambda n: (free[n], -order.index(n)))  # most free first (LeastAllocated)
            free[node] -= need
            bound.setdefault(job_id, []).append(node)
            last_progress = now
        pending = still
        for job_id, on in bound.items():
            job = by_id[job_id]
            if job_id in outcome.started:
                continue
            if len(on) == job.pods:
                outcome.started[job_id] = now
                outcome.runs.append((job_id, now, now + job.duration))
                heapq.heappush(events, (now + job.duration, 0, job_id))
            else:
                outcome.ever_partial.add(job_id)
    outcome.partial_gpu_seconds += held_idle() * max(0.0, window_end - min(clock, window_end))
    stuck = sorted(j for j in bound if j not in outcome.started)
    if pending:
        outcome.deadlock = {"since_h": round((last_progress - window_start) / HOUR, 2), "jobs": stuck,
                            "gpus_held": held_idle(), "pods_pending": len(pending)}
    return outcome


# -- scenarios --------------------------------------------------------------------------------------


def documents_scenarios() -> list[dict[str, Any]]:
    """The Determined documents' two deadlocks, each job running 2 hours once started."""
    three = [(f"gpu-{i}", 4) for i in range(3)]
    cases = [
        ("a 16-GPU job (4 pods x 4) on three 4-GPU nodes", three, [Job("big", 0.0, 4, 4, 2 * HOUR)]),
        ("two 12-GPU jobs (3 pods x 4) submitted together on 12 GPUs", three,
         [Job("a", 0.0, 3, 4, 2 * HOUR), Job("b", 0.0, 3, 4, 2 * HOUR, user="bob")]),
    ]
    return [_compare(name, nodes, jobs) for name, nodes, jobs in cases]


SIZES = [(1, 0.25), (2, 0.15), (4, 0.25), (8, 0.2), (16, 0.1), (32, 0.05)]  # slots per trial, probability
TRIALS = [1, 1, 1, 2, 3, 4]  # trials an experiment submits at once (a small hyperparameter search)


def trace(seed: int, count: int, nodes: list[tuple[str, int]], load: float = 0.9) -> list[Job]:
    """`count` jobs (trials): experiments arrive as a Poisson process and submit 1-4 equal trials at once,
    so that the offered load is `load` of the cluster's GPUs; slots 1-32, as 4-GPU pods beyond 4;
    durations lognormal (median 1 hour, sigma 1, clipped to 5 minutes - 24 hours)."""
    rng = random.Random(seed)
    mean_gpus = sum(s * p for s, p in SIZES)
    mean_hours = math.exp(0.5)
    gpus = sum(g for _, g in nodes)
    rate = load * gpus / (mean_gpus * mean_hours) / statistics.fmean(TRIALS)  # experiments per hour
    clock, jobs = 0.0, []
    users = ["alice", "bob", "carol", "dave"]
    while len(jobs) < count:
        clock += rng.expovariate(rate) * HOUR
        slots = rng.choices([s for s, _ in SIZES], [p for _, p in SIZES])[0]
        pods, per_pod = (1, slots) if slots <= 4 else (slots // 4, 4)
        user = rng.choice(users)
        for _ in range(min(rng.choice(TRIALS), count - len(jobs))):
            duration = min(max(rng.lognormvariate(0, 1), 1 / 12), 24) * HOUR
            jobs.append(Job(f"job-{len(jobs):04d}", round(clock, 3), pods, per_pod, round(duration, 3), user))
    return jobs


def _compare(name: str, nodes: list[tuple[str, int]], jobs: list[Job]) -> dict[str, Any]:
    start, end = _window(jobs)
    return {
        "scenario": name, "gpus": sum(g for _, g in nodes), "jobs": len(jobs), "window_h": round((end - start) / HOUR, 1),
        "det_k8s": simulate_det_k8s(nodes, jobs, Policy()).summary(jobs),
        "det_k8s_no_guard": simulate_det_k8s(nodes, jobs, Policy(reservations=False)).summary(jobs),
        "per_pod": simulate_per_pod(nodes, jobs).summary(jobs),
    }


# -- teams ----------------------------------------------------------------------------------------------

TEAMS = (("alice", 0.4), ("bob", 0.3), ("carol", 0.2), ("dave", 0.1))  # team (its user) and its entitled share
DEMAND = (0.1, 0.2, 0.3, 0.4)  # the share of the jobs each team submits: the most entitled submit the least


def team_trace(seed: int, count: int, nodes: list[tuple[str, int]], load: float) -> list[Job]:
    """`trace`, with the teams submitting DEMAND of the experiments: their needs and entitlements differ."""
    rng = random.Random(seed * 7919)
    return [Job(j.id, j.arrival, j.pods, j.gpus_per_pod, j.duration,
                rng.choices([t for t, _ in TEAMS], DEMAND)[0]) for j in trace(seed, count, nodes, load)]


def team_queues(gpus: int) -> dict[str, Any]:
    """One queue per team, guaranteed its share of the GPUs (rounded down), no limit."""
    return {"version": 1, "queues": [{"name": team, "guarantee": {GPU: int(gpus * share)}, "members": {"users": [team]}}
                                     for team, share in TEAMS]}


def team_figures(outcome: Outcome, jobs: list[Job], gpus: int, guarantees: dict[str, int] | None) -> dict[str, Any]:
    """Each team's share of the GPU-hours in the busy window (first to last arrival) beside its entitlement; Jain's
    fairness index over what each team got of what it was owed (its entitlement of the window's GPU-hours, or the
    GPU-hours it submitted when fewer; capped at 1); utilisation in that window; the team-hours a guarantee was
    owed."""
    start, end = min(j.arrival for j in jobs), max(j.arrival for j in jobs)
    by_id = {j.id: j for j in jobs}
    used: dict[str, float] = {team: 0.0 for team, _ in TEAMS}
    for job_id, began, ended in outcome.runs:
        overlap = max(0.0, min(ended, end) - max(began, start))
        used[by_id[job_id].user] += overlap * by_id[job_id].gpus / HOUR
    demand: dict[str, float] = {team: 0.0 for team, _ in TEAMS}  # GPU-hours submitted in the window
    for job in jobs:
        demand[job.user] += job.gpus * job.duration / HOUR
    total = sum(used.values())
    window = gpus * (end - start) / HOUR
    # a team is owed its entitlement, or all it asked for when that is less; getting more is no unfairness to it
    ratios = [min(1.0, used[team] / min(share * window, demand[team])) if demand[team] else 1.0
              for team, share in TEAMS]
    jain = sum(ratios) ** 2 / (len(ratios) * sum(r * r for r in ratios)) if any(ratios) else 0.0
    return {
        "share": {team: round(used[team] / total, 3) if total else 0.0 for team, _ in TEAMS},
        "entitled": dict(TEAMS), "jain": round(jain, 3),
        "utilisation": round(total / (gpus * (end - start) / HOUR), 3) if end > start else None,
        "owed_team_hours": round(sum(outcome.owed_team_hours.values()), 1) if guarantees is not None else None,
        "reclaimed_runs": outcome.reclaimed,
        "partial_groups": len(outcome.ever_partial), "deadlocked": outcome.deadlock is not None,
        "broken_plans": outcome.broken_plans,
    }


def teams_scenario(seed: int, nodes: list[tuple[str, int]], count: int, load: float) -> dict[str, Any]:
    from det_k8s.scheduling.queues import parse_queues

    gpus = sum(g for _, g in nodes)
    jobs = team_trace(seed, count, nodes, load)
    tree, problems = parse_queues(team_queues(gpus))
    assert tree is not None, problems
    guarantees = {team: int(gpus * share) for team, share in TEAMS}
    with_quotas = simulate_det_k8s(nodes, jobs, Policy(queues=tree), guarantees)
    without = simulate_det_k8s(nodes, jobs, Policy(), guarantees)
    per_pod = simulate_per_pod(nodes, jobs)
    return {"scenario": f"teams, seed {seed}", "gpus": gpus, "jobs": len(jobs),
            "with_quotas": team_figures(with_quotas, jobs, gpus, guarantees),
            "without_quotas": team_figures(without, jobs, gpus, guarantees),
            "per_pod": team_figures(per_pod, jobs, gpus, None)}


def run(config: dict[str, Any]) -> dict[str, Any]:
    nodes = [(f"a100-{i}", 8) for i in range(config["nodes_8gpu"])] + [
        (f"v100-{i}", 4) for i in range(config["nodes_4gpu"])]
    traces = [_compare(f"random trace, seed {seed}", nodes, trace(seed, config["jobs"], nodes, config["load"]))
              for seed in range(1, config["traces"] + 1)]
    teams = [teams_scenario(seed, nodes, config["jobs"], config.get("team_load", 1.2))
             for seed in range(1, config.get("team_traces", 3) + 1)]
    return {"documents": documents_scenarios(), "traces": traces, "teams": teams,
            "cluster": {"nodes_8gpu": config["nodes_8gpu"], "nodes_4gpu": config["nodes_4gpu"],
                        "gpus": sum(g for _, g in nodes)},
            "load": config["load"], "jobs_per_trace": config["jobs"]}
