"""Tests that need something beyond the clone: skipped with the reason on a contributor's machine, failed in CI.

CI (`CI=true`, `.ci/run`) has `../shared` beside the clone and builds the real control plane, so a test that would
skip there has lost what it checks: it fails instead, with the same reason.
"""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def need(have: bool, reason: str) -> None:
    """Go on when `have`; otherwise skip with `reason`, or fail with it in CI."""
    if have:
        return
    if in_ci():
        pytest.fail(f"CI must not skip this: {reason}", pytrace=False)
    pytest.skip(reason)
