"""The one subprocess helper, with real child processes: exit codes, stderr, timeouts, environment."""

from __future__ import annotations

import sys

import pytest

from det_k8s.errors import OperationTimeout, ToolFailed, ToolNotFound, UsageError
from det_k8s.tools.duration import format_duration, parse_duration
from det_k8s.tools.process import child_env, run, trim_stderr


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_output_is_captured():
    result = run(py("print('hi')"), timeout=30, tool="python")
    assert (result.returncode, result.stdout) == (0, "hi\n")


def test_a_failure_keeps_the_tools_error_line():
    code = "import sys; sys.stderr.write('walking\\nError: INSTALLATION FAILED: cannot re-use a name\\n'); sys.exit(1)"
    with pytest.raises(ToolFailed) as info:
        run([*py(code), "install", "demo"], timeout=30, tool="helm")
    assert "failed (exit 1): Error: INSTALLATION FAILED: cannot re-use a name" in str(info.value)
    assert info.value.returncode == 1 and "walking" in info.value.stderr


def test_check_false_returns_the_failure():
    assert run(py("raise SystemExit(3)"), timeout=30, tool="x", check=False).returncode == 3


def test_a_hang_is_a_timeout():
    with pytest.raises(OperationTimeout, match="did not finish within 0.5s"):
        run(py("import time; time.sleep(30)"), timeout=0.5, tool="helm")


def test_a_missing_binary_is_tool_not_found(tmp_path):
    with pytest.raises(ToolNotFound, match="helm not found at"):
        run([str(tmp_path / "helm"), "version"], timeout=5, tool="helm")


def test_secrets_are_scrubbed_from_stderr():
    assert trim_stderr("Error: bad password hunter2", ["hunter2"]) == "Error: bad password <redacted>"


def test_child_env_is_an_allow_list():
    env = child_env({"PATH": "/bin", "HOME": "/h", "KUBECONFIG": "/k", "HELM_DRIVER": "secret", "AWS_PROFILE": "p",
                     "DET_K8S_HELM": "/x", "DB_PASSWORD": "s3cret", "GITHUB_TOKEN": "t"})
    assert env == {"PATH": "/bin", "HOME": "/h", "KUBECONFIG": "/k", "HELM_DRIVER": "secret", "AWS_PROFILE": "p"}


def test_the_child_gets_only_the_allowed_environment(monkeypatch):
    monkeypatch.setenv("DET_TEST_SECRET", "leak")
    result = run(py("import os; print('DET_TEST_SECRET' in os.environ)"), timeout=30, tool="python")
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("text,seconds", [("10m", 600), ("90s", 90), ("1h30m", 5400), ("5m0s", 300), ("1.5s", 1.5),
                                          ("500ms", 0.5)])
def test_go_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["ten minutes", "", "10x", "0s", "0", "-5", "10 m"])
def test_bad_durations_name_the_flag(text):
    with pytest.raises(UsageError, match="--timeout"):
        parse_duration(text)


@pytest.mark.parametrize(("text", "seconds"), [("10", 10.0), ("1.5", 1.5), (" 600 ", 600.0)])
def test_a_bare_number_is_seconds_everywhere(text, seconds):
    assert parse_duration(text) == seconds


def test_helm_gets_a_unit_even_for_a_bare_number():
    from det_k8s.tools.duration import go_duration

    assert [go_duration(t) for t in ("600", "1.5", "10m", "1h30m")] == ["600s", "1.5s", "10m", "1h30m"]


def test_format_duration():
    assert [format_duration(s) for s in (600, 90, 5400, 5)] == ["10m0s", "1m30s", "1h30m0s", "5s"]
