"""A wrong command line is one `error:` line in det-k8s's words, exit 2: never Click's `Usage:` block and `Error:`,
never the validation library's words; a helm or kubectl habit det-k8s does not take gets a pointer to what it does
instead. No cluster and no helm: these are refused before anything runs."""

from __future__ import annotations

import pytest


def one_error_line(result) -> str:
    assert result.code == 2, result.err
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    assert "Usage:" not in result.err and "Error:" not in result.err and "Input should" not in result.err
    return lines[0]


@pytest.mark.parametrize(("args", "expected"), [
    (["rollback", "demo", "abc"], "error: REVISION 'abc': not a whole number; `det-k8s rollback -h` says what it takes"),
    (["history", "demo", "--max", "0"], "error: --max '0': must be at least 1; `det-k8s history -h` says what it takes"),
    (["rollback"], "error: det-k8s rollback: missing argument RELEASE; usage: det-k8s rollback [OPTIONS] RELEASE "
                   "[REVISION]"),
    (["history", "demo", "extra"], "error: det-k8s history: unexpected argument(s) extra; usage: det-k8s history "
                                   "[OPTIONS] RELEASE"),
    (["upgrade", "demo", "--tim", "5m"], "error: det-k8s upgrade: unknown option --tim; did you mean --atomic or "
                                         "--set or --timeout? `det-k8s upgrade -h` lists the options"),
    (["nodes", "frob"], "error: det-k8s nodes: unknown command 'frob'; `det-k8s nodes -h` lists the commands"),
    (["history", "demo", "--max"], "error: --max needs a value; -h after the command says what it takes"),
    (["upgrade", "demo", "--wait=watcher"], "error: --wait takes no value in det-k8s; write --wait alone: det-k8s "
                                            "waits for the master and database itself (what helm's watcher does)"),
    (["install", "demo", "--dry-run=client"], "error: --dry-run takes no value in det-k8s; write --dry-run alone: "
                                              "install and upgrade render with no cluster (helm's client), rollback "
                                              "and uninstall read the cluster and change nothing"),
])
def test_usage_errors_are_one_line_in_det_k8s_words(run_cli, args, expected):
    assert one_error_line(run_cli(*args)) == expected


def test_a_group_without_its_command_still_shows_its_help(run_cli):
    result = run_cli("nodes")
    assert result.code == 2 and "Commands:" in result.out + result.err


@pytest.mark.parametrize(("args", "pointer"), [
    (["upgrade", "demo", "--install"], "`det-k8s install RELEASE` installs one"),
    (["upgrade", "demo", "-i"], "`det-k8s install RELEASE` installs one"),
    (["upgrade", "demo", "--reuse-values"], "pass them again with -f; `det-k8s get values RELEASE` prints"),
    (["upgrade", "demo", "--force"], "det-k8s never deletes and recreates the release's objects"),
    (["upgrade", "demo", "--history-max", "3"], "`helm upgrade --history-max N` sets another"),
    (["rollback", "demo", "2", "--recreate-pods"], "the master restarts on a rollback anyway"),
    (["rollback", "demo", "--cleanup-on-fail"], "`det-k8s status RELEASE` names what a failed one left"),
    (["uninstall", "demo", "--cascade", "orphan"], "`helm uninstall --cascade` chooses another"),
    (["install", "demo", "--set-file", "a=b"], "det-k8s takes -f FILE, --set and --set-string"),
])
def test_helm_flags_without_the_behaviour_point_to_what_det_k8s_does(run_cli, args, pointer):
    line = one_error_line(run_cli(*args))
    assert f"det-k8s {args[0]} takes no {args[2] if args[0] != 'rollback' else args[-1]}" in line \
        or f"takes no {next(a for a in args if a.startswith('-'))} (a helm flag)" in line
    assert pointer in line


@pytest.mark.parametrize("name", ["delete", "rm", "cancel"])
def test_experiment_delete_points_to_kill(run_cli, name):
    line = one_error_line(run_cli("experiment", name, "3"))
    assert line == (f"error: det-k8s experiment has no command '{name}'; `det-k8s experiment kill ID` stops an "
                    "experiment for good and removes its pods (`det-k8s experiment list` shows the IDs)")


def test_an_offline_command_says_it_contacts_no_cluster(run_cli):
    line = one_error_line(run_cli("plan", "--kubeconfig", "x"))
    assert line == "error: det-k8s plan contacts no cluster: it takes no --kubeconfig; `det-k8s plan -h` lists the options"
