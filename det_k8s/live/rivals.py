"""Another scheduler serving the scheduler name det-k8s serves: the official charts' coscheduling plugin.

With `defaultScheduler: coscheduler` the official charts (and det-k8s's own chart, on the explicit `plugin`
opt-in) deploy kube-scheduler 1.18.9 with `--scheduler-name=coscheduler`. Where it still runs, it and
`det-k8s scheduler run` both take the master's pods: it binds a gang pod by pod, det-k8s finds the gang
partly bound in between and deletes its bound pods (so the master restarts the trial), over and over. The
Lease keeps det-k8s processes apart, not a foreign scheduler, so `scheduler run` looks for one at start-up
and refuses to run beside one (`--force` runs anyway).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import DetK8sError
from ..kube.api import KubeApi
from ..kube.kinds import DEPLOYMENTS

PLUGIN_NAMESPACE = "kube-system"  # where the official charts put it (det-k8s's chart: the release namespace)


def _serves(container: Mapping[str, Any], scheduler_name: str) -> bool:
    """A container whose command line serves the scheduler name: kube-scheduler (the official charts' plugin) or
    any other scheduler taking `--scheduler-name` (Volcano's, a second det-k8s that is not `scheduler run`)."""
    words = [str(w) for key in ("command", "args") if isinstance(container.get(key), list) for w in container[key]]
    pairs = list(zip(words, [*words[1:], ""][:len(words)], strict=True))
    if any(w == "scheduler" and after == "run" for w, after in pairs):
        return False  # det-k8s's own Deployment (`scheduler run --scheduler-name NAME`): the Lease keeps those apart
    return any(w == f"--scheduler-name={scheduler_name}" or (w == "--scheduler-name" and after == scheduler_name)
               for w, after in pairs)


def rival_schedulers(api: KubeApi, scheduler_name: str) -> list[str]:
    """`<namespace>/<name> (<image>)` of each Deployment with replicas that runs a scheduler serving the name;
    in every namespace, or in kube-system where the credentials may not list them all (none: nothing readable)."""
    try:
        items = list(api.iter_list(DEPLOYMENTS, all_namespaces=True))
    except DetK8sError:
        try:
            items = list(api.iter_list(DEPLOYMENTS, PLUGIN_NAMESPACE))
        except DetK8sError:
            return []
    found = []
    for meta, containers in _running(items):
        for container in containers:
            if _serves(container, scheduler_name):
                found.append(f"{meta.get('namespace')}/{meta.get('name')} ({container.get('image')})")
                break
    return found


def _running(items: list[Any]) -> Iterator[tuple[Mapping[str, Any], list[Mapping[str, Any]]]]:
    """(metadata, containers) of each Deployment not scaled to 0, read defensively: a malformed object is simply
    not a scheduler."""
    for deployment in items:
        spec = _mapping(_mapping(deployment).get("spec"))
        if spec.get("replicas") == 0:
            continue
        containers = _mapping(_mapping(spec.get("template")).get("spec")).get("containers")
        yield (_mapping(_mapping(deployment).get("metadata")),
               [c for c in (containers if isinstance(containers, list) else ()) if isinstance(c, Mapping)])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


KNOWN_SCHEDULERS = {"kai-scheduler": "kai-scheduler", "volcano-scheduler": "volcano", "vc-scheduler": "volcano",
                    "yunikorn-scheduler": "yunikorn", "kube-scheduler": "default-scheduler"}  # image -> default name


def scheduler_deployments(api: KubeApi) -> list[tuple[str, str]]:
    """(`<namespace>/<name>`, scheduler name) of each Deployment with replicas that runs a scheduler: one naming
    `--scheduler-name`, or a known scheduler's image (KAI, Volcano, YuniKorn, kube-scheduler) with its default name.
    None where the credentials may not list Deployments."""
    try:
        items = list(api.iter_list(DEPLOYMENTS, all_namespaces=True))
    except DetK8sError:
        return []
    found = []
    for meta, containers in _running(items):
        for container in containers:
            words = [str(w) for key in ("command", "args") if isinstance(container.get(key), list)
                     for w in container[key]]
            named = next((w.split("=", 1)[1] for w in words if w.startswith("--scheduler-name=")), "")
            named = named or next((after for w, after in zip(words, words[1:], strict=False)
                                   if w == "--scheduler-name"), "")
            image = str(container.get("image") or "").rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
            if named or image in KNOWN_SCHEDULERS:
                found.append((f"{meta.get('namespace')}/{meta.get('name')}", named or KNOWN_SCHEDULERS[image]))
                break
    return sorted(found)
