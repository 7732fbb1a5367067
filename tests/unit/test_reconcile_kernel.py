"""The live pass's kernel: every intent kind has its actor, and the actors reach the driver only through `Effects`."""

import re
from pathlib import Path
from typing import get_args

from det_k8s.live.act import ACTORS
from det_k8s.live.decide import OwnIntent, Recover
from det_k8s.live.master_actions import MasterIntent, MasterRepair
from det_k8s.live.master_pods import _ACTORS as MASTER_ACTORS

LIVE = Path(__file__).resolve().parents[2] / "det_k8s" / "live"


def test_every_intent_kind_has_one_actor():
    assert set(ACTORS) == {*get_args(OwnIntent), Recover}
    assert set(MASTER_ACTORS) == {*get_args(MasterIntent), *get_args(MasterRepair)}


def test_no_module_but_the_driver_calls_its_private_methods():
    private = re.compile(r"\bs\._[a-z]")
    found = [f"{path.name}:{n}" for path in sorted(LIVE.glob("*.py")) if path.name != "scheduler.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if private.search(line)]
    assert found == []
