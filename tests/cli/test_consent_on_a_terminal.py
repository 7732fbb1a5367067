"""On a terminal, destructive commands ask; "n" changes nothing, "y" goes on. Run in a real pseudo-terminal."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import pytest

from tests.cli.test_uninstall_list import installed


def run_in_pty(args: list[str], answer: str, env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    """Run det-k8s with a pty as stdin/stdout/stderr; type `answer` when it asks. Returns (exit code, screen)."""
    controller, terminal = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "det_k8s", *args], stdin=terminal, stdout=terminal, stderr=terminal,
                            env=env, close_fds=True)
    os.close(terminal)
    screen, answered, deadline = "", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(controller, 4096).decode(errors="replace")
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                screen += chunk
            if not answered and "[y/N]" in screen:
                os.write(controller, answer.encode() + b"\r")
                answered = True
            if proc.poll() is not None and not ready:
                break
        return proc.wait(timeout=10), screen
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(controller)


@pytest.mark.parametrize("answer,code", [("n", 1), ("y", 0)])
def test_uninstall_asks_on_a_terminal(cluster, fake_helm, answer, code):
    installed(cluster)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "TERM": "dumb", "NO_COLOR": "1"}
    exit_code, screen = run_in_pty(["uninstall", "demo"], answer, env)
    assert "Uninstall demo?" in screen and "[y/N]" in screen
    assert exit_code == code, screen
    uninstalls = [c for c in fake_helm.calls if c[0] == "uninstall"]
    assert len(uninstalls) == (1 if answer == "y" else 0)
    assert (cluster.api.count("DELETE") > 0) == (answer == "y")
