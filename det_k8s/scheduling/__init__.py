"""Client-side gang scheduling: experiment files, pod groups, and the pure scheduling pass.

`schedule(snapshot, queue, policy)` is the entry point (see `plan.py`); everything here is pure
data in, data out, so the offline `det-k8s plan` and the live scheduler run the same code.
"""

from .model import Plan, PodGroup, PodRequest, Policy, Reason, ReasonCode, RunningGroup, RunningPod
from .plan import schedule

__all__ = ["Plan", "PodGroup", "PodRequest", "Policy", "Reason", "ReasonCode", "RunningGroup", "RunningPod",
           "schedule"]
