"""`python -m benchmarks.pass_child SNAPSHOT GROUPS RUNS DATA`: time one scheduling pass, print JSON.

Run in a child process with an older det_k8s first on PYTHONPATH (`--baseline`), and with the current
one, their rounds interleaved, so a pass can be compared before and after a change on a shared machine.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

from .scheduling import NOW, _paused_gc, build_queue, site_settings
from .timing import time_call


def main() -> None:
    from det_k8s.cluster.read import snapshot_from_objects
    from det_k8s.scheduling.labels import running_groups
    from det_k8s.scheduling.model import Policy
    from det_k8s.scheduling.plan import schedule

    snapshot, groups, runs, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    with open(snapshot, encoding="utf-8") as handle:
        document = json.load(handle)
    cluster = snapshot_from_objects([document])
    del document
    queue = build_queue(groups, site_settings(data), seed=groups)
    running = running_groups(cluster.pods)
    timing, plan = time_call(_paused_gc(partial(schedule, cluster, queue, Policy(), running, now=NOW)), runs=runs,
                             warmup=1)
    print(json.dumps({"schedule": timing.data(), "placed": len(plan.placements)}))


if __name__ == "__main__":
    main()
