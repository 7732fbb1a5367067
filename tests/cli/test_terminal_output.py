"""On a real terminal (a pseudo-terminal): NO_COLOR and TERM=dumb turn every style off, bold included; one
header style whether or not stdout is a terminal; `| head` (a closed pipe) exits 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.cli.test_consent_on_a_terminal import run_in_pty
from tests.conftest import example

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PLAN = ["plan", str(example("experiments") / "distributed-12gpu-a.yaml"), str(example("experiments") /
        "distributed-12gpu-b.yaml"), "--snapshot", str(example("snapshots") / "twelve-gpus.yaml"), "-f",
        str(example("gpu-cluster.yaml"))]


@pytest.fixture
def bad_settings(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("maxSlotsPerPod: 4\nslotTyp: gpu\n")
    return path


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "FORCE_COLOR")}
    return {**base, "TERM": "xterm-256color", "COLUMNS": "200", **extra}


def test_a_terminal_gets_styles_so_the_checks_below_can_fail(bad_settings):
    _, screen = run_in_pty(["validate", "-f", str(bad_settings)], "", env())
    assert ANSI.search(screen), screen
    _, table = run_in_pty(PLAN, "", env())
    assert "\x1b[1m" in table  # bold headers


@pytest.mark.parametrize("variables", [{"NO_COLOR": "1"}, {"TERM": "dumb"}], ids=["NO_COLOR", "TERM=dumb"])
def test_no_color_and_dumb_terminals_get_no_style_at_all(bad_settings, variables):
    code, screen = run_in_pty(["validate", "-f", str(bad_settings)], "", env(**variables))
    assert code == 1 and "error: slotTyp: unknown key" in screen
    assert not ANSI.search(screen) and "\x1b" not in screen, screen
    _, table = run_in_pty(PLAN, "", env(**variables))
    assert "\x1b" not in table and "EXPERIMENT" in table, table


def test_table_headers_are_upper_case_on_a_terminal_and_in_a_pipe():
    _, screen = run_in_pty(PLAN, "", env())
    piped = subprocess.run([sys.executable, "-m", "det_k8s", *PLAN], capture_output=True, text=True, timeout=60)
    for text in (ANSI.sub("", screen), piped.stdout):
        assert "EXPERIMENT" in text and "NODE" in text and "experiment " not in text.split("\n", 2)[1]


def test_a_reader_that_leaves_early_is_not_an_error(tmp_path):
    """`det-k8s ... | head -1`: stdout closes before det-k8s writes; the exit code is 0 and nothing is printed."""
    proc = subprocess.Popen([sys.executable, "-m", "det_k8s", "validate", "-f", str(example("gpu-cluster.yaml")), "-o",
                             "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before det-k8s has started writing
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err and "error" not in err


def test_head_on_a_long_listing_exits_0(tmp_path):
    """Output larger than the pipe buffer, the reader taking one line: still 0 (the code means 0)."""
    head = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    snapshot = example("snapshots") / "twelve-gpus.yaml"
    experiments = [str(example("experiments") / "small-4gpu.yaml")] * 400
    proc = subprocess.Popen([sys.executable, "-m", "det_k8s", "plan", *experiments, "--snapshot", str(snapshot), "-f",
                             str(example("gpu-cluster.yaml"))], stdout=head.stdin, stderr=subprocess.PIPE)
    assert head.stdin is not None
    head.stdin.close()
    _, err = proc.communicate(timeout=120)
    head.wait(timeout=10)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err


def test_plain_columns_line_up_by_display_width_with_wide_characters(capsys):
    """`experiment list` of an experiment named in Japanese: the next column starts where it does for the others."""
    from rich.cells import cell_len

    from det_k8s.cli import output

    output.table(["id", "name", "user"], [["8db91959", "日本語の実験名-small-4gpu", "root"],
                                          ["3f00aa12", "small-4gpu", "alice"],
                                          ["77aa0b1c", "cafe\u0301", "bob"]])
    lines = capsys.readouterr().out.splitlines()
    starts = {cell_len(line[:line.index(user)]) for line, user in zip(lines, ["USER", "root", "alice", "bob"], strict=True)}
    assert len(starts) == 1, lines
