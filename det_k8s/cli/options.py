"""Options shared by every command, spelled as helm spells them.

`-n/--namespace`, `--kube-context` (alias `--context`), `--kubeconfig`, `-v/--verbose` and
`--debug` are accepted both before the command (`det-k8s -n ml pods list`) and after it
(`det-k8s pods list -n ml`), like helm's global flags. The `command` decorator adds them to a
command's signature so each command does not repeat them; values given after the command win.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from . import output
from .output import OutputFormat

if TYPE_CHECKING:
    from ..kube.api import KubeApi
    from ..settings.podspec import KubeVersion

GLOBAL_PANEL = "Global options"


@dataclass(frozen=True)
class GlobalOptions:
    namespace: str | None = None
    kube_context: str | None = None
    kubeconfig: str | None = None
    verbose: int = 0
    debug: bool = False

    def merged(self, **overrides: Any) -> GlobalOptions:
        given = {k: v for k, v in overrides.items() if v not in (None, 0, False)}
        return replace(self, **given)

    def connect(self) -> KubeApi:
        """The cluster these options name (kubeconfig, context and namespace resolved as kubectl does), proven to be
        a Kubernetes API server that answers (GET /version): a dead or odd server is one line naming the context,
        whatever the command was about to ask it."""
        from ..errors import Forbidden
        from ..kube.api import KubeApi

        api = KubeApi.connect(self.kubeconfig, self.kube_context, self.namespace)
        with contextlib.suppress(Forbidden):  # an RBAC answer comes from a Kubernetes API server all the same
            api.server_version()
        if api.insecure:
            output.warning(f"context {api.target.context} skips TLS verification (insecure-skip-tls-verify): the "
                           f"identity of {api.target.server} is not checked")
        return api


_CURRENT: contextvars.ContextVar[GlobalOptions] = contextvars.ContextVar(
    "det_k8s_globals", default=GlobalOptions())  # noqa: B039 (a frozen dataclass)


def current() -> GlobalOptions:
    return _CURRENT.get()


def set_current(options: GlobalOptions) -> None:
    _CURRENT.set(options)


def _namespace(value: str | None) -> str | None:
    """-n is a namespace name (a whole-string DNS-1123 label) before anything uses it."""
    if value is None:
        return None
    from ..names import check_namespace

    return check_namespace(value)


NamespaceOpt = Annotated[str | None, typer.Option(
    "--namespace", "-n", rich_help_panel=GLOBAL_PANEL, metavar="NAME", callback=_namespace,
    help="Kubernetes namespace (default: HELM_NAMESPACE, then the context's namespace, then default).")]
ContextOpt = Annotated[str | None, typer.Option(
    "--kube-context", "--context", rich_help_panel=GLOBAL_PANEL, metavar="NAME",
    help="kubeconfig context to use (default: HELM_KUBECONTEXT, then the current context).")]
KubeconfigOpt = Annotated[str | None, typer.Option(
    "--kubeconfig", rich_help_panel=GLOBAL_PANEL, metavar="PATH",
    help="Path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config).")]
VerboseOpt = Annotated[int, typer.Option(
    "--verbose", "-v", count=True, rich_help_panel=GLOBAL_PANEL, show_default=False,
    help="Say more: the helm and kubectl commands run and their stderr; -vv also how long each step took.")]
OfflineVerboseOpt = Annotated[int, typer.Option(
    "--verbose", "-v", count=True, rich_help_panel=GLOBAL_PANEL, show_default=False,
    help="Say more (helm's commands and stderr, where it runs helm); -vv also how long each step took.")]
DebugOpt = Annotated[bool, typer.Option(
    "--debug", rich_help_panel=GLOBAL_PANEL, help="Show tracebacks for internal errors.")]
def output_format(value: str | OutputFormat) -> OutputFormat:
    """-o as kubectl and helm take it, with one line naming the formats for any other word (`-o wide`)."""
    if isinstance(value, OutputFormat):
        return value
    try:
        return OutputFormat(value.strip().lower())
    except ValueError:
        from ..errors import UsageError

        kubectl = value.split("=", 1)[0] in ("wide", "name", "jsonpath", "go-template", "custom-columns", "template")
        raise UsageError(f"-o {value}: not an output format of det-k8s; the formats are table, json and yaml",
                         hint="table shows every column already; for kubectl's jsonpath, pipe -o json to jq"
                         if kubectl else "e.g. -o json") from None


OutputOpt = Annotated[OutputFormat, typer.Option(
    "--output", "-o", parser=output_format, metavar="FORMAT", help="Output format: table, json or yaml.")]

KubeVersionOpt = Annotated[str | None, typer.Option(
    "--kube-version", metavar="VERSION",
    help="Kubernetes version whose schema pod specs are checked against, like helm template --kube-version "
    "(default: the cluster's when one is contacted, else the newest det-k8s knows).")]


@contextlib.contextmanager
def timed(step: str) -> Iterator[None]:
    """With -vv, one `timing:` line on stderr saying how long `step` took (also when it failed)."""
    import time

    started = time.monotonic()
    try:
        yield
    finally:
        if current().verbose >= 2:
            output.message(f"timing: {step}: {time.monotonic() - started:.2f} s")


def pod_spec_version(given: str | None) -> KubeVersion:
    """The version --kube-version names (a usage error when it names none), or the default."""
    from ..errors import UsageError
    from ..settings.podspec import DEFAULT, OPTION, KubeVersion, parse_kube_version

    if not given:
        return DEFAULT
    found = parse_kube_version(given)
    if found is None:
        raise UsageError(f"--kube-version {given!r}: not a Kubernetes version", hint="write it as 1.31 or v1.31.2")
    return KubeVersion(found, OPTION)


def cluster_pod_spec_version(api: KubeApi) -> KubeVersion | None:
    """The cluster's own version for pod spec checks; None when RBAC hides /version (the default applies)."""
    from ..errors import Forbidden
    from ..settings.podspec import cluster_version

    try:
        return cluster_version(api.server_version())
    except Forbidden:
        return None


_GLOBAL_PARAMS = (
    ("namespace", NamespaceOpt, None),
    ("kube_context", ContextOpt, None),
    ("kubeconfig", KubeconfigOpt, None),
    ("verbose", VerboseOpt, 0),
    ("debug", DebugOpt, False),
)

F = TypeVar("F", bound=Callable[..., Any])


def with_global_options(func: F) -> F:
    """Add the global options to a command's signature; their values go to `current()`."""
    return _with_options(func, tuple(name for name, _, _ in _GLOBAL_PARAMS))


def with_options(*names: str, namespace_help: str | None = None) -> Callable[[F], F]:
    """Like `with_global_options`, with only the named global options: an offline command (render, plan) takes
    no cluster options, so its help does not offer them, and its -v says nothing of cluster tools;
    `namespace_help` says what -n means to it (plan: the queue planned)."""
    unknown = set(names) - {name for name, _, _ in _GLOBAL_PARAMS}
    if unknown:
        raise ValueError(f"not global options: {sorted(unknown)}")
    overrides: dict[str, Any] = {}
    if "kube_context" not in names:
        overrides["verbose"] = OfflineVerboseOpt
    if namespace_help is not None:
        overrides["namespace"] = Annotated[str | None, typer.Option(
            "--namespace", "-n", rich_help_panel=GLOBAL_PANEL, metavar="NAME", callback=_namespace,
            help=namespace_help)]
    return lambda func: _with_options(func, names, overrides)


OFFLINE = ("verbose", "debug")


def _with_options(func: F, names: tuple[str, ...], overrides: dict[str, Any] | None = None) -> F:
    signature = inspect.signature(func, eval_str=True)
    own = set(signature.parameters)
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                          annotation=(overrides or {}).get(name, annotation))
        for name, annotation, default in _GLOBAL_PARAMS
        if name not in own and name in names
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {p.name: kwargs.pop(p.name, None) for p in added}
        set_current(current().merged(**values))
        return func(*args, **kwargs)

    params = list(signature.parameters.values())
    wrapper.__signature__ = signature.replace(parameters=params + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**{p.name: p.annotation for p in params}, **{p.name: p.annotation for p in added}}
    return wrapper  # type: ignore[return-value]
