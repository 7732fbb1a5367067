"""Checkpoint storage checks: prove the bucket works before Determined needs it.

A pure part, `probe.py` (the write, read, list, delete sequence and its cleanup) and `report.py`
(what was found), and thin adapters, `s3.py`, `gcs.py`, `azure.py` and `shared_fs.py`, which alone
import their SDKs, inside functions. `check_storage` is the entry point for `det-k8s checkpoint
check` and for `install`/`upgrade`.
"""

from .check import DEFAULT_TIMEOUT, check_storage
from .report import Reason, Status, Step, StepResult, StorageReport

__all__ = ["DEFAULT_TIMEOUT", "Reason", "Status", "Step", "StepResult", "StorageReport", "check_storage"]
