"""The scheduling settings read back from an installed master's master.yaml (experiment create without -f)."""

from __future__ import annotations

import pytest
import yaml

from det_k8s.settings import Document, load_settings
from det_k8s.settings.from_master import values_from_master_config

MASTER = """resource_manager:
  type: kubernetes
  default_namespace: det
  max_slots_per_pod: 8
  slot_type: {slot_type}
task_container_defaults:
  image: {{cpu: c, gpu: g, rocm: r}}
"""


@pytest.mark.parametrize(("slot_type", "ours", "resource"), [
    ("rocm", "rocm", "amd.com/gpu"),  # was read back as gpu: a ROCm master's slots planned as nvidia.com/gpu
    ("cuda", "gpu", "nvidia.com/gpu"),
    ("gpu", "gpu", "nvidia.com/gpu"),
])
def test_the_slot_type_the_master_runs_is_kept(slot_type, ours, resource):
    values = values_from_master_config(MASTER.format(slot_type=slot_type), "Secret det/determined-master-config-x")
    assert values["slotType"] == ours
    settings = load_settings([Document("master", yaml.safe_dump({**values, "appVersion": "0.38.1"}))]).settings()
    assert settings.slot_resource == resource
