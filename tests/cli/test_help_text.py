"""Every command's --help reads as a helm user expects: no Python type names in metavars or usage lines, and the
offline commands list no cluster options."""

from __future__ import annotations

import re

import pytest

from det_k8s.cli.app import COMMANDS, build_app

PYTHON_TYPES = re.compile(r"<(?:str|int|float|bool|path|Path|list|dict|int range|float range|[a-z]+\[.*?\])>|"
                          r"\blist\[|\bdict\[|\bNoneType\b|\bOptional\[|<class ")


def every_command() -> list[list[str]]:
    """Every command path: `render`, `pods list`, `get values`, ..."""
    from typer import main as typer_main

    root = typer_main.get_command(build_app())
    paths: list[list[str]] = []

    def walk(command, prefix: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if prefix:
            paths.append(prefix)
        for name, sub in (subcommands or {}).items():
            walk(sub, [*prefix, name])

    walk(root, [])
    return paths


COMMAND_PATHS = every_command()


def test_every_listed_command_is_walked():
    assert {p[0] for p in COMMAND_PATHS} == set(COMMANDS)
    assert ["get", "values"] in COMMAND_PATHS and ["experiment", "create"] in COMMAND_PATHS


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=[" ".join(p) for p in COMMAND_PATHS])
def test_help_shows_no_python_types(run_cli, path):
    result = run_cli(*path, "--help")
    assert result.code == 0, result.err
    found = PYTHON_TYPES.findall(result.out)
    assert not found, f"{' '.join(path)} --help shows {found}:\n{result.out}"
    usage = result.out.splitlines()[0]
    assert "{" not in usage, usage  # Click's {ARG} for a required argument is not how helm writes usage


@pytest.mark.parametrize("path", [["render"], ["plan"], ["checkpoint", "check"], ["scheduler", "manifest"]])
def test_offline_commands_have_no_cluster_options(run_cli, path):
    # checkpoint check talks to the storage only, scheduler manifest prints manifests: both offered --kube-context,
    # --kubeconfig (and checkpoint check -n) that did nothing
    text = run_cli(*path, "--help").out
    for option in ("--kube-context", "--kubeconfig"):
        assert option not in text, f"{path} lists {option}"
    # plan takes -n: the queue it plans for, whose groups alone it may preempt (as the live scheduler); scheduler
    # manifest: the namespace its objects go to. No cluster.
    assert ("--namespace" in text) == (path in (["plan"], ["scheduler", "manifest"]))
    assert "--verbose" in text and "--debug" in text


def test_validate_keeps_only_the_cluster_options_it_uses(run_cli):
    text = run_cli("validate", "--help").out
    assert "--kube-context" in text and "--kubeconfig" in text
    assert "-n, --namespace NAME            With --kube-context or --kubeconfig: the" in text  # the dry run's


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=[" ".join(p) for p in COMMAND_PATHS])
def test_every_duration_option_says_the_one_syntax(run_cli, path):
    """One duration syntax everywhere: Go durations, and a bare number is seconds (tools/duration.py)."""
    from typer import main as typer_main

    from det_k8s.cli.app import build_app

    command = typer_main.get_command(build_app(only=path[0]))
    for name in path:
        command = command.commands[name] if hasattr(command, "commands") else command
    for param in command.params:
        if getattr(param, "metavar", None) == "DURATION":
            assert "bare number" in (param.help or "") and "seconds" in (param.help or ""), (path, param.name)
        assert getattr(param, "metavar", None) != "SECONDS", (path, param.name)  # a duration, not a number


def test_a_duration_option_reads_go_durations_and_seconds_alike(run_cli, cluster):
    from det_k8s.live.policy import read_policy

    assert run_cli("scheduler", "policy", "--reserve-after", "15m").code == 0
    assert read_policy(cluster.connect(), "default").reserve_after == 900
    assert run_cli("scheduler", "policy", "--reserve-after", "600").code == 0
    assert read_policy(cluster.connect(), "default").reserve_after == 600
    assert run_cli("scheduler", "policy", "--reserve-after", "8d").code == 2
