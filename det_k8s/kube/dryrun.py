"""Ask the cluster: a task pod built from each pod spec the settings hold, sent as a server-side dry run.

det-k8s checks pod specs offline (settings/podspec.py, settings/podvalues.py); when a cluster is reachable, its API
server is the last word, admission included (a webhook, Pod Security, a LimitRange, a policy). `validate
--kube-context` and the `install`/`upgrade` preflight build a pod as the master builds a task pod from the pod spec
(its `determined-container` merged with the master's, the other containers kept) and create it with `dryRun=All`:
nothing is stored. A refusal is one error naming the settings key and the field the API server named.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..errors import DetK8sError, Forbidden, NotFound, Problem, Rejected, Severity
from ..settings.podspec import settings_pod_specs
from ..settings.source import SourceMap, format_path
from .api import KubeApi
from .kinds import PODS

MAIN = "determined-container"  # the container the master fills in (facts: tasks.container_name)
PLACEHOLDER_IMAGE = "determinedai/pytorch-ngc:0.38.1"


def task_pod(spec: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """A pod as the master builds one from a pod spec: its metadata and spec kept, the main container completed."""
    pod_spec = copy.deepcopy(dict(spec))
    meta = dict(pod_spec.pop("metadata", None) or {})
    inner = pod_spec.pop("spec", None)
    body: dict[str, Any] = dict(inner) if isinstance(inner, Mapping) else {}
    containers = [dict(c) for c in body.get("containers") or () if isinstance(c, Mapping)]
    main = next((c for c in containers if c.get("name") == MAIN), None)
    if main is None:
        main = {"name": MAIN}
        containers.insert(0, main)
    main.setdefault("image", PLACEHOLDER_IMAGE)
    for other in containers:
        other.setdefault("image", PLACEHOLDER_IMAGE)  # (offline checks already require one where the master needs it)
    body["containers"] = containers
    meta["name"] = "det-k8s-dry-run"
    meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def dry_run_pod_specs(api: KubeApi, values: Mapping[str, Any], sources: SourceMap | None,
                      namespace: str) -> list[Problem]:
    """The API server's verdict on a task pod from each pod spec in the settings (nothing is created)."""
    problems: list[Problem] = []
    for path, spec in settings_pod_specs(values):
        if not isinstance(spec, Mapping):
            continue
        key = format_path(path)
        where = sources.find(path) if sources else None
        try:
            api.request("POST", PODS.path(namespace), query=[("dryRun", "All")], body=task_pod(spec, namespace),
                        what=f"a task pod from {key} (dry run)")
        except Rejected as exc:
            problems.append(Problem(Severity.ERROR, key, f"the API server of {api.target.context} refuses a task pod "
                                    f"built from it: {exc.message}", "fix the field it names", where))
        except Forbidden as exc:
            if "forbidden" in exc.message and ("webhook" in exc.message or "violates" in exc.message.lower()):
                problems.append(Problem(Severity.ERROR, key, f"admission in {api.target.context} refuses a task pod "
                                        f"built from it: {exc.message}", None, where))
            else:
                problems.append(Problem(Severity.WARNING, key, f"not checked by the API server (no permission to "
                                        f"create pods in {namespace}, even as a dry run): {exc.message}", None, where))
                break
        except NotFound:
            problems.append(Problem(Severity.WARNING, key, f"not checked by the API server: namespace {namespace} "
                                    "does not exist yet", None, where))
            break
        except DetK8sError as exc:
            problems.append(Problem(Severity.WARNING, key, f"not checked by the API server: {exc.message}", None,
                                    where))
            break
    return problems
