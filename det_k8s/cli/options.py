"""Options shared by every command, spelled as helm spells them.

`-n/--namespace`, `--kube-context` (alias `--context`), `--kubeconfig`, `-v/--verbose` and
`--debug` are accepted both before the command (`det-k8s -n ml pods list`) and after it
(`det-k8s pods list -n ml`), like helm's global flags. The `command` decorator adds them to a
command's signature so each command does not repeat them; values given after the command win.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from ..kube.api import KubeApi

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
        """The cluster these options name (kubeconfig, context and namespace resolved as kubectl does)."""
        from ..kube.api import KubeApi

        return KubeApi.connect(self.kubeconfig, self.kube_context, self.namespace)


_CURRENT: contextvars.ContextVar[GlobalOptions] = contextvars.ContextVar(
    "det_k8s_globals", default=GlobalOptions())  # noqa: B039 (a frozen dataclass)


def current() -> GlobalOptions:
    return _CURRENT.get()


def set_current(options: GlobalOptions) -> None:
    _CURRENT.set(options)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


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
    help="Say more: the helm and kubectl commands run, timings. Repeat for more.")]
DebugOpt = Annotated[bool, typer.Option(
    "--debug", rich_help_panel=GLOBAL_PANEL, help="Show tracebacks for internal errors.")]
OutputOpt = Annotated[OutputFormat, typer.Option(
    "--output", "-o", case_sensitive=False, metavar="FORMAT", help="Output format: table, json or yaml.")]

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
    signature = inspect.signature(func, eval_str=True)
    own = set(signature.parameters)
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for name, annotation, default in _GLOBAL_PARAMS
        if name not in own
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
