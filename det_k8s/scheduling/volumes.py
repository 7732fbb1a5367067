"""Where a pod's PersistentVolumeClaims let it run, as kube-scheduler's volume filters decide it.

- VolumeBinding, bound claims: the node must match the PersistentVolume's required node affinity.
- VolumeZone: a bound volume labelled with zones/regions needs a node in one of them (a node with no
  such labels passes).
- VolumeBinding, unbound claims: an `Immediate` class (or no class) binds without the scheduler, so
  the pod waits until it is bound; `WaitForFirstConsumer` binds at scheduling: the node must reach
  an available PersistentVolume that fits the claim (node affinity, class, size, access modes) or
  the class must be able to provision there (`allowedTopologies`). A claim being provisioned for a
  node (`volume.kubernetes.io/selected-node`) pins the pod to it.
- a missing claim, a claim being deleted, or one bound to a missing volume: the pod waits.
- VolumeRestrictions: a `ReadWriteOncePod` claim another pod uses: the pod waits.

A generic ephemeral volume's claim (`<pod>-<volume>`) is used when it exists; before, its template's
class decides as for an unbound claim. What the snapshot does not hold (it lists no claims, volumes
or classes) is not guessed: the rule says so in `unknown`, and planning warns.

Not modelled (kube-scheduler checks them too): CSI storage capacity tracking (CSIStorageCapacity)
and per-node volume attach limits (NodeVolumeLimits, from CSINode). A rule names them in `unchecked`
for a pod that mounts an attachable volume (CSI, or an in-tree cloud disk) or one its class
provisions when the pod is scheduled, and planning warns: never silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..cluster.model import Claim, Node, Snapshot, StorageClass, Term, Volume, VolumeClaim, term_matches

NO_PROVISIONER = "kubernetes.io/no-provisioner"
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
SELECTED_NODE = "volume.kubernetes.io/selected-node"

Check = tuple[str, Callable[[Node], bool]]  # (cause when it fails, node test)


@dataclass(frozen=True)
class VolumeRule:
    """What a pod's claims require: node tests, a reason to wait, and what the snapshot could not tell."""

    key: tuple[object, ...] = ()  # equal keys: equal rules (for caching eligibility)
    checks: tuple[Check, ...] = ()
    waiting: str = ""  # non-empty: the pod cannot be placed anywhere until this changes
    unknown: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()  # filters kube-scheduler applies to these volumes that det-k8s does not model

    def cause(self, node: Node) -> str | None:
        for cause, test in self.checks:
            if not test(node):
                return cause
        return None


NO_VOLUMES = VolumeRule()


def _any_term(terms: Sequence[Term]) -> Callable[[Node], bool]:
    return lambda node: any(term_matches(term, node) for term in terms)


def _on_node(name: str) -> Callable[[Node], bool]:
    return lambda node: node.name == name


def _zone_test(volume: Volume) -> Callable[[Node], bool] | None:
    """VolumeZone: the volume's zone/region labels (values joined by `__`) against the node's."""
    wanted = [(key, set(value.split("__"))) for key, value in volume.labels.items()
              if key in ZONE_LABELS + REGION_LABELS and value]
    if not wanted:
        return None

    def test(node: Node) -> bool:
        if not any(key in node.labels for key in ZONE_LABELS + REGION_LABELS):
            return True  # a node without zone labels has no zone to conflict with
        for key, values in wanted:
            group = ZONE_LABELS if key in ZONE_LABELS else REGION_LABELS
            value = next((node.labels[k] for k in group if k in node.labels), None)
            if value is None or value not in values:
                return False
        return True
    return test


def _provisioned(what: str, klass: StorageClass) -> str:
    return (f"{what}: whether class {klass.name} has the capacity to provision it on the node (CSIStorageCapacity) "
            "and the per-node attach limit of its driver (NodeVolumeLimits)")


class Storage:
    """The snapshot's claims, volumes and classes, and the rule for a pod's claims (cached)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.claims = {(c.namespace, c.name): c for c in snapshot.claims}
        self.volumes = {v.name: v for v in snapshot.volumes}
        self.classes = {c.name: c for c in snapshot.classes}
        self.default_class = next((c for c in snapshot.classes if c.default), None)
        self.listed = snapshot.listed
        self._rules: dict[tuple[object, ...], VolumeRule] = {}
        self.in_use: dict[tuple[str, str], str] = {}  # (namespace, claim) -> a pod using it now
        for pod in snapshot.pods:
            if pod.constraints.claims and pod.active:
                for claim in pod.constraints.claims:
                    name = f"{pod.name}-{claim.name}" if claim.ephemeral else claim.name
                    self.in_use.setdefault((pod.namespace, name), pod.name)

    def rule(self, namespace: str, claims: Sequence[VolumeClaim], pod: str) -> VolumeRule:
        if not claims:
            return NO_VOLUMES
        resolved: list[tuple[str, Claim | None, VolumeClaim]] = []
        for claim in claims:
            name = f"{pod}-{claim.name}" if claim.ephemeral else claim.name
            resolved.append((name, self.claims.get((namespace, name)), claim))
        key: tuple[object, ...] = (namespace, tuple((name, found is None, claim.ephemeral, claim.storage_class)
                                                    for name, found, claim in resolved))
        if any(found is not None and "ReadWriteOncePod" in found.access_modes for _, found, _ in resolved):
            key += (pod,)  # who else uses the claim depends on which pod asks
        rule = self._rules.get(key)
        if rule is None:
            rule = self._rules[key] = self._build(key, namespace, resolved, pod)
        return rule

    def _build(self, key: tuple[object, ...], namespace: str,
               resolved: Sequence[tuple[str, Claim | None, VolumeClaim]], pod: str) -> VolumeRule:
        checks: list[Check] = []
        unknown: list[str] = []
        unchecked: list[str] = []
        for name, claim, wanted in resolved:
            if claim is None and wanted.ephemeral:
                klass = self._class(wanted.storage_class)
                what = f"ephemeral volume {wanted.name}"
                if klass is None:
                    unknown.append(f"{what}: storage class {wanted.storage_class or '(default)'} is not in the snapshot")
                elif klass.binding_mode != "WaitForFirstConsumer":
                    unknown.append(f"{what}: storage class {klass.name} provisions it before scheduling, "
                                   "wherever its provisioner chooses")
                elif klass.provisioner == NO_PROVISIONER:
                    checks.append(self._static(what, None, klass, 0, ("ReadWriteOnce",)))
                else:
                    unchecked.append(_provisioned(what, klass))
                    if klass.allowed_topologies:
                        checks.append((f"{what}: allowed topologies of class {klass.name}",
                                       _any_term(klass.allowed_topologies)))
                continue
            what = f"persistentvolumeclaim {name}"
            if claim is None:
                if "PersistentVolumeClaim" in self.listed:
                    return VolumeRule(key, waiting=f'{what} not found in namespace {namespace}')
                unknown.append(f"{what}: not in the snapshot")
                continue
            if claim.deleting:
                return VolumeRule(key, waiting=f"{what} is being deleted")
            if "ReadWriteOncePod" in claim.access_modes:
                user = self.in_use.get((namespace, name))
                if user is not None and user != pod:
                    return VolumeRule(key, waiting=f"{what} is ReadWriteOncePod and pod {user} uses it")
            if claim.bound:
                volume = self.volumes.get(claim.volume)
                if volume is None:
                    if "PersistentVolume" in self.listed:
                        return VolumeRule(key, waiting=f"{what} is bound to persistentvolume {claim.volume}, "
                                                       "which does not exist")
                    unknown.append(f"{what}: its persistentvolume {claim.volume} is not in the snapshot")
                    continue
                if volume.node_terms:
                    checks.append((f"volume node affinity ({name})", _any_term(volume.node_terms)))
                zone = _zone_test(volume)
                if zone is not None:
                    checks.append((f"volume zone ({name})", zone))
                if volume.attacher:
                    unchecked.append(f"{what}: the per-node attach limit of {volume.attacher} (NodeVolumeLimits)")
                continue
            if claim.selected_node:
                checks.append((f"volume being provisioned on {claim.selected_node} ({name})",
                               _on_node(claim.selected_node)))
                unchecked.append(f"{what}: the per-node attach limit of its driver (NodeVolumeLimits)")
                continue
            klass = self._class(claim.storage_class)
            if claim.storage_class == "" or (klass is not None and klass.binding_mode != "WaitForFirstConsumer"):
                return VolumeRule(key, waiting=f"{what} is not bound yet (it binds without the scheduler)")
            if klass is None:
                if "StorageClass" in self.listed:
                    return VolumeRule(key, waiting=f"{what}: storage class {claim.storage_class or '(default)'} "
                                                   "not found")
                unknown.append(f"{what}: storage class {claim.storage_class or '(default)'} is not in the snapshot")
                continue
            if klass.provisioner == NO_PROVISIONER:
                if "PersistentVolume" not in self.listed:
                    unknown.append(f"{what}: class {klass.name} binds to existing volumes, which the snapshot "
                                   "does not list")
                    continue
                checks.append(self._static(what, claim, klass, claim.request, claim.access_modes))
                continue
            unchecked.append(_provisioned(what, klass))
            if klass.allowed_topologies:
                checks.append((f"allowed topologies of class {klass.name} ({name})", _any_term(klass.allowed_topologies)))
        return VolumeRule(key, tuple(checks), "", tuple(unknown), tuple(unchecked))

    def _class(self, name: str | None) -> StorageClass | None:
        if name is None:
            return self.default_class
        return self.classes.get(name)

    def _static(self, what: str, claim: Claim | None, klass: StorageClass, request: int,
                modes: Sequence[str]) -> Check:
        """WaitForFirstConsumer without a provisioner: an available volume on the node must fit the claim."""
        ref = (claim.namespace, claim.name) if claim is not None else None
        candidates = [v for v in self.volumes.values()
                      if v.storage_class == klass.name and v.phase == "Available"
                      and (v.claim is None or v.claim == ref) and v.capacity >= request
                      and all(mode in v.access_modes for mode in modes)]
        any_node = any(not v.node_terms for v in candidates)
        terms = [term for v in candidates for term in v.node_terms]

        def test(node: Node) -> bool:
            return any_node or any(term_matches(term, node) for term in terms)
        return (f"no available persistent volume for {what.split(' ', 1)[1]}", test)
