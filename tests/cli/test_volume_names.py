"""Volume names in a settings pod spec, as the API server checks them (validation.go ValidateVolumes): two volumes of
one name passed `validate`, and every task pod built from that gpuPodSpec was refused (`spec.volumes[1].name:
Duplicate value`, issue 40)."""

from __future__ import annotations

from det_k8s.settings.podvalues import check_pod_values

SITE = """\
maxSlotsPerPod: 4
taskContainerDefaults:
  gpuPodSpec:
    spec:
      volumes:
      - name: data
        emptyDir: {}
      - name: data
        hostPath: {path: /data}
      - name: My_Cache
        emptyDir: {}
"""


def test_validate_refuses_two_volumes_of_one_name_in_a_gpu_pod_spec(run_cli, tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    result = run_cli("validate", "-f", site)
    assert result.code == 1
    text = result.out + result.err
    assert ("error: taskContainerDefaults.gpuPodSpec.spec.volumes[1].name: duplicate volume name 'data' (also at "
            "spec.volumes[0])") in text
    assert f"({site}:8)" in text
    assert "taskContainerDefaults.gpuPodSpec.spec.volumes[2].name: 'My_Cache' is not a valid volume name" in text


def test_a_volume_with_a_bad_name_is_not_counted_among_the_names():
    spec = {"spec": {"volumes": [{"name": "Bad", "emptyDir": {}}, {"name": "Bad", "emptyDir": {}},
                                 {"name": "ok", "emptyDir": {}}, {"name": "ok", "emptyDir": {}}]}}
    found = [(f.path, f.message.split(" (")[0]) for f in check_pod_values(spec)]
    assert found == [(("spec", "volumes", 0, "name"), "'Bad' is not a valid volume name"),
                     (("spec", "volumes", 1, "name"), "'Bad' is not a valid volume name"),
                     (("spec", "volumes", 3, "name"), "duplicate volume name 'ok'")]
