"""Usage errors in det-k8s's own words: one `error:` line naming the argument or option, a hint, exit 2.

The option parser (Click, inside Typer) has its own voice: a `Usage:` block, then `Error: No such option: --wait`,
or the validation library's `Input should be a valid integer, unable to parse string as an integer`. `main`
(`cli/__init__.py:run_guarded`) hands each of its exceptions to `usage_error`, which says the same thing as every other
det-k8s error does, and, for a helm or kubectl habit det-k8s does not take (`HABITS`), what to do instead.

Imported only when a command line is wrong: nothing here costs a correct command anything.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import UsageError

# helm's and kubectl's flags and commands that det-k8s does not take, where a user would type them: (command path
# after `det-k8s`, the option or command typed) -> the hint. The message names the option and the command; the hint
# says what det-k8s does instead, in one line.
_REUSE = ("det-k8s upgrades to exactly the settings you pass (helm's --reset-values): pass them again with -f; "
          "`det-k8s get values RELEASE` prints the ones installed")
_FORCE = "det-k8s never deletes and recreates the release's objects; run `helm {verb} --force` yourself if you must"
_HISTORY = "det-k8s keeps helm's default history (10 revisions); `helm {verb} --history-max N` sets another"
_HOOKS = "the chart's hooks are part of the release and det-k8s runs them; `helm {verb} --no-hooks` skips them"
_CLEANUP = ("--rollback-on-failure (helm 3: --atomic) undoes a failed change; `det-k8s status RELEASE` names what a "
            "failed one left")
_JOBS = "det-k8s waits for the master and the database itself (the chart runs no Jobs to wait for)"
_SET_OTHER = "det-k8s takes -f FILE, --set and --set-string; put the value in a -f file"
HABITS: dict[tuple[str, str], str] = {
    **{(command, flag): _SET_OTHER for command in ("install", "upgrade", "render", "validate", "diff")
       for flag in ("--set-file", "--set-json", "--set-literal")},
    ("upgrade", "--install"): "det-k8s upgrade changes an installed release only; `det-k8s install RELEASE` installs "
                              "one (`det-k8s list -A` shows them)",
    ("upgrade", "-i"): "det-k8s upgrade changes an installed release only; `det-k8s install RELEASE` installs one "
                       "(`det-k8s list -A` shows them)",
    ("upgrade", "--reuse-values"): _REUSE,
    ("upgrade", "--reset-then-reuse-values"): _REUSE,
    ("upgrade", "--create-namespace"): "an upgrade changes a release in the namespace it is in (-n NAME); "
                                       "`det-k8s install --create-namespace` creates one",
    ("upgrade", "--force"): _FORCE.format(verb="upgrade"),
    ("upgrade", "--force-replace"): _FORCE.format(verb="upgrade"),
    ("upgrade", "--cleanup-on-fail"): _CLEANUP,
    ("upgrade", "--history-max"): _HISTORY.format(verb="upgrade"),
    ("upgrade", "--no-hooks"): _HOOKS.format(verb="upgrade"),
    ("upgrade", "--wait-for-jobs"): _JOBS,
    ("install", "--wait-for-jobs"): _JOBS,
    ("install", "--no-hooks"): _HOOKS.format(verb="install"),
    ("install", "--generate-name"): "name the release: det-k8s install RELEASE (e.g. determined)",
    ("install", "-g"): "name the release: det-k8s install RELEASE (e.g. determined)",
    ("install", "--replace"): "`det-k8s status RELEASE` says how to recover a release left uninstalled with its "
                              "history; then install again",
    ("rollback", "--cleanup-on-fail"): _CLEANUP.replace("--rollback-on-failure (helm 3: --atomic) undoes a failed "
                                                        "change; ", ""),
    ("rollback", "--force"): _FORCE.format(verb="rollback"),
    ("rollback", "--force-replace"): _FORCE.format(verb="rollback"),
    ("rollback", "--recreate-pods"): "the master restarts on a rollback anyway; `kubectl rollout restart` restarts "
                                     "a Deployment",
    ("rollback", "--history-max"): _HISTORY.format(verb="rollback"),
    ("rollback", "--no-hooks"): _HOOKS.format(verb="rollback"),
    ("rollback", "--wait-for-jobs"): _JOBS,
    ("uninstall", "--cascade"): "det-k8s uninstalls with helm's default (background); `helm uninstall --cascade` "
                                "chooses another",
    ("uninstall", "--no-hooks"): _HOOKS.format(verb="uninstall"),
    ("uninstall", "--description"): "`helm uninstall --keep-history --description TEXT` records one",
    ("upgrade", "--description"): "det-k8s leaves helm's own description (`det-k8s history RELEASE` shows it)",
    ("install", "--description"): "det-k8s leaves helm's own description (`det-k8s history RELEASE` shows it)",
}
# Commands typed as kubectl or the Determined CLI would: (group, command) -> the hint.
COMMAND_HABITS: dict[tuple[str, str], str] = {
    **{("experiment", name): "`det-k8s experiment kill ID` stops an experiment for good and removes its pods "
                             "(`det-k8s experiment list` shows the IDs)" for name in ("delete", "rm", "remove", "cancel")},
    **{("experiment", name): "det-k8s experiment takes create, list, describe, kill, pause and resume"
       for name in ("get", "ls", "show")},
}
_VALUE_WORDS = {
    "int_parsing": "not a whole number",
    "int_from_float": "not a whole number",
    "int_type": "not a whole number",
    "float_parsing": "not a number",
    "float_type": "not a number",
    "bool_parsing": "not true or false",
}
# helm 4's flags that take a value, where det-k8s's take none
_FLAG_VALUES = {
    "--wait": "write --wait alone: det-k8s waits for the master and database itself (what helm's watcher does)",
    "--dry-run": "write --dry-run alone: install and upgrade render with no cluster (helm's client), rollback and "
                 "uninstall read the cluster and change nothing",
}
_CLUSTER_OPTIONS = frozenset({"--kube-context", "--context", "--kubeconfig"})
_LIMIT_WORDS = {"greater_than_equal": "at least {ge}", "greater_than": "more than {gt}",
                "less_than_equal": "at most {le}", "less_than": "less than {lt}"}


def _command_path(ctx: Any) -> str:
    path = str(getattr(ctx, "command_path", "") or "det-k8s")
    return path if path.startswith("det-k8s") else f"det-k8s {path}".strip()


def _after_prog(path: str) -> str:
    return path.split(" ", 1)[1] if " " in path else ""


def _name(param: Any) -> str:
    """An argument by its metavar (`REVISION`), an option by its longest spelling (`--max`)."""
    if param is None:
        return "a value"
    if getattr(param, "param_type_name", "") == "argument":
        return str(param.metavar or param.name or "").strip("[].").upper() or "an argument"
    opts = sorted(getattr(param, "opts", ()) or (), key=len, reverse=True)
    return opts[0] if opts else str(param.name)


def _value_problem(exc: Any) -> tuple[Any, str] | None:
    """The value typed and what is wrong with it, from the validation error behind a BadParameter."""
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if not callable(errors):
        return None
    try:
        first = errors()[0]
    except (IndexError, TypeError, ValueError):
        return None
    kind, limits = str(first.get("type") or ""), first.get("ctx") or {}
    if kind in _VALUE_WORDS:
        return first.get("input"), _VALUE_WORDS[kind]
    if kind in _LIMIT_WORDS:
        try:
            return first.get("input"), "must be " + _LIMIT_WORDS[kind].format(**limits)
        except KeyError:
            return None
    return None


def usage_error(exc: Any) -> UsageError:
    """Click's exception `exc` as det-k8s's one `error:` line (exit 2)."""
    from typer._click import exceptions as click

    ctx = getattr(exc, "ctx", None)
    path = _command_path(ctx)
    command = _after_prog(path)
    lists = f"`{path} -h` lists them"
    if isinstance(exc, click.NoSuchOption):
        option = exc.option_name
        habit = HABITS.get((command, option))
        if habit is not None:
            return UsageError(f"{path} takes no {option} (a helm flag)", hint=habit)
        taken = {opt for param in getattr(getattr(ctx, "command", None), "params", ()) for opt in param.opts}
        if option in _CLUSTER_OPTIONS and "--kube-context" not in taken:
            return UsageError(f"{path} contacts no cluster: it takes no {option}",
                              hint=f"`{path} -h` lists the options")
        if option in ("-n", "--namespace") and "--kube-context" in taken:
            return UsageError(f"{path} reads objects of no namespace: it takes no {option}",
                              hint=f"`{path} -h` lists the options")
        possible = sorted(exc.possibilities or ())
        hint = (f"did you mean {' or '.join(possible)}? " if possible else "") + f"`{path} -h` lists the options"
        return UsageError(f"{path}: unknown option {option}", hint=hint)
    if isinstance(exc, click.MissingParameter):
        usage = ctx.get_usage().replace("Usage: ", "usage: ", 1) if ctx is not None else ""
        what = _name(exc.param)
        kind = "option" if getattr(exc.param, "param_type_name", "") == "option" else "argument"
        return UsageError(f"{path}: missing {kind} {what}", hint=" ".join(usage.split()) or lists)
    if isinstance(exc, click.BadParameter):
        found = _value_problem(exc)
        what = _name(exc.param)
        if found is not None:
            value, problem = found
            return UsageError(f"{what} {value!r}: {problem}", hint=f"`{path} -h` says what it takes")
        message = str(exc.message).rstrip(".")
        return UsageError(f"{what}: {message[:1].lower() + message[1:]}", hint=f"`{path} -h` says what it takes")
    message = str(exc.format_message() if hasattr(exc, "format_message") else exc)
    unknown = re.match(r"No such command '(.*)'\.(?: Did you mean '(.*)'\?)?$", message, re.DOTALL)
    if unknown:
        name, close = unknown.group(1), unknown.group(2)
        habit = COMMAND_HABITS.get((command, name))
        if habit is not None:
            return UsageError(f"{path} has no command {name!r}", hint=habit)
        return UsageError(f"{path}: unknown command {name!r}",
                          hint=(f"did you mean {close!r}? " if close else "") + f"`{path} -h` lists the commands")
    extra = re.match(r"Got unexpected extra argument(?:\(s\)|s)? \((.*)\)$", message, re.DOTALL)
    if extra:
        usage = ctx.get_usage().replace("Usage: ", "usage: ", 1) if ctx is not None else ""
        return UsageError(f"{path}: unexpected argument(s) {extra.group(1)}", hint=" ".join(usage.split()) or lists)
    option_needs = re.match(r"Option '(.*)' requires an argument\.$", message)
    if option_needs:  # (raised with no context: the command is not known here)
        return UsageError(f"{option_needs.group(1)} needs a value", hint=f"`{path} -h` says what it takes"
                          if ctx is not None else "-h after the command says what it takes")
    no_value = re.match(r"Option '(.*)' does not take a value\.$", message)
    if no_value:  # helm 4's --wait=watcher, --dry-run=client (raised with no context either)
        option = no_value.group(1)
        hint = _FLAG_VALUES.get(option, f"write {option} alone")
        return UsageError(f"{option} takes no value in det-k8s", hint=hint)
    message = message.rstrip(".")
    return UsageError(f"{path}: {message[:1].lower() + message[1:]}", hint=f"`{path} -h` for help")
