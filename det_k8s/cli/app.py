"""The Typer application: one module per command group, assembled here.

Every command module is listed in `COMMANDS` and imported only when the app is built with it:
`det-k8s render ...` builds an app holding just the root options and `render` (see
`command_name`), so a command never pays for importing the other commands' modules. Help,
usage errors and completion need every command and build the whole app.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from .. import __version__
from .options import ContextOpt, DebugOpt, GlobalOptions, KubeconfigOpt, NamespaceOpt, VerboseOpt, set_current

HELP = """det-k8s: run the Determined deep-learning platform on Kubernetes, safely.

Render and validate the Determined chart, install and upgrade it with helm, and schedule
distributed experiments all-or-nothing so they never deadlock the cluster."""

# name -> (module in det_k8s.cli, attribute, help panel); the attribute is a command function, or a
# Typer sub-app when it is called `app`. In this order in `det-k8s --help`.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "render": ("chart_cmds", "render", "Chart"),
    "validate": ("chart_cmds", "validate", "Chart"),
    "install": ("release", "install", "Release"),
    "upgrade": ("release", "upgrade", "Release"),
    "uninstall": ("release", "uninstall", "Release"),
    "list": ("release", "list_releases", "Release"),
    "status": ("status", "status", "Release"),
    "diff": ("release_ops", "diff", "Release"),
    "get": ("release_get", "app", "Release"),
    "history": ("release_ops", "history", "Release"),
    "rollback": ("release_ops", "rollback", "Release"),
    "pods": ("pods", "app", "Cluster"),
    "nodes": ("nodes", "app", "Cluster"),
    "plan": ("plan_cmd", "plan", "Scheduling"),
    "experiment": ("experiment", "app", "Scheduling"),
    "scheduler": ("scheduler_cmd", "app", "Scheduling"),
    "doctor": ("doctor", "doctor", "Scheduling"),
    "checkpoint": ("checkpoint", "check", "Storage"),
}
# Root options that take a value, and those that do not (as `root` below declares them).
_VALUED = frozenset({"-n", "--namespace", "--kube-context", "--context", "--kubeconfig"})
_FLAGS = frozenset({"-v", "--verbose", "--debug"})
COMPLETION_VARIABLE = "_DET_K8S_COMPLETE"  # set by the shell completion scripts Typer installs


def _version(value: bool) -> None:
    if value:
        print(f"det-k8s {__version__}")
        raise typer.Exit()


def command_name(args: Sequence[str]) -> str | None:
    """The command `args` run, when that is certain; None means: build the whole app.

    Only the root options spelled exactly as declared are skipped (`-n ml`, `--namespace=ml`,
    `-vv`); anything else before the command (`--help`, `-nml`, an unknown option), an unknown
    command, or shell completion gives None, so the answer is never a guess.
    """
    if os.environ.get(COMPLETION_VARIABLE):
        return None
    position = 0
    while position < len(args):
        arg = args[position]
        if arg in _VALUED:
            position += 2
        elif arg in _FLAGS or (arg.startswith("--") and arg.partition("=")[0] in _VALUED and "=" in arg) or (
                len(arg) > 1 and arg.strip("v") == "-"):
            position += 1
        elif arg.startswith("-"):
            return None
        else:
            return arg if arg in COMMANDS else None
    return None


def _add(app: typer.Typer, name: str) -> None:
    module_name, attribute, panel = COMMANDS[name]
    module = importlib.import_module(f"{__package__}.{module_name}")
    if name == "checkpoint":
        checkpoint_app = typer.Typer(name="checkpoint", help=module.HELP, no_args_is_help=True)
        checkpoint_app.command("check")(module.check)
        app.add_typer(checkpoint_app, rich_help_panel=panel)
    elif attribute == "app":
        app.add_typer(getattr(module, attribute), name=name, rich_help_panel=panel)
    else:
        app.command(name, rich_help_panel=panel)(getattr(module, attribute))


def plain_metavars(command: Any) -> Any:
    """Arguments shown as helm shows them: `RELEASE`, `[REVISION]`, `NODE...` in usage lines and help, without
    Typer's Python type (`RELEASE <str>`, `EXPERIMENT <list[Path]>`) or Click's braces (`{RELEASE}`); a command's
    first help paragraph listed whole in its group's help."""
    from typer.core import TyperArgument

    class PlainArgument(TyperArgument):
        def display_type_rich(self, ctx: Any) -> str | None:
            return None  # the metavar says what it is

        def _usage_display_name(self) -> str:
            name = self.display_name_raw
            if self.nargs != 1 and not name.endswith("..."):
                name += "..."
            return name if self.required or name.startswith("[") else f"[{name}]"

    for param in getattr(command, "params", ()):
        if type(param) is TyperArgument:
            param.__class__ = PlainArgument
    for sub in (getattr(command, "commands", None) or {}).values():
        if not sub.short_help and sub.help:  # listed whole, wrapped, never cut at 45 characters with `...`
            sub.short_help = " ".join(sub.help.strip().split("\n\n", 1)[0].split())
        plain_metavars(sub)
    return command


def build_app(only: str | None = None) -> typer.Typer:
    """The det-k8s app with every command, or with only the command `only` (see `command_name`)."""
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

    for name in COMMANDS if only is None else (only,):
        _add(app, name)
    return app
