"""The Typer application: one module per command group, loaded only when its command runs.

Every command module is listed in `COMMANDS`; the root group (`LazyGroup`, as pip, pre-commit and
Click's documentation load theirs) knows the names without importing any of them and imports a
command's module the first time Click asks for that command: `det-k8s render ...` imports
`commands.chart` and nothing of the other commands, `det-k8s --version` imports none. Help listing
every command and shell completion ask for each, and so import each.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from .. import __version__
from .options import ContextOpt, DebugOpt, GlobalOptions, KubeconfigOpt, NamespaceOpt, VerboseOpt, set_current

HELP = """det-k8s: run the Determined deep-learning platform on Kubernetes, safely.

Render and validate the Determined chart, install and upgrade it with helm, and schedule
distributed experiments all-or-nothing so they never deadlock the cluster."""

# name -> (module in det_k8s.cli, attribute, help panel); the attribute is a command function, or a
# Typer sub-app when it is called `app`. In this order in `det-k8s --help`.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "render": ("commands.chart", "render", "Chart"),
    "validate": ("commands.chart", "validate", "Chart"),
    "install": ("commands.release", "install", "Release"),
    "upgrade": ("commands.release", "upgrade", "Release"),
    "uninstall": ("commands.release", "uninstall", "Release"),
    "list": ("commands.release", "list_releases", "Release"),
    "status": ("commands.status", "status", "Release"),
    "diff": ("commands.revisions", "diff", "Release"),
    "get": ("commands.get", "app", "Release"),
    "history": ("commands.revisions", "history", "Release"),
    "rollback": ("commands.revisions", "rollback", "Release"),
    "pods": ("commands.pods", "app", "Cluster"),
    "nodes": ("commands.nodes", "app", "Cluster"),
    "plan": ("commands.plan", "plan", "Scheduling"),
    "experiment": ("commands.experiment", "app", "Scheduling"),
    "scheduler": ("commands.scheduler", "app", "Scheduling"),
    "queues": ("commands.queues", "queues", "Scheduling"),
    "doctor": ("commands.doctor", "doctor", "Scheduling"),
    "checkpoint": ("commands.checkpoint", "check", "Storage"),
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


def is_group(name: str) -> bool:
    """Whether the command `name` has commands of its own (a Typer sub-app)."""
    module_name, attribute, _ = COMMANDS[name]
    return attribute == "app" or name == "checkpoint"


def listed_order() -> list[str]:
    """The commands in the order Typer lists them: single commands before command groups, each as in COMMANDS."""
    return [name for name in COMMANDS if not is_group(name)] + [name for name in COMMANDS if is_group(name)]


class LazyCommands(MutableMapping[str, Any]):
    """A group's commands by name; a command listed in COMMANDS is built (its module imported) when first looked up.

    Names, `in` and `len` never import anything: Typer's "did you mean" suggestions read only the names.
    """

    def __init__(self, load: Callable[[str], Any], given: MutableMapping[str, Any]) -> None:
        self._load = load
        self._loaded: dict[str, Any] = dict(given)
        self._names = [name for name in listed_order() if name not in self._loaded] + list(self._loaded)

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            if name not in self._names:
                raise KeyError(name)
            self._loaded[name] = self._load(name)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        if name not in self._names:
            self._names.append(name)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._names.remove(name)
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def loaded(self) -> list[str]:
        """The commands built so far (what tests look at)."""
        return [name for name in self._names if name in self._loaded]


def load_command(name: str) -> Any:
    """The Click command for `name`, built from its module alone, with det-k8s's plain metavars."""
    from typer import main as typer_main

    group: Any = typer_main.get_command(build_app(only=name))  # a TyperGroup: the app has a callback
    return plain_metavars(group.commands[name], listed=True)


class LazyGroup(TyperGroup):
    """The root group: every command in COMMANDS by name, each imported only when Click asks for it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(load_command, self.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)


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


class PlainArgument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return None  # the metavar says what it is

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return name if self.required or name.startswith("[") else f"[{name}]"


_TYPER = object()  # PlainOption.plain_value: "let Typer convert this one"


class PlainOption(TyperOption):
    """An option whose value Typer's conversion would leave as it is gets it without that conversion: from Typer 0.29
    on, it builds a pydantic TypeAdapter for each parameter, importing pydantic (more than Typer itself costs), also
    for the options not given (processed first even for `det-k8s COMMAND --help`) and for plain strings. What
    differs, or fails, goes to Typer as before (its own messages)."""

    def process_value(self, ctx: Any, value: Any) -> Any:
        plain = self.plain_value(value)
        if plain is _TYPER or (self.required and self.value_is_missing(plain)):
            return super().process_value(ctx, value)
        return self.callback(ctx, self, plain) if self.callback is not None else plain

    def plain_value(self, value: Any) -> Any:
        """`value` as Typer's conversion returns it, where that is `value` itself (or a list of its strings, or what
        the option's own parser returns); _TYPER otherwise."""
        single = self.nargs == 1 and not self.multiple
        if value is None:
            return None if single else ()
        if getattr(self, "count", False):
            return value if type(value) is int and value >= 0 else _TYPER
        descriptor = getattr(self, "type_descriptor", None)  # (Typer 0.29's; without it, Typer converts)
        info = getattr(descriptor, "parameter_info", None)
        if info is None or getattr(info, "click_type", None) is not None:
            return _TYPER
        parser = getattr(info, "parser", None)
        if parser is not None:
            if not single:
                return _TYPER
            try:
                return parser(value)  # what Typer's adapter returns: the parser's result, or its error (not these)
            except (ValueError, TypeError, AssertionError):
                return _TYPER  # Typer words these
        annotation = getattr(descriptor, "annotation", None)
        if annotation is str and single and type(value) is str:
            return value
        if annotation == list[str] and self.multiple and type(value) in (list, tuple) and all(
                type(item) is str for item in value):
            return list(value)
        return _TYPER


def _plain(param: Any) -> Any:
    if type(param) is TyperArgument:
        param.__class__ = PlainArgument
    elif type(param) is TyperOption:
        param.__class__ = PlainOption
    return param


def plain_metavars(command: Any, *, listed: bool = False) -> Any:
    """Arguments shown as helm shows them: `RELEASE`, `[REVISION]`, `NODE...` in usage lines and help, without
    Typer's Python type (`RELEASE <str>`, `EXPERIMENT <list[Path]>`) or Click's braces (`{RELEASE}`); a command's
    first help paragraph listed whole in its group's help (`listed`: `command` is one of a group's). A lazy group's
    commands get the same when they are loaded (`load_command`)."""
    for param in getattr(command, "params", ()):
        _plain(param)
    if hasattr(command, "get_help_option") and not hasattr(command.get_help_option, "plain"):
        made = command.get_help_option  # -h/--help is made when asked for: a PlainOption too (its None is not given)

        def get_help_option(ctx: Any) -> Any:
            return _plain(made(ctx))

        get_help_option.plain = True  # type: ignore[attr-defined]
        command.get_help_option = get_help_option
    if listed and not command.short_help and command.help:  # listed whole, wrapped, never cut at 45 characters
        command.short_help = " ".join(command.help.strip().split("\n\n", 1)[0].split())
    commands = getattr(command, "commands", None) or {}
    if not isinstance(commands, LazyCommands):  # (a lazy group's are done as each is loaded)
        for sub in commands.values():
            plain_metavars(sub, listed=True)
    return command


def build_app(only: str | None = None) -> typer.Typer:
    """The det-k8s app: every command, each loaded when asked for (`LazyGroup`), or only the command `only`, loaded
    now (what `load_command` builds a command from)."""
    app = typer.Typer(
        cls=LazyGroup if only is None else TyperGroup,
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

    if only is not None:
        _add(app, only)
    return app
