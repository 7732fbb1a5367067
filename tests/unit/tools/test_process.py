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
    assert trim_stderr("Error: bad password hunter2", ["hunter2"]) == "Error: bad password ***"


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


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie waiting for its (gone) parent is not running
        return handle.read().split(") ", 1)[1][0] != "Z"


def test_a_timeout_ends_the_tool_and_every_process_it_started(tmp_path):
    import time

    pids = tmp_path / "pids"
    # like helm running a plugin: the child starts a grandchild that would hold the GPUs' lock, then both hang
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
            f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
            "time.sleep(300)\n")
    with pytest.raises(OperationTimeout, match="did not finish within 2s; it was stopped") as info:
        run(py(code), timeout=2, tool="helm")
    assert info.value.hint and "--timeout" not in info.value.hint  # only commands with a --timeout suggest it
    grandchild = int(pids.read_text())
    for _ in range(100):  # the grandchild's exit is asynchronous to the group kill
        if not _alive(grandchild):
            break
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_the_timeout_hint_is_the_callers():
    with pytest.raises(OperationTimeout) as info:
        run(py("import time; time.sleep(30)"), timeout=0.5, tool="helm", timeout_hint="raise --timeout (now 5m)")
    assert info.value.hint == "raise --timeout (now 5m)"


def test_stderr_is_scrubbed_of_derived_forms(tmp_path):
    import base64

    secret = "PLANTED-db-pw-4411"
    encoded = base64.b64encode(secret.encode()).decode()
    script = tmp_path / "tool.py"
    script.write_text(f"import sys; sys.stderr.write('Error: Secret data db-password: {encoded}; url "
                      f"http://u:{secret}@db'); sys.exit(1)")
    with pytest.raises(ToolFailed) as info:
        run([sys.executable, str(script)], timeout=30, tool="helm", secrets=[secret])
    assert secret not in str(info.value) + info.value.stderr and encoded not in str(info.value) + info.value.stderr


def test_durations_are_bounded_with_the_bound_in_the_message():
    with pytest.raises(UsageError, match=r"--timeout '9999999999999h': at most 168h0m0s \(604800s\)"):
        parse_duration("9999999999999h")
    with pytest.raises(UsageError, match="characters is not a duration"):
        parse_duration("1s" * 1000)
    assert parse_duration("168h") == 604800
