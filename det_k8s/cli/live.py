"""What the live scheduling commands share: settings, policy, identity, queue entries."""

from __future__ import annotations

import datetime
import getpass
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..determined import versions
from . import output
from .inputs import load_settings_from_cli

if TYPE_CHECKING:
    from ..kube.api import KubeApi
    from ..live.queue import QueueEntry
    from ..scheduling.experiments import Experiment
    from ..scheduling.model import PodGroup, Policy
    from ..settings import Settings

SCHEDULING_KEYS = ("maxSlotsPerPod", "slotType", "slotResourceRequests", "taskContainerDefaults",
                   "defaultScheduler", "defaultImages")  # defaultImages: the image of det-k8s's own task pods


def scheduling_settings(api: KubeApi, values: Sequence[str | Path] | None, sets: Sequence[str] | None,
                        set_strings: Sequence[str] | None) -> Settings:
    """Settings from -f/--set, or else from the installed master's configuration in the namespace (the
    ConfigMap or, from Determined 0.26.2, the Secret its chart writes), with appVersion the release it runs."""
    import yaml

    from ..release.master_config import find_master_config
    from ..settings import Document, load_settings
    from ..settings.from_master import values_from_master_config

    if values or sets or set_strings:
        loaded = load_settings_from_cli(values, sets, set_strings, required=False)
    else:
        config = find_master_config(api, api.namespace)
        found = values_from_master_config(config.text, config.where)
        if config.version is not None and versions.supported(config.version):
            found["appVersion"] = str(config.version)
        else:
            output.warning(f"cannot tell which Determined release {config.where} belongs to (the master "
                           "Deployment is unreadable, or its image tag is not a release det-k8s supports); taking "
                           f"{versions.DEFAULT}; pass -f with your settings to name yours")
        loaded = load_settings([Document(config.where, yaml.safe_dump(found))], bundled_chart=False)
        from ..scrub_output import register, register_plain
        from ..settings.secret_settings import plain_in, secrets_in

        register_plain(*plain_in(loaded.user_values))
        register(*secrets_in(loaded.user_values))
    settings = loaded.settings()
    for item in loaded.warnings:
        if item.path.split(".")[0].split("[")[0] in SCHEDULING_KEYS:
            output.problem(item, stream=sys.stderr)
    return settings


def effective_policy(api: KubeApi, settings: Settings | None = None, *, preemption: bool = False) -> Policy:
    """The namespace's stored policy; `defaultScheduler: preemption` or --preemption switch preemption on."""
    from dataclasses import replace

    from ..live.policy import read_policy

    policy = read_policy(api, api.namespace)
    if preemption or (settings is not None and settings.default_scheduler == "preemption"):
        policy = replace(policy, preemption=True)
    return policy


def current_user(given: str | None) -> str:
    if given:
        return given
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def holder_id(user: str) -> str:
    import socket

    return f"{user}@{socket.gethostname()}-{secrets.token_hex(3)}"


def new_group_id() -> str:
    """Eight hex digits, like a short git hash: `experiment describe 7f3a` finds it by prefix.

    Pod names become `<experiment>-<id>-<rank>`, so two runs of one experiment never clash.
    """
    return secrets.token_hex(4)


def now() -> tuple[str, int]:
    """(RFC 3339 time, microseconds since the epoch as the submission sequence)."""
    moment = datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), int(moment.timestamp() * 1_000_000)


def entry_for(experiment: Experiment, text: str, settings: Settings, group: PodGroup, namespace: str) -> QueueEntry:
    """A queue entry holding everything a pass needs to start the group later (no settings then)."""
    from ..live.queue import QueueEntry
    from ..scheduling.groups import headless_service_manifest, pod_manifests
    from ..scheduling.serialize import group_to_dict

    unplaced = {pod.name: "" for pod in group.pods}
    manifests = pod_manifests(group, experiment, settings, unplaced, namespace)
    return QueueEntry(
        id=group.id, experiment=experiment.name, user=group.user, priority=group.priority,
        submitted_at=group.submitted_at, sequence=group.sequence, experiment_text=text,
        group=group_to_dict(group), pods=tuple(manifests), service=headless_service_manifest(group, namespace),
        events=(f"{group.submitted_at} submitted by {group.user}",))


def age(timestamp: str) -> str:
    """`3m`, `2h`, `5d` since an RFC 3339 time, like kubectl's AGE column."""
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    seconds = max(0, int((datetime.datetime.now(datetime.UTC) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
