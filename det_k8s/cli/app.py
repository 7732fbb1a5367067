"""The Typer application: one module per command group, assembled here."""

from __future__ import annotations

from typing import Annotated

import typer

from .. import __version__
from . import chart_cmds, checkpoint, doctor, experiment, nodes, plan_cmd, pods, release, scheduler_cmd, status
from .options import ContextOpt, DebugOpt, GlobalOptions, KubeconfigOpt, NamespaceOpt, VerboseOpt, set_current

HELP = """det-k8s: run the Determined deep-learning platform on Kubernetes, safely.

Render and validate the Determined chart, install and upgrade it with helm, and schedule
distributed experiments all-or-nothing so they never deadlock the cluster."""


def _version(value: bool) -> None:
    if value:
        print(f"det-k8s {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="det-k8s",
        help=HELP,
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    @app.callback()
    def root(
        namespace: NamespaceOpt = None,
        kube_context: ContextOpt = None,
        kubeconfig: KubeconfigOpt = None,
        verbose: VerboseOpt = 0,
        debug: DebugOpt = False,
        version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                              help="Print the det-k8s version and exit.")] = False,
    ) -> None:
        set_current(GlobalOptions(namespace, kube_context, kubeconfig, verbose, debug))

    app.command("render", rich_help_panel="Chart")(chart_cmds.render)
    app.command("validate", rich_help_panel="Chart")(chart_cmds.validate)
    app.command("install", rich_help_panel="Release")(release.install)
    app.command("upgrade", rich_help_panel="Release")(release.upgrade)
    app.command("uninstall", rich_help_panel="Release")(release.uninstall)
    app.command("list", rich_help_panel="Release")(release.list_releases)
    app.command("status", rich_help_panel="Release")(status.status)
    app.add_typer(pods.app, name="pods", rich_help_panel="Cluster")
    app.add_typer(nodes.app, name="nodes", rich_help_panel="Cluster")
    app.command("plan", rich_help_panel="Scheduling")(plan_cmd.plan)
    app.add_typer(experiment.app, name="experiment", rich_help_panel="Scheduling")
    app.add_typer(scheduler_cmd.app, name="scheduler", rich_help_panel="Scheduling")
    app.command("doctor", rich_help_panel="Scheduling")(doctor.doctor)

    checkpoint_app = typer.Typer(name="checkpoint", help=checkpoint.HELP, no_args_is_help=True)
    checkpoint_app.command("check")(checkpoint.check)
    app.add_typer(checkpoint_app, rich_help_panel="Storage")
    return app
