"""`det-k8s --help` loads no heavy SDK: kubernetes, boto3, google-cloud-storage and azure load only when used."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("kubernetes", "boto3", "botocore", "google.cloud", "azure")

PROBE = """
import sys
from det_k8s.cli import main
code = main({args!r})
loaded = sorted({{m.split('.')[0] if not m.startswith('google.cloud') else 'google.cloud'
                 for m in sys.modules if m.split('.')[0] in ('kubernetes', 'boto3', 'botocore', 'azure')
                 or m.startswith('google.cloud')}})
print('LOADED=' + ','.join(loaded), file=sys.stderr)
sys.exit(code)
"""


def loaded_modules(*args: str) -> tuple[int, list[str]]:
    result = subprocess.run([sys.executable, "-c", PROBE.format(args=list(args))], capture_output=True, text=True,
                            timeout=60)
    line = [ln for ln in result.stderr.splitlines() if ln.startswith("LOADED=")][-1]
    return result.returncode, [m for m in line.removeprefix("LOADED=").split(",") if m]


def test_help_imports_no_heavy_sdk():
    assert loaded_modules("--help") == (0, [])


def test_the_kubernetes_schemas_load_only_where_a_pod_spec_is_checked(tmp_path):
    probe = ("import sys\nfrom det_k8s.cli import main\ncode = main({args!r})\n"
             "print('SCHEMA=' + str(int('kubernetes_validate' in sys.modules or 'jsonschema' in sys.modules)), "
             "file=sys.stderr)\nsys.exit(code)\n")

    def schema_loaded(*args: str) -> bool:
        result = subprocess.run([sys.executable, "-c", probe.format(args=list(args))], capture_output=True, text=True,
                                timeout=60)
        return [ln for ln in result.stderr.splitlines() if ln.startswith("SCHEMA=")][-1] == "SCHEMA=1"

    from tests.conftest import example

    assert not schema_loaded("--help")
    assert not schema_loaded("install", "--help")
    plain = tmp_path / "plain.yaml"
    plain.write_text("maxSlotsPerPod: 4\n")
    assert not schema_loaded("validate", "-f", str(plain))  # no pod spec in it
    assert schema_loaded("validate", "-f", str(example("gpu-cluster.yaml")))  # a gpuPodSpec


def test_render_and_validate_import_no_heavy_sdk(tmp_path):
    from tests.conftest import example

    assert loaded_modules("validate", "-f", str(example("gpu-cluster.yaml")))[1] == []
    code, modules = loaded_modules("render", "-f", str(example("gpu-cluster.yaml")), "--output-dir", str(tmp_path / "c"))
    assert (code, modules) == (0, [])


def test_checkpoint_check_loads_only_the_sdk_of_the_storage_it_probes(tmp_path, closed_port):
    assert loaded_modules("checkpoint", "check", "--help") == (0, [])
    shared = tmp_path / "shared.yaml"
    shared.write_text(f"maxSlotsPerPod: 1\ncheckpointStorage: {{type: shared_fs, hostPath: {tmp_path}}}\n")
    assert loaded_modules("checkpoint", "check", "-f", str(shared)) == (0, [])
    s3 = tmp_path / "s3.yaml"
    s3.write_text("maxSlotsPerPod: 1\ncheckpointStorage: {type: s3, bucket: b, accessKey: a, secretKey: s, "
                  f"endpointUrl: 'http://127.0.0.1:{closed_port}'}}\n")
    assert loaded_modules("checkpoint", "check", "-f", str(s3)) == (1, ["boto3", "botocore"])


def test_console_script_runs():
    result = subprocess.run([sys.executable, "-m", "det_k8s", "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("det-k8s ")


def test_release_and_cluster_help_import_no_heavy_sdk():
    for args in (("install", "--help"), ("status", "--help"), ("nodes", "--help"), ("uninstall", "--help"),
                 ("pods", "--help")):
        assert loaded_modules(*args) == (0, []), args


def test_plan_imports_no_heavy_sdk():
    from tests.conftest import example

    assert loaded_modules("plan", "--help") == (0, [])
    code, modules = loaded_modules("plan", str(example("experiments") / "small-4gpu.yaml"),
                                   "--snapshot", str(example("snapshots") / "twelve-gpus.yaml"))
    assert (code, modules) == (0, [])


def test_scheduling_commands_help_imports_no_heavy_sdk():
    for args in (("experiment", "--help"), ("experiment", "create", "--help"), ("scheduler", "run", "--help"),
                 ("doctor", "--help")):
        assert loaded_modules(*args) == (0, []), args
