"""Where install and upgrade check the checkpoint storage before running helm.

`det_k8s/storage` (`check_storage(settings)`, probing the S3/GCS/Azure bucket with the configured
credentials) is being built on another branch. This hook is the one place it plugs in.
"""

from __future__ import annotations

from ..errors import Problem
from ..settings import Settings


def check_checkpoint_storage(settings: Settings) -> list[Problem]:
    """Problems with the checkpoint storage the settings name; `--skip-storage-check` skips the call.

    NOT WIRED YET: this is a no-op that checks nothing and returns no problems. It is wired to
    `det_k8s.storage.check_storage(settings)` when the storage branch is merged; until then
    install and upgrade do not check checkpoint storage at all.
    """
    del settings
    return []
