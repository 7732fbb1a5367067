"""Where install and upgrade check the checkpoint storage before running helm.

The probe itself is `det_k8s.storage.check_storage` (write, read back, list and delete a probe
object with the configured credentials); this turns its report into the preflight's problems, so
a bucket the master cannot use stops the install before helm runs, with every failed operation
named on its own line.
"""

from __future__ import annotations

from ..errors import Problem, Severity
from ..settings import Settings
from ..storage import DEFAULT_TIMEOUT, check_storage
from ..storage.shared_fs import TESTING_ONLY

PATH = "checkpointStorage"


def check_checkpoint_storage(settings: Settings, *, timeout: float | None = None) -> list[Problem]:
    """Problems with the checkpoint storage the settings name; `--skip-storage-check` skips the call."""
    report = check_storage(settings, timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
    said = TESTING_ONLY.format(path=settings.checkpoint.host_path or "")  # the settings' own warning says it once
    problems = [Problem(Severity.WARNING, PATH, warning) for warning in report.warnings if warning != said]
    for result in report.failures:
        problems.append(Problem(Severity.ERROR, PATH, f"{result.step.value} failed: {result.message}",
                                "check the bucket and credentials with `det-k8s checkpoint check -f ...`, "
                                "or pass --skip-storage-check"))
    if report.left_behind:
        problems.append(Problem(Severity.WARNING, PATH, f"the probe object {report.left_behind} could not be deleted",
                                "delete it by hand"))
    return problems
