"""`det-k8s render --chart` into the official Determined charts (read from ../shared/determined/charts, never
copied into the project), with the real helm 3 and helm 4: the Chart.yaml keeps its apiVersion v1 rules, the
result lints and templates, and every setting the chart's master configuration drops is reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import example
from tests.integration.test_helm_chart import helm_run
from tests.support.needs import need

pytestmark = pytest.mark.helm

CHARTS = Path(__file__).resolve().parents[2].parent / "shared" / "determined" / "charts"
RELEASE_OF = {"0.17.15": "0.17.15", "0.26.2": "0.26.2", "v0.38.1": "0.38.1"}


@pytest.fixture(autouse=True)
def _shared() -> None:
    need(CHARTS.is_dir(), f"{CHARTS} is absent: the official charts are read from there")


def settings(tmp_path: Path, tag: str) -> Path:
    """gpu-cluster (s3 with a prefix) for the tag's release, as a file of its own."""
    data = yaml.safe_load(example("gpu-cluster.yaml").read_text())
    data["appVersion"] = RELEASE_OF[tag]
    if RELEASE_OF[tag] < "0.31":
        data["defaultPassword"] = data.pop("initialUserPassword")
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("tag", list(RELEASE_OF))
def test_rendered_into_the_official_chart_it_lints_and_keeps_apiversion_v1(run_cli, helm, tmp_path, tag):
    out = tmp_path / "out"
    result = run_cli("render", "-f", settings(tmp_path, tag), "--chart", CHARTS / tag, "--output-dir", out,
                     "--helm-binary", helm)
    assert result.code == 0, result.err
    chart = yaml.safe_load((out / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v1" and "type" not in chart  # a v1 chart has no type: helm lint would fail
    assert chart["appVersion"] == RELEASE_OF[tag]
    lint = helm_run(helm, "lint", str(out), home=tmp_path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "[ERROR]" not in lint.stdout
    dropped = [line for line in result.err.splitlines() if "would be silently dropped" in line]
    if tag == "0.17.15":  # the 0.17.15 official chart writes no prefix, for s3 either
        (line,) = dropped
        assert line.startswith("warning: checkpointStorage.prefix: set, but the master configuration --chart "
                               f"{CHARTS / tag} renders has no checkpoint_storage.prefix: the setting would be "
                               "silently dropped; remove it, or use a chart that writes it")
        assert f"({tmp_path / 'settings.yaml'}:" in line
    else:
        assert dropped == []


def test_install_refuses_a_chart_that_drops_a_setting_before_running_helm(run_cli, helm, tmp_path):
    result = run_cli("install", "demo", "-f", settings(tmp_path, "0.17.15"), "--chart", CHARTS / "0.17.15",
                     "--dry-run", "--helm-binary", helm)
    assert result.code == 1
    assert "checkpointStorage.prefix: set, but the master configuration" in result.err
    assert "would run:" not in result.out + result.err


def test_a_chart_helm_cannot_template_is_reported_before_anything_is_installed(run_cli, helm, tmp_path):
    path = settings(tmp_path, "v0.38.1")
    data = yaml.safe_load(path.read_text())
    del data["initialUserPassword"]  # v0.38.1's chart fails a fresh install without one
    path.write_text(yaml.safe_dump(data))
    result = run_cli("render", "-f", path, "--chart", CHARTS / "v0.38.1", "--output-dir", tmp_path / "out",
                     "--helm-binary", helm)
    assert result.code == 1
    assert f"--chart {CHARTS / 'v0.38.1'}: helm cannot template it with these settings" in result.err
    assert "initial password" in result.err


@pytest.mark.parametrize("tag", list(RELEASE_OF))
def test_a_values_file_of_the_official_chart_validates(run_cli, tmp_path, tag):
    """The official values.yaml of each release, with the one value it leaves required, is valid settings."""
    data = yaml.safe_load((CHARTS / tag / "values.yaml").read_text())
    data.update(maxSlotsPerPod=4, appVersion=RELEASE_OF[tag])
    if RELEASE_OF[tag] >= "0.31":
        data["initialUserPassword"] = "Abcdefg1"
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_cli("validate", "-f", path)
    assert result.code == 0, result.out + result.err


@pytest.mark.parametrize("tag", list(RELEASE_OF))
def test_the_official_charts_own_scheduler_is_named_whatever_gangscheduler_says(run_cli, helm, tmp_path, tag):
    # The official chart deploys its kube-scheduler 1.18.9 plugin for defaultScheduler coscheduler; gangScheduler is
    # det-k8s's key, which that chart does not read. det-k8s said nothing, and `det-k8s scheduler run` would bind the
    # same pods as that plugin.
    out = tmp_path / "out"
    result = run_cli("render", "-f", settings(tmp_path, tag), "--set", "defaultScheduler=coscheduler",
                     "--set", "checkpointStorage.prefix=null", "--chart", CHARTS / tag,
                     "--output-dir", out, "--helm-binary", helm)
    assert result.code == 0, result.err
    (line,) = [ln for ln in result.err.splitlines() if "kube-scheduler of its own" in ln]
    assert line.startswith(f"warning: defaultScheduler: --chart {CHARTS / tag} deploys a kube-scheduler of its own for "
                           "defaultScheduler coscheduler (coscheduler in kube-system (k8s.gcr.io/scheduler-plugins/"
                           "kube-scheduler:v0.18.9)), whatever gangScheduler says")
    assert "`det-k8s scheduler run` must not run as well" in line
    plain = run_cli("render", "-f", settings(tmp_path, tag), "--set", "checkpointStorage.prefix=null",
                    "--chart", CHARTS / tag, "--output-dir", tmp_path / "plain", "--helm-binary", helm)
    assert plain.code == 0 and "kube-scheduler of its own" not in plain.err


def test_install_goes_on_after_a_warning_about_the_chart(run_cli, helm, tmp_path):
    # A warning from the --chart checks (its own scheduler) is printed; only errors stop the install.
    result = run_cli("install", "demo", "-f", settings(tmp_path, "v0.38.1"), "--set", "defaultScheduler=coscheduler",
                     "--chart", CHARTS / "v0.38.1", "--dry-run", "--helm-binary", helm)
    assert result.code == 0, result.err
    assert "warning: defaultScheduler: --chart" in result.err and "would run:" in result.out + result.err


@pytest.mark.parametrize("tag", list(RELEASE_OF))
def test_the_default_task_images_det_k8s_calls_exact_are_the_official_charts(tag):
    """At the tags read, the table's default images are the official chart's (its values.yaml from 0.23.2, the
    references its master-config.yaml re-prefixes before); `versions.exact` calls them exact there and nowhere else."""
    import re

    from det_k8s.determined import versions

    version = versions.v(RELEASE_OF[tag])
    if tag == "0.17.15":
        text = (CHARTS / tag / "templates" / "master-config.yaml").read_text()
        refs = re.findall(r'split "/" "determinedai/([^"]+)"', text)
        official = {"cpu": refs[0], "gpu": refs[1]}
    else:
        images = yaml.safe_load((CHARTS / tag / "values.yaml").read_text())["defaultImages"]
        official = {"cpu": images["cpuImage"], "gpu": images["gpuImage"]}
    for device in ("cpu", "gpu"):
        assert versions.value_of(f"chart.image.{device}", version) == official[device]
        assert versions.exact(f"chart.image.{device}", version)
    between = versions.Version(version.major, version.minor, version.patch + 1)
    assert not versions.exact("chart.image.cpu", between)


@pytest.mark.parametrize("tag", list(RELEASE_OF))
def test_a_zero_the_official_chart_turns_into_its_default_is_reported(run_cli, helm, tmp_path, tag):
    # The official charts write `save_trial_best: {{ .Values.checkpointStorage.saveTrialBest | default 1 }}`: helm's
    # `default` takes 0 for unset, so saveTrialBest: 0 reaches the master as 1 (and saveTrialLatest likewise), and
    # det-k8s said nothing although the master then keeps other checkpoints than the settings say.
    result = run_cli("render", "-f", settings(tmp_path, tag), "--set", "checkpointStorage.saveTrialBest=0",
                     "--set", "checkpointStorage.saveTrialLatest=0", "--set", "checkpointStorage.saveExperimentBest=0",
                     "--set", "checkpointStorage.prefix=null", "--chart", CHARTS / tag, "--output-dir", tmp_path / "out",
                     "--helm-binary", helm)
    assert result.code == 0, result.err
    changed = sorted(line for line in result.err.splitlines() if "renders it as" in line)
    assert changed == [
        f"warning: checkpointStorage.{ours}: set to 0, but the master configuration --chart {CHARTS / tag} renders it "
        f"as checkpoint_storage.{theirs}: 1; use det-k8s's bundled chart, which writes 0 (--set "
        f"checkpointStorage.{ours}=0)" for ours, theirs in (("saveTrialBest", "save_trial_best"),
                                                          ("saveTrialLatest", "save_trial_latest"))], result.err


@pytest.mark.parametrize("tag", ["0.26.2", "v0.38.1"])
def test_log_color_false_the_official_chart_turns_into_true_is_reported(run_cli, helm, tmp_path, tag):
    # `color: {{ .Values.logColor | default true }}`: logColor: false reaches the master as true.
    result = run_cli("render", "-f", settings(tmp_path, tag), "--set", "logColor=false", "--chart", CHARTS / tag,
                     "--output-dir", tmp_path / "out", "--helm-binary", helm)
    assert result.code == 0, result.err
    assert (f"warning: logColor: set to false, but the master configuration --chart {CHARTS / tag} renders it as "
            "log.color: true; use det-k8s's bundled chart, which writes false") in result.err, result.err


def test_upgrade_into_the_official_chart_needs_no_initial_password(run_cli, helm, tmp_path):
    # The v0.38.1 official chart asks for initialUserPassword only on a fresh install (its lookup finds no database
    # Service); det-k8s's check renders offline, where lookup finds nothing, so `upgrade --chart` without the password
    # failed with "helm cannot template it", though helm upgrade itself would have gone through.
    path = settings(tmp_path, "v0.38.1")
    data = yaml.safe_load(path.read_text())
    del data["initialUserPassword"]
    path.write_text(yaml.safe_dump(data))
    result = run_cli("upgrade", "demo", "-f", path, "--set", "checkpointStorage.prefix=null", "--chart",
                     CHARTS / "v0.38.1", "--dry-run", "--helm-binary", helm)
    assert "cannot template" not in result.err and "initial password" not in result.err, result.err
    assert result.code == 0, result.err
    install = run_cli("install", "demo", "-f", path, "--chart", CHARTS / "v0.38.1", "--dry-run", "--helm-binary", helm)
    assert install.code == 1 and "initialUserPassword" in install.err  # a fresh install does need it


def test_upgrade_dry_run_of_the_bundled_chart_needs_no_initial_password(run_cli, helm, tmp_path):
    # The same for det-k8s's own chart: `upgrade --dry-run` rendered it as a fresh install, which asks for the password.
    path = settings(tmp_path, "v0.38.1")
    data = yaml.safe_load(path.read_text())
    del data["initialUserPassword"]
    path.write_text(yaml.safe_dump(data))
    result = run_cli("upgrade", "demo", "-f", path, "--dry-run", "--helm-binary", helm)
    assert result.code == 0, result.err
    assert "kind: Deployment" in result.out and "Upgrade-Check-0" not in result.out + result.err


@pytest.mark.parametrize("tag", ["0.17.15", "0.26.2"])
def test_without_an_app_version_the_charts_own_is_installed(run_cli, helm, tmp_path, tag):
    # `render --chart` into the official 0.17.15 chart with settings that name no appVersion wrote appVersion 0.38.1
    # (det-k8s's default) into its Chart.yaml: a 0.38.1 master given the 0.17.15 chart's `namespace:`, which it
    # refuses at start. The chart's own appVersion is the release an admin who passes it means.
    data = yaml.safe_load(settings(tmp_path, tag).read_text())
    del data["appVersion"]
    path = tmp_path / "no-version.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    result = run_cli("render", "-f", path, "--set", "checkpointStorage.prefix=null", "--chart", CHARTS / tag,
                     "--output-dir", out, "--helm-binary", helm)
    assert result.code == 0, result.err
    assert yaml.safe_load((out / "Chart.yaml").read_text())["appVersion"] == RELEASE_OF[tag]
    assert f"(appVersion {RELEASE_OF[tag]})" in result.err + result.out
    # and the settings are checked against that release: 0.17.15 and 0.26.2 have no initialUserPassword
    refused = run_cli("render", "-f", path, "--set", "initialUserPassword=Abcdefg1", "--chart", CHARTS / tag,
                      "--output-dir", tmp_path / "o2", "--helm-binary", helm)
    assert refused.code == 1 and f"Determined {RELEASE_OF[tag]} has no initialUserPassword" in refused.out + refused.err


def test_a_chart_of_another_release_is_named_by_the_keys_its_master_would_refuse(run_cli, helm, tmp_path):
    # appVersion 0.38.1 into the official 0.17.15 chart: that chart writes resource_manager.namespace, which the 0.38.1
    # master refuses at start (unknown field; it reads default_namespace). det-k8s said nothing.
    result = run_cli("render", "-f", settings(tmp_path, "0.17.15"), "--set-string", "appVersion=0.38.1",
                     "--set", "defaultPassword=null", "--set", "initialUserPassword=Abcdefg1",
                     "--chart", CHARTS / "0.17.15", "--output-dir", tmp_path / "out", "--helm-binary", helm)
    assert result.code == 0, result.err
    (line,) = [ln for ln in result.err.splitlines() if "does not parse" in ln]
    assert line.startswith(f"warning: appVersion: --chart {CHARTS / '0.17.15'} writes resource_manager.namespace into "
                           "the master configuration, which Determined 0.38.1 does not parse")
    same = run_cli("render", "-f", settings(tmp_path, "0.17.15"), "--chart", CHARTS / "0.17.15",
                   "--output-dir", tmp_path / "o2", "--helm-binary", helm)
    assert same.code == 0 and "does not parse" not in same.err, same.err
