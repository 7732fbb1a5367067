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


# What `--version`, `--help` and `COMMAND --help` import (module names, never timings: issue 41 wants them within
# 2x kubectl and 3x helm, which benchmarks/startup.py measures). The same probe runs with the oldest and the newest
# Typer pyproject.toml allows in tests/cli/test_typer_versions.py.
MODULES_PROBE = """
import sys
from det_k8s.cli import main
code = main({args!r})
print('MODULES=' + ','.join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""
# Modules no `COMMAND --help` may import: what runs a command, not what describes it. pydantic is what Typer 0.29
# converts a given value with (det_k8s.cli.app.PlainOption keeps it out of the options not given).
# ... nor what runs a command: the API client, the live runtime, the settings, the planner, the chart, the cluster
# model, the storage probes, what reads a release (a module top-level import of one cost `status --help` 200 ms)
RUNTIME = ("det_k8s.kube", "det_k8s.live", "det_k8s.settings", "det_k8s.scheduling", "det_k8s.chart",
           "det_k8s.cluster", "det_k8s.storage", "det_k8s.release.live", "det_k8s.release.observe")
NOT_FOR_HELP = ("pydantic", "jinja2", "jsonschema", "kubernetes_validate", *HEAVY, *RUNTIME)


def imported(*args: str, env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    result = subprocess.run([sys.executable, "-c", MODULES_PROBE.format(args=list(args))], capture_output=True,
                            text=True, timeout=60, env=env)
    line = [ln for ln in result.stderr.splitlines() if ln.startswith("MODULES=")]
    assert line, result.stderr[-2000:]
    return result.returncode, set(line[-1].removeprefix("MODULES=").split(","))


def under(modules: set[str], *prefixes: str) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)}


def test_version_imports_no_typer_and_no_command():
    code, modules = imported("--version")
    assert code == 0
    assert under(modules, "det_k8s") == {"det_k8s", "det_k8s.cli"}
    assert not under(modules, "typer", "typing", "click", "rich", "yaml", "json")


def test_root_help_imports_no_typer_and_no_command():
    code, modules = imported("--help")
    assert code == 0
    assert under(modules, "det_k8s") == {"det_k8s", "det_k8s.cli", "det_k8s.cli.root_help",
                                         "det_k8s.cli._root_help_text"}
    assert not under(modules, "typer", "typing", "click", "rich")


def test_each_commands_help_imports_its_own_command_module_and_not_what_runs_it():
    from det_k8s.cli.app import COMMANDS

    modules_of = {f"det_k8s.cli.{module}" for module, _, _ in COMMANDS.values()}
    for name, (module, _, _) in COMMANDS.items():
        code, modules = imported(name, "--help")
        assert code == 0, name
        assert f"det_k8s.cli.{module}" in modules, name
        assert not under(modules, *NOT_FOR_HELP), (name, sorted(under(modules, *NOT_FOR_HELP)))
        # no other command's module: command modules never import each other (cli/release_steps.py holds what two share)
        assert not (modules & modules_of) - {f"det_k8s.cli.{module}"}, name


def test_a_command_run_after_root_options_loads_only_itself(tmp_path):
    from det_k8s.cli.app import COMMANDS

    # `-nml` is no spelling app.command_name is sure of: the lazy group finds the command all the same
    code, modules = imported("-nml", "plan", "--help")
    assert code == 0
    assert under(modules, *(f"det_k8s.cli.{m}" for m, _, _ in COMMANDS.values())) <= {
        "det_k8s.cli.commands.plan", "det_k8s.cli.inputs", "det_k8s.cli.nodemap"}


def test_validate_imports_what_it_checks_with_and_not_pydantic():
    """Typer 0.29 converts a given value through pydantic; det_k8s.cli.app.PlainOption passes over the values that
    conversion would leave as they are (`-f FILE`, `-o json`, `-v`), so validate does not import it."""
    from tests.conftest import example

    code, modules = imported("-v", "validate", "-f", str(example("gpu-cluster.yaml")), "-o", "json")
    assert code == 0
    assert under(modules, "jsonschema", "kubernetes_validate", "yaml") and not under(modules, "pydantic", *HEAVY)
