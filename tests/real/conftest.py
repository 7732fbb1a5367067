"""Fixtures of the real Determined master's tests (test_real_master.py, test_real_master_faults.py): a control plane
whose kwok serves pods/log, PostgreSQL and the master (built from its source in ../shared), one per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.needs import need
from tests.support.realkube.components import BuildError
from tests.support.realkube.determined import MASTER_VERSION, DeterminedOnKube, kwok_serving_logs, postgres_bin, source_of
from tests.support.realkube.fixtures import start_plane


@pytest.fixture(scope="module")
def det(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeterminedOnKube]:
    need(source_of(MASTER_VERSION) is not None, f"the Determined master {MASTER_VERSION} is built from its source in "
         "../shared/vendor/determined (or $DET_K8S_DETERMINED_SRC), which is not here")
    need(postgres_bin() is not None, "the Determined master needs PostgreSQL's server (Debian: apt-get install "
         "postgresql; ./scripts/test installs it where it can)")
    work = tmp_path_factory.mktemp("master")
    plane = start_plane(kwok_serving_logs(work))
    det = DeterminedOnKube(plane, work)
    try:
        det.start()
    except BuildError as e:
        plane.stop()
        pytest.fail(f"the Determined master {MASTER_VERSION} did not start: {e}", pytrace=False)
    try:
        yield det
    finally:
        det.stop()
        plane.stop()


@pytest.fixture
def clean(det: DeterminedOnKube) -> Iterator[DeterminedOnKube]:
    yield det
    det.kill_all()
