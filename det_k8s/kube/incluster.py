"""Running inside a pod: the service account's token instead of a kubeconfig, as kubectl and client-go do.

When no kubeconfig file exists (none given, none in KUBECONFIG, no ~/.kube/config) and the pod's
environment names the API server (KUBERNETES_SERVICE_HOST/PORT) and mounts a service account token,
det-k8s talks to the cluster it runs in. The namespace is -n, else HELM_NAMESPACE, else the pod's own, checked as
a namespace name whichever it is (as `config.resolve` checks a kubeconfig's).
Pure: the paths and the environment are arguments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from ..names import check_namespace
from .config import Target

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
CONTEXT = "in-cluster"


def in_cluster_target(environ: Mapping[str, str], namespace: str | None,
                      account: Path = SERVICE_ACCOUNT) -> Target | None:
    """The cluster this process runs in, or None when it does not run in a pod."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    token = account / "token"
    if not host or not port or not token.is_file():
        return None
    own = ""
    with contextlib.suppress(OSError):  # no namespace file: -n or "default"
        own = (account / "namespace").read_text(encoding="utf-8").strip()
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    if namespace:
        chosen = check_namespace(namespace, "--namespace")
    elif environ.get("HELM_NAMESPACE"):
        chosen = check_namespace(environ["HELM_NAMESPACE"], "HELM_NAMESPACE")
    else:
        chosen = check_namespace(own, f"the pod's namespace ({account / 'namespace'})") if own else "default"
    return Target(token, CONTEXT, chosen, server)
