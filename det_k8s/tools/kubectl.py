"""kubectl: find it, learn its version once, and build argv for the node commands.

det-k8s reads the cluster through its API adapter, but labels and taints nodes with kubectl:
those are the exact commands the documents give (`kubectl label nodes N determined.ai/pedl-agent=present`,
`kubectl taint nodes N key=value:NoSchedule`), kubectl applies its own validation and
`--overwrite` semantics to them, and an admin can re-run or undo what det-k8s printed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import InputError, ToolFailed, UsageError
from ..labels import AGENT_LABEL, AGENT_VALUE
from ..names import check_node_name, is_label_key, is_label_value
from ..safe_read import load_json
from . import DEFAULT_TAINT as DEFAULT_TAINT
from .helm import KubeFlags, failed
from .locate import locate, version_of
from .process import Completed, run

HOW_TO_GET = ("install kubectl (https://kubernetes.io/docs/tasks/tools/) or point --kubectl-binary / "
              "DET_K8S_KUBECTL at it; developers: python scripts/fetch_tools.py puts one in .tools/bin")
DEFAULT_TIMEOUT = 60.0
REQUEST_TIMEOUT = "30s"
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")



def kubectl_flags(kube: KubeFlags) -> list[str]:
    """kubectl spells the context `--context`; every call gets a request timeout."""
    out: list[str] = []
    if kube.kube_context:
        out += ["--context", kube.kube_context]
    if kube.kubeconfig:
        out += ["--kubeconfig", kube.kubeconfig]
    return out + ["--request-timeout", REQUEST_TIMEOUT]


@dataclass(frozen=True)
class TaintSpec:
    key: str
    value: str
    effect: str
    remove: bool = False

    def argument(self) -> str:
        """As kubectl takes it: `key=value:Effect`, `key:Effect`, with a trailing `-` to remove; `key-` removes the
        key's taints of every effect."""
        if not self.effect:
            return f"{self.key}-"
        text = f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        return text + ("-" if self.remove else "")


def parse_taint(text: str, remove: bool = False) -> TaintSpec:
    """`KEY=VALUE:EFFECT` or `KEY:EFFECT`, a trailing `-` (or remove=True) to remove it; `KEY-` removes the key's
    taints of every effect, as kubectl does."""
    spec = text.strip()
    if spec.endswith("-"):
        spec, remove = spec[:-1], True
    hint = f"write KEY=VALUE:EFFECT with EFFECT one of {', '.join(EFFECTS)}, e.g. {DEFAULT_TAINT}"
    if ":" not in spec and remove and "=" not in spec:  # kubectl's `KEY-`: every effect
        if not is_label_key(spec):
            raise UsageError(f"taint {text!r}: key {spec!r} is not a valid label key",
                             hint=f"to remove a taint write KEY- or KEY:EFFECT-, e.g. {DEFAULT_TAINT.split('=')[0]}-")
        return TaintSpec(spec, "", "", True)
    if ":" not in spec:
        raise UsageError(f"taint {text!r}: no effect", hint=hint)
    head, effect = spec.rsplit(":", 1)
    key, _, value = head.partition("=")
    if effect not in EFFECTS:
        raise UsageError(f"taint {text!r}: effect {effect!r} is not one of {', '.join(EFFECTS)}", hint=hint)
    if not is_label_key(key):
        raise UsageError(f"taint {text!r}: key {key!r} is not a valid label key", hint=hint)
    if not is_label_value(value):
        raise UsageError(f"taint {text!r}: value {value!r} is not a valid label value", hint=hint)
    return TaintSpec(key, value, effect, remove)


def node_names(nodes: Sequence[str]) -> list[str]:
    """Node names checked (whole strings) before they reach kubectl's argv: `--all` must never arrive as a flag."""
    return [check_node_name(name) for name in nodes]


def label_argv(nodes: Sequence[str], kube: KubeFlags, key: str = AGENT_LABEL, value: str = AGENT_VALUE) -> list[str]:
    return ["label", "nodes", *node_names(nodes), f"{key}={value}", "--overwrite", *kubectl_flags(kube)]


def unlabel_argv(nodes: Sequence[str], kube: KubeFlags, key: str = AGENT_LABEL) -> list[str]:
    return ["label", "nodes", *node_names(nodes), f"{key}-", *kubectl_flags(kube)]


def taint_argv(nodes: Sequence[str], taint: TaintSpec, kube: KubeFlags) -> list[str]:
    overwrite = [] if taint.remove else ["--overwrite"]
    return ["taint", "nodes", *node_names(nodes), taint.argument(), *overwrite, *kubectl_flags(kube)]


@dataclass(frozen=True)
class Kubectl:
    """A located kubectl; `context` names the cluster in failure messages."""

    path: str
    version: str
    log: Callable[[str], None] | None = None
    context: str | None = None

    def run(self, args: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT) -> Completed:
        """A failure is one det-k8s line (`tools/failures.py`); kubectl's own stderr is logged, shown with -v."""
        try:
            return run([self.path, *args], timeout=timeout, tool="kubectl", log=self.log)
        except ToolFailed as exc:
            raise failed("kubectl", args, exc, self.log, self.context) from exc


def _client_version(text: str) -> str:
    try:
        return str(load_json(text, "kubectl version")["clientVersion"]["gitVersion"])
    except (InputError, KeyError, TypeError):
        return text.strip().splitlines()[0] if text.strip() else "unknown"


def find_kubectl(explicit: str | None = None, log: Callable[[str], None] | None = None) -> Kubectl:
    path = locate("kubectl", explicit, "DET_K8S_KUBECTL", HOW_TO_GET)
    raw = version_of(path, ("version", "--client", "--output", "json"), "kubectl", log=log)
    return Kubectl(path, _client_version(raw), log)
