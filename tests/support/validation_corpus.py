"""A corpus of pod-spec and chart values, good and bad, with what a real Kubernetes API server (1.37) does with them.

Each case is a small dict: `name` (unique), `kind` ("podspec" or "chart"), `value` and `expected` ("accept" or
"refuse"), and for a refusal `why`: the Kubernetes (or Determined master) validation that refuses it.

- A `podspec` value is a pod spec as a user writes it in `taskContainerDefaults.cpuPodSpec`/`gpuPodSpec` or an
  experiment's `environment.pod_spec` (`metadata` and `spec`; containers may be left to Determined). `as_pod(case)`
  makes the complete Pod the master would create from it: the spec merged into a minimal valid pod whose main
  container is `determined-container` with an image, as Determined's master merges it (the user's
  `determined-container` entry into its own container, every other container passed on as it is). The expectation
  is the API server's answer to that Pod (a server-side dry run: decoding, defaulting, validation, admission with
  no RuntimeClass or PriorityClass involved).
- A `chart` value is settings values (merged onto `CHART_BASE` by `as_settings(case)`); the expectation is whether
  the objects the chart renders from them are accepted by the API server and the Determined master starts.

The expectations are written here from Kubernetes' and Determined's rules, independently of det-k8s's code:
`tests/unit/settings/test_validation_corpus.py` runs every case through det-k8s offline and reports the
agreement; a later test may send `as_pod(case)` to a real API server.
"""

from __future__ import annotations

import copy
from typing import Any

ACCEPT, REFUSE = "accept", "refuse"
MAIN = "determined-container"
IMAGE = "determinedai/pytorch-ngc:0.38.1"
EXEC = {"exec": {"command": ["true"]}}
CHART_BASE: dict[str, Any] = {"maxSlotsPerPod": 4, "initialUserPassword": "Corpus-Pass-1"}

Case = dict[str, Any]
CASES: list[Case] = []


def _add(name: str, kind: str, value: Any, expected: str, why: str = "") -> None:
    CASES.append({"name": name, "kind": kind, "value": value, "expected": expected, "why": why})


def pod(name: str, spec: dict[str, Any], expected: str, why: str = "", metadata: dict[str, Any] | None = None) -> None:
    value: dict[str, Any] = {"spec": spec}
    if metadata is not None:
        value["metadata"] = metadata
    _add(name, "podspec", value, expected, why)


def main(resources: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """The spec of a pod whose only container is Determined's main one, with these fields."""
    container: dict[str, Any] = {"name": MAIN, **fields}
    if resources is not None:
        container["resources"] = resources
    return {"containers": [container]}


def chart(name: str, values: dict[str, Any], expected: str, why: str = "") -> None:
    _add(name, "chart", values, expected, why)


# -- quantities (resource.ParseQuantity; ValidateResourceQuantityValue) --------------------------------------------

GOOD_QUANTITIES = ["1", "0.5", "500m", "64G", "64Gi", "1e3", "1E3", "1.5Gi", "+1", "1.", ".5", "129e6", "123Mi",
                   "0", "2k", "7910m", "1Ki", "100M", 8, 1.5, "1e-3", "1n", "1e100", " 2", "2 ", "+.5", "-0",
                   # ParseQuantity takes a suffix or a sign without digits as 0 (a real API server 1.37.2 did)
                   "Gi", "m", "+", ".", "E"]
BAD_QUANTITIES = ["64GB", "8 cores", "abc", "8 GiB", "1K", "1gb", "1.5.2", "1ki", "1e", "0x10", "1Mb",
                   "8cpu", "--1", "1 000", "one", "1,5", "5%", ""]
for resource in ("cpu", "memory"):
    for q in GOOD_QUANTITIES:
        pod(f"quantity {resource} request {q!r}", main({"requests": {resource: q}}), ACCEPT)
    for q in BAD_QUANTITIES:
        pod(f"quantity {resource} request {q!r}", main({"requests": {resource: q}}), REFUSE,
            "resource.ParseQuantity: quantities must match the regular expression")
    pod(f"quantity {resource} negative request", main({"requests": {resource: "-1"}}), REFUSE,
        "ValidateResourceQuantityValue: must be greater than or equal to 0")
    pod(f"quantity {resource} negative limit", main({"limits": {resource: "-500m"}}), REFUSE,
        "ValidateResourceQuantityValue: must be greater than or equal to 0")
for q in ("64GB", "8 GiB", "abc"):
    pod(f"quantity bad limit {q!r}", main({"limits": {"memory": q}}), REFUSE, "resource.ParseQuantity")
    pod(f"quantity bad ephemeral-storage {q!r}", main({"requests": {"ephemeral-storage": q}}), REFUSE,
        "resource.ParseQuantity")
    pod(f"quantity bad init container request {q!r}",
        {"initContainers": [{"name": "init", "image": "busybox", "resources": {"requests": {"memory": q}}}]}, REFUSE,
        "resource.ParseQuantity")
    pod(f"quantity bad overhead {q!r}", {"overhead": {"memory": q}}, REFUSE, "resource.ParseQuantity")
pod("quantity ephemeral-storage 10Gi", main({"requests": {"ephemeral-storage": "10Gi"}}), ACCEPT)
pod("quantity memory 500m (a fraction of a byte, only warned about)", main({"requests": {"memory": "500m"}}), ACCEPT)

# -- requests against limits (ValidateResourceRequirements) -------------------------------------------------------

for resource, low, high in (("cpu", "1", "2"), ("memory", "4Gi", "8Gi"), ("cpu", "500m", "1"),
                            ("memory", "1G", "1Gi"), ("ephemeral-storage", "1Gi", "2Gi")):
    pod(f"requests {resource} {low} below limit {high}", main({"requests": {resource: low}, "limits": {resource: high}}),
        ACCEPT)
    pod(f"requests {resource} {high} above limit {low}", main({"requests": {resource: high}, "limits": {resource: low}}),
        REFUSE, "ValidateResourceRequirements: must be less than or equal to limit")
    pod(f"requests {resource} {low} equal to limit", main({"requests": {resource: low}, "limits": {resource: low}}),
        ACCEPT)
pod("requests 1000m equal to limit 1", main({"requests": {"cpu": "1000m"}, "limits": {"cpu": 1}}), ACCEPT)
pod("requests 1.5 equal to limit 1500m", main({"requests": {"cpu": 1.5}, "limits": {"cpu": "1500m"}}), ACCEPT)
pod("requests only a limit (request defaults to it)", main({"limits": {"cpu": 2, "memory": "8Gi"}}), ACCEPT)
pod("requests above limits in an init container",
    {"initContainers": [{"name": "init", "image": "busybox",
                         "resources": {"requests": {"cpu": 2}, "limits": {"cpu": 1}}}]}, REFUSE,
    "ValidateResourceRequirements: must be less than or equal to cpu limit")
pod("requests above limits in a sidecar",
    {"containers": [{"name": MAIN}, {"name": "sidecar", "image": "busybox",
                                     "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}]},
    REFUSE, "ValidateResourceRequirements: must be less than or equal to memory limit")

# -- resource names and extended resources (validateContainerResourceName, IsExtendedResourceName) -----------------

pod("extended nvidia.com/gpu limit", main({"limits": {"nvidia.com/gpu": 8}}), ACCEPT)
pod("extended nvidia.com/gpu request = limit", main({"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}}),
    ACCEPT)
pod("extended nvidia.com/gpu request without limit", main({"requests": {"nvidia.com/gpu": 1}}), REFUSE,
    "ValidateResourceRequirements: Limit must be set for non overcommitable resources")
pod("extended nvidia.com/gpu request below limit", main({"requests": {"nvidia.com/gpu": 1},
                                                         "limits": {"nvidia.com/gpu": 2}}), REFUSE,
    "ValidateResourceRequirements: must be equal to nvidia.com/gpu limit")
pod("extended nvidia.com/gpu fraction", main({"limits": {"nvidia.com/gpu": "0.5"}}), REFUSE,
    "ValidateResourceQuantityValue: must be an integer")
pod("extended nvidia.com/gpu 500m", main({"limits": {"nvidia.com/gpu": "500m"}}), REFUSE,
    "ValidateResourceQuantityValue: must be an integer")
pod("extended amd.com/gpu limit", main({"limits": {"amd.com/gpu": 1}}), ACCEPT)
pod("extended example.com/foo-bar limit", main({"limits": {"example.com/foo-bar": "2"}}), ACCEPT)
pod("extended 1e3 devices", main({"limits": {"example.com/dev": "1e3"}}), ACCEPT)
for bad in ("gpu", "GPU", "gpus", "nvidia.com/", "/gpu", "nvidia.com/gpu/x", "requests.cpu", "cpus", "mem",
            "nvidia.com/-gpu", "Nvidia_com/gpu", "nvidia com/gpu"):
    pod(f"resource name {bad!r}", main({"limits": {bad: 1}}), REFUSE,
        "validateContainerResourceName: must be a standard resource for containers / qualified name")
pod("hugepages with memory", main({"limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}}), ACCEPT)
pod("hugepages without cpu or memory", main({"limits": {"hugepages-2Mi": "4Mi"}}), REFUSE,
    "ValidateResourceRequirements: HugePages require cpu or memory")
pod("hugepages not a multiple of the page", main({"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}}), REFUSE,
    "validateResourceQuantityHugePageValue: not positive integer multiple")
pod("hugepages request without limit", main({"requests": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}}), REFUSE,
    "ValidateResourceRequirements: Limit must be set for non overcommitable resources")

# -- tolerations (validateTolerations, validateTaintEffect) -------------------------------------------------------

OPERATORS = {"Equal": True, "Exists": True, "": True, "Equals": False, "exists": False, "In": False, "=": False,
             "equal": False}
EFFECTS = {"": True, "NoSchedule": True, "PreferNoSchedule": True, "NoExecute": True, "NoSchedul": False,
           "noschedule": False, "NoExecution": False}
for operator, operator_ok in OPERATORS.items():
    for effect, effect_ok in EFFECTS.items():
        toleration: dict[str, Any] = {"key": "nvidia.com/gpu"}
        if operator:
            toleration["operator"] = operator
        if operator != "Exists":
            toleration["value"] = "present"
        if effect:
            toleration["effect"] = effect
        ok = operator_ok and effect_ok
        pod(f"toleration operator {operator!r} effect {effect!r}", {"tolerations": [toleration]},
            ACCEPT if ok else REFUSE, "" if ok else "validateTolerations: Unsupported value")
pod("toleration Exists with a value", {"tolerations": [{"key": "a", "operator": "Exists", "value": "b"}]}, REFUSE,
    "validateTolerations: value must be empty when operator is Exists")
pod("toleration without key, Exists (tolerates everything)", {"tolerations": [{"operator": "Exists"}]}, ACCEPT)
pod("toleration without key, Equal", {"tolerations": [{"operator": "Equal", "effect": "NoSchedule"}]}, REFUSE,
    "validateTolerations: operator must be Exists when key is empty")
pod("toleration without key or operator", {"tolerations": [{"effect": "NoSchedule"}]}, REFUSE,
    "validateTolerations: operator must be Exists when key is empty")
pod("toleration seconds with NoExecute", {"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute",
                                                           "tolerationSeconds": 300}]}, ACCEPT)
pod("toleration seconds with NoSchedule", {"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoSchedule",
                                                            "tolerationSeconds": 300}]}, REFUSE,
    "validateTolerations: effect must be NoExecute when tolerationSeconds is set")
pod("toleration key not a qualified name", {"tolerations": [{"key": "-bad", "operator": "Exists"}]}, REFUSE,
    "validateTolerations: ValidateLabelName")
pod("toleration key with a space", {"tolerations": [{"key": "my key", "operator": "Exists"}]}, REFUSE,
    "validateTolerations: ValidateLabelName")
pod("toleration value not a label value", {"tolerations": [{"key": "a", "value": "a b"}]}, REFUSE,
    "validateTolerations: IsValidLabelValue")
pod("toleration value too long", {"tolerations": [{"key": "a", "value": "v" * 64}]}, REFUSE,
    "validateTolerations: IsValidLabelValue")
pod("toleration prefixed key", {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                                 "effect": "NoExecute", "tolerationSeconds": 30}]}, ACCEPT)
pod("toleration null entry", {"tolerations": [None]}, REFUSE, "validateTolerations: an empty toleration")
for operator in ("Lt", "Gt"):
    pod(f"toleration operator {operator} (feature gate TaintTolerationComparisonOperators, off)",
        {"tolerations": [{"key": "a", "operator": operator, "value": "5"}]}, REFUSE,
        "validateTolerations: Unsupported value (the feature gate is off by default)")

# -- containers (validateContainers, validateInitContainers, validateContainerCommon) ------------------------------

pod("container sidecar with image", {"containers": [{"name": MAIN}, {"name": "sidecar", "image": "busybox"}]}, ACCEPT)
pod("container sidecar without image", {"containers": [{"name": MAIN}, {"name": "sidecar"}]}, REFUSE,
    "validateContainers: image Required")
pod("container init without image", {"initContainers": [{"name": "init"}]}, REFUSE,
    "validateInitContainers: image Required")
pod("container init with image", {"initContainers": [{"name": "init", "image": "busybox"}]}, ACCEPT)
for bad in ("Sidecar", "side_car", "side.car", "-sidecar", "sidecar-", "s" * 64, "side car"):
    pod(f"container name {bad!r}", {"containers": [{"name": MAIN}, {"name": bad, "image": "busybox"}]}, REFUSE,
        "validateContainers: ValidateDNS1123Label")
for good in ("s", "sidecar-2", "a" * 63, "0sidecar"):
    pod(f"container name {good!r}", {"containers": [{"name": MAIN}, {"name": good, "image": "busybox"}]}, ACCEPT)
pod("container name empty", {"containers": [{"name": MAIN}, {"name": "", "image": "busybox"}]}, REFUSE,
    "validateContainers: name Required")
pod("container names duplicate", {"containers": [{"name": MAIN}, {"name": "x", "image": "a"}, {"name": "x", "image": "b"}]},
    REFUSE, "validateContainers: Duplicate value")
pod("container name shared with an init container",
    {"containers": [{"name": MAIN}, {"name": "x", "image": "a"}], "initContainers": [{"name": "x", "image": "b"}]},
    REFUSE, "validateInitContainers: Duplicate value")
pod("container named like the main one in init containers", {"initContainers": [{"name": MAIN, "image": "b"}]}, REFUSE,
    "validateInitContainers: Duplicate value")
pod("container null entry (--set containers[1].name=x)", {"containers": [None, {"name": MAIN}]}, REFUSE,
    "validateContainers: name Required, image Required")
pod("container null init entry", {"initContainers": [None]}, REFUSE, "validateInitContainers: name Required")
# issue 40: two volumes of one name passed `validate`; the API server refuses the pod (spec.volumes[1].name)
pod("volume names duplicate", {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]},
    REFUSE, "ValidateVolumes: Duplicate value")
pod("volume names duplicate, different sources",
    {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "hostPath": {"path": "/data"}}]},
    REFUSE, "ValidateVolumes: Duplicate value")
pod("volume names distinct", {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]},
    ACCEPT)
pod("volume name upper case", {"volumes": [{"name": "Data", "emptyDir": {}}]}, REFUSE,
    "ValidateVolumes: ValidateDNS1123Label")
pod("volume name with an underscore", {"volumes": [{"name": "my_data", "emptyDir": {}}]}, REFUSE,
    "ValidateVolumes: ValidateDNS1123Label")
pod("volume name empty", {"volumes": [{"name": "", "emptyDir": {}}]}, REFUSE, "ValidateVolumes: name Required")
pod("volume name 63 characters", {"volumes": [{"name": "v" * 63, "emptyDir": {}}]}, ACCEPT)
pod("volume name 64 characters", {"volumes": [{"name": "v" * 64, "emptyDir": {}}]}, REFUSE,
    "ValidateVolumes: ValidateDNS1123Label")

# found by tests/real/test_validation_generated.py (issue 40): the generated pod specs the real API server refused
# and det-k8s passed, shrunk, and their accepted neighbours
def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def _expr(operator: str, values: list[str] | None = None, key: str = "zone") -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, **({} if values is None else {"values": values})}]}


pod("node affinity In one value", {"affinity": _required(_expr("In", ["a"]))}, ACCEPT)
pod("node affinity In without values", {"affinity": _required(_expr("In"))}, REFUSE,
    "ValidateNodeSelectorRequirement: values Required for In and NotIn")
pod("node affinity NotIn with no values", {"affinity": _required(_expr("NotIn", []))}, REFUSE,
    "ValidateNodeSelectorRequirement: values Required for In and NotIn")
pod("node affinity Exists with values", {"affinity": _required(_expr("Exists", ["a"]))}, REFUSE,
    "ValidateNodeSelectorRequirement: values Forbidden for Exists and DoesNotExist")
pod("node affinity Gt two values", {"affinity": _required(_expr("Gt", ["1", "2"]))}, REFUSE,
    "ValidateNodeSelectorRequirement: one value for Gt and Lt")
pod("node affinity Gt one value", {"affinity": _required(_expr("Gt", ["1"]))}, ACCEPT)
pod("node affinity operator Equals", {"affinity": _required(_expr("Equals", ["a"]))}, REFUSE,
    "ValidateNodeSelectorRequirement: not a valid selector operator")
pod("node affinity key not a qualified name", {"affinity": _required(_expr("Exists", key="a/b/c"))}, REFUSE,
    "ValidateNodeSelectorRequirement: ValidateLabelName")
pod("node affinity no terms", {"affinity": _required()}, REFUSE, "ValidateNodeSelector: at least one term")
pod("node affinity matchFields two names", {"affinity": _required(
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]})}, REFUSE,
    "ValidateNodeFieldSelectorRequirement: one value")
pod("node affinity matchFields of a label", {"affinity": _required(
    {"matchFields": [{"key": "zone", "operator": "In", "values": ["a"]}]})}, REFUSE,
    "ValidateNodeFieldSelectorRequirement: not a valid field selector key")
pod("node affinity In value of 64 characters", {"affinity": _required(_expr("In", ["a" * 64]))}, REFUSE,
    "ValidateNodeSelectorRequirement: IsValidLabelValue (a required term of a new pod, from 1.32)")
pod("node affinity preferred value of 64 characters", {"affinity": {"nodeAffinity": {
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": _expr("In", ["a" * 64])}]}}},
    ACCEPT)
pod("securityContext procMount Unmasked with hostUsers false", {**main(securityContext={"procMount": "Unmasked"}),
                                                                 "hostUsers": False}, ACCEPT)
pod("node affinity preferred weight 0", {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 0, "preference": _expr("In", ["a"])}]}}}, REFUSE, "validatePreferredSchedulingTerms: weight 1-100")
pod("volume mount of a volume the pod has", {**main(volumeMounts=[{"name": "data", "mountPath": "/data"}]),
                                             "volumes": [{"name": "data", "emptyDir": {}}]}, ACCEPT)
pod("volume mount of a volume the pod lacks", main(volumeMounts=[{"name": "data", "mountPath": "/data"}]), REFUSE,
    "ValidateVolumeMounts: Not found")
pod("volume mounts of one path twice", {**main(volumeMounts=[{"name": "data", "mountPath": "/data"},
                                                             {"name": "cache", "mountPath": "/data"}]),
                                        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]},
    REFUSE, "ValidateVolumeMounts: must be unique")
for sub_path, ok in (("a/b", True), ("../a", False), ("a/../../b", False), ("/a", False)):
    pod(f"volume mount subPath {sub_path!r}", {**main(volumeMounts=[{"name": "data", "mountPath": "/d",
                                                                     "subPath": sub_path}]),
                                               "volumes": [{"name": "data", "emptyDir": {}}]},
        ACCEPT if ok else REFUSE, "" if ok else "validateLocalDescendingPath")
_SPREAD = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
pod("topology spread", {"topologySpreadConstraints": [_SPREAD]}, ACCEPT)
pod("topology spread key with two slashes", {"topologySpreadConstraints": [{**_SPREAD, "topologyKey": "a/b/c"}]},
    ACCEPT)
pod("topology spread key empty", {"topologySpreadConstraints": [{**_SPREAD, "topologyKey": ""}]}, REFUSE,
    "ValidateTopologyKey: can not be empty")
pod("topology spread maxSkew 0", {"topologySpreadConstraints": [{**_SPREAD, "maxSkew": 0}]}, REFUSE,
    "ValidateMaxSkew: must be greater than zero")
pod("topology spread whenUnsatisfiable Never", {"topologySpreadConstraints": [{**_SPREAD, "whenUnsatisfiable": "Never"}]},
    REFUSE, "ValidateWhenUnsatisfiable: Unsupported value")
pod("topology spread twice", {"topologySpreadConstraints": [_SPREAD, {**_SPREAD, "maxSkew": 2}]}, REFUSE,
    "ValidateSpreadConstraintNotRepeat: Duplicate value")
pod("topology spread minDomains with ScheduleAnyway", {"topologySpreadConstraints": [
    {**_SPREAD, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}]}, REFUSE,
    "validateMinDomains: only with DoNotSchedule")
pod("topology spread minDomains 0", {"topologySpreadConstraints": [{**_SPREAD, "minDomains": 0}]}, REFUSE,
    "validateMinDomains: must be greater than 0")
pod("hostPort twice", main(ports=[{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8080}]),
    REFUSE, "checkHostPortConflicts: Duplicate value")
pod("hostPort twice, TCP and UDP", main(ports=[{"containerPort": 80, "hostPort": 8080},
                                               {"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]), ACCEPT)
pod("hostPort twice across containers", {"containers": [
    {"name": MAIN, "ports": [{"containerPort": 80, "hostPort": 8080}]},
    {"name": "side", "image": "busybox", "ports": [{"containerPort": 81, "hostPort": 8080, "protocol": "TCP"}]}]},
    REFUSE, "checkHostPortConflicts: Duplicate value")
pod("annotation key with two slashes", {}, REFUSE, "ValidateAnnotations: IsQualifiedName",
    metadata={"annotations": {"a/b/c": "x"}})
pod("annotation key upper case", {}, ACCEPT, metadata={"annotations": {"Example.com/A_b": "x"}})
pod("annotation key 64 characters", {}, REFUSE, "ValidateAnnotations: IsQualifiedName",
    metadata={"annotations": {"a" * 64: "x"}})
pod("annotations above 256 KiB", {}, REFUSE, "ValidateAnnotations: TotalAnnotationSizeLimitB",
    metadata={"annotations": {"a": "x" * (256 * 1024)}})
pod("pod securityContext runAsUser -1", {"securityContext": {"runAsUser": -1}}, REFUSE,
    "validatePodSpecSecurityContext: IsValidUserID")
pod("pod securityContext fsGroup -1", {"securityContext": {"fsGroup": -1}}, REFUSE,
    "validatePodSpecSecurityContext: IsValidGroupID")
pod("pod securityContext supplementalGroups -1", {"securityContext": {"supplementalGroups": [1, -1]}}, REFUSE,
    "validatePodSpecSecurityContext: IsValidGroupID")
pod("pod securityContext fsGroupChangePolicy always", {"securityContext": {"fsGroupChangePolicy": "always"}}, REFUSE,
    "validateFSGroupChangePolicy: Unsupported value")
pod("pod securityContext ids", {"securityContext": {"runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [0]}},
    ACCEPT)
pod("sysctl net.ipv4.ip_forward", {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}]}},
    ACCEPT)
pod("sysctl with slashes", {"securityContext": {"sysctls": [{"name": "net/ipv4/ip_forward", "value": "1"}]}}, ACCEPT)
pod("sysctl name with a space", {"securityContext": {"sysctls": [{"name": "bad name", "value": "1"}]}}, REFUSE,
    "validateSysctls: IsValidSysctlName")
pod("sysctl twice", {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"},
                                                     {"name": "net.ipv4.ip_forward", "value": "0"}]}}, REFUSE,
    "validateSysctls: Duplicate value")
pod("hostAliases", {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db.local"]}, {"ip": "::1"}]}, ACCEPT)
pod("hostAliases ip not an IP", {"hostAliases": [{"ip": "not-an-ip"}]}, REFUSE, "ValidateHostAliases: IsValidIP")
pod("hostAliases host name upper case", {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["DB"]}]}, REFUSE,
    "ValidateHostAliases: ValidateDNS1123Subdomain")
pod("securityContext runAsUser 0", main(securityContext={"runAsUser": 0}), ACCEPT)
pod("securityContext runAsUser -1", main(securityContext={"runAsUser": -1}), REFUSE,
    "ValidateSecurityContext: IsValidUserID")
pod("securityContext runAsGroup -1", main(securityContext={"runAsGroup": -1}), REFUSE,
    "ValidateSecurityContext: IsValidGroupID")
pod("securityContext procMount default", main(securityContext={"procMount": "default"}), REFUSE,
    "ValidateProcMountType: Unsupported value")
pod("securityContext procMount Unmasked, host users", main(securityContext={"procMount": "Unmasked"}), REFUSE,
    "ValidateSecurityContext: Unmasked needs hostUsers false")
for policy, ok in (("Always", True), ("IfNotPresent", True), ("Never", True), ("always", False),
                   ("IfNotPresents", False), ("Sometimes", False)):
    pod(f"imagePullPolicy {policy!r}", main(imagePullPolicy=policy), ACCEPT if ok else REFUSE,
        "" if ok else "validatePullPolicy: Unsupported value")
for policy, ok in (("File", True), ("FallbackToLogsOnError", True), ("file", False)):
    pod(f"terminationMessagePolicy {policy!r}", main(terminationMessagePolicy=policy), ACCEPT if ok else REFUSE,
        "" if ok else "validateContainerCommon: Unsupported value")
pod("init container restartPolicy Always (a sidecar)",
    {"initContainers": [{"name": "proxy", "image": "busybox", "restartPolicy": "Always"}]}, ACCEPT)
pod("init container restartPolicy Sometimes",
    {"initContainers": [{"name": "proxy", "image": "busybox", "restartPolicy": "Sometimes"}]}, REFUSE,
    "validateInitContainers: Unsupported value")

pod("enums left empty are defaulted, not refused",
    {"restartPolicy": "", "dnsPolicy": "",
     "containers": [{"name": MAIN, "imagePullPolicy": "", "terminationMessagePolicy": "",
                     "ports": [{"containerPort": 80, "protocol": ""}],
                     "readinessProbe": {"httpGet": {"port": 80, "scheme": ""}}}],
     "initContainers": [{"name": "init", "image": "busybox"}]}, ACCEPT)
pod("container restartPolicy empty (a set field is not defaulted)", main(restartPolicy=""), REFUSE,
    "validateContainerRestartPolicy: Unsupported value")
pod("init container restartPolicy empty", {"initContainers": [{"name": "i", "image": "busybox", "restartPolicy": ""}]},
    REFUSE, "validateContainerRestartPolicy: Unsupported value")
for policy in ("Never", "OnFailure", "Always"):
    pod(f"container restartPolicy {policy}", main(restartPolicy=policy), ACCEPT)
    pod(f"init container restartPolicy {policy}",
        {"initContainers": [{"name": "i", "image": "busybox", "restartPolicy": policy}]}, ACCEPT)
pod("init container restartPolicy Never with a probe",
    {"initContainers": [{"name": "i", "image": "busybox", "restartPolicy": "Never", "readinessProbe": EXEC}]}, REFUSE,
    "validateInitContainers: may not be set for init containers without restartPolicy=Always")

# -- pod-level enums and numbers (ValidatePodSpec) ----------------------------------------------------------------

for policy, ok in (("Never", True), ("OnFailure", True), ("Always", True), ("never", False), ("Sometimes", False)):
    pod(f"restartPolicy {policy!r}", {"restartPolicy": policy}, ACCEPT if ok else REFUSE,
        "" if ok else "validateRestartPolicy: Unsupported value")
for policy, ok in (("ClusterFirst", True), ("Default", True), ("ClusterFirstWithHostNet", True),
                   ("clusterfirst", False), ("Cluster", False)):
    pod(f"dnsPolicy {policy!r}", {"dnsPolicy": policy}, ACCEPT if ok else REFUSE,
        "" if ok else "validateDNSPolicy: Unsupported value")
pod("dnsPolicy None without nameservers", {"dnsPolicy": "None"}, REFUSE,
    "validatePodDNSConfig: must provide at least one DNS nameserver")
pod("dnsPolicy None with a nameserver", {"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"]}}, ACCEPT)
pod("activeDeadlineSeconds 3600", {"activeDeadlineSeconds": 3600}, ACCEPT)
pod("activeDeadlineSeconds 0", {"activeDeadlineSeconds": 0}, REFUSE, "ValidatePodSpec: must be between 1 and 2147483647")
pod("schedulerName my-scheduler", {"schedulerName": "my-scheduler"}, ACCEPT)
pod("schedulerName My_Scheduler (not validated)", {"schedulerName": "My_Scheduler"}, ACCEPT)
pod("overhead without a RuntimeClass", {"overhead": {"cpu": "1"}}, REFUSE,
    "RuntimeClass admission: Pod Overhead set without corresponding RuntimeClass defined Overhead")
pod("pod-level resources cpu", {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}, ACCEPT)
pod("pod-level resources nvidia.com/gpu", {"resources": {"limits": {"nvidia.com/gpu": "1"}}}, REFUSE,
    "validatePodResourceRequirements: supported values cpu, hugepages-, memory")
pod("imagePullSecrets null entry (accepted)", {"imagePullSecrets": [None]}, ACCEPT)
pod("kubernetes.io/ prefixed resource, a fraction", main({"limits": {"kubernetes.io/foo": "0.5"}}), ACCEPT)
pod("terminationGracePeriodSeconds -1 (made 1)", {"terminationGracePeriodSeconds": -1}, ACCEPT)
pod("memory 1.5 bytes", main({"requests": {"memory": "1.5"}}), ACCEPT)
pod("nodeSelector good", {"nodeSelector": {"nvidia.com/gpu.product": "A100-SXM4-80GB"}}, ACCEPT)
pod("nodeSelector bad value", {"nodeSelector": {"gpu": "a100 80gb"}}, REFUSE, "ValidateNodeSelector: IsValidLabelValue")
pod("nodeSelector bad key", {"nodeSelector": {"gpu type": "a100"}}, REFUSE, "ValidateNodeSelector: IsQualifiedName")
pod("labels good", {}, ACCEPT, metadata={"labels": {"team": "vision", "example.com/cost-center": "42"}})
pod("labels bad key", {}, REFUSE, "ValidateLabels: IsQualifiedName", metadata={"labels": {"cost center": "42"}})
pod("labels bad value", {}, REFUSE, "ValidateLabels: IsValidLabelValue", metadata={"labels": {"team": "vision team"}})
pod("volumes null entry", {"volumes": [None]}, REFUSE, "validateVolumes: name Required")
pod("volumes emptyDir", {"volumes": [{"name": "scratch", "emptyDir": {}}],
                         "containers": [{"name": MAIN, "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}]},
    ACCEPT)

# -- environment variables (validateEnv, validateEnvVarValueFrom) --------------------------------------------------

for name, ok in (("MY_VAR", True), ("my.var", True), ("MY-VAR", True), ("1VAR", True), ("A=B", False), ("", False),
                 ("tab\tname", False), ("caf\u00e9", False), ("A B", True)):
    pod(f"env name {name!r}", main(env=[{"name": name, "value": "x"}]), ACCEPT if ok else REFUSE,
        "" if ok else "validateEnv: IsRelaxedEnvVarName (printable ASCII except '=')")
pod("env valueFrom fieldRef", main(env=[{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
    ACCEPT)
pod("env value and valueFrom", main(env=[{"name": "POD", "value": "x",
                                          "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]), REFUSE,
    "validateEnvVarValueFrom: may not be specified when value is not empty")
pod("env valueFrom empty", main(env=[{"name": "POD", "valueFrom": {}}]), REFUSE,
    "validateEnvVarValueFrom: must specify one of fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef")
pod("env valueFrom two sources", main(env=[{"name": "K", "valueFrom": {
    "configMapKeyRef": {"name": "c", "key": "k"}, "secretKeyRef": {"name": "s", "key": "k"}}}]), REFUSE,
    "validateEnvVarValueFrom: may not have more than one field specified at a time")
pod("env null entry", main(env=[None]), REFUSE, "validateEnv: name Required")

# -- ports (validateContainerPorts) -------------------------------------------------------------------------------

for port, ok in ((8080, True), (1, True), (65535, True), (0, False), (65536, False), (-1, False), (70000, False)):
    pod(f"containerPort {port}", main(ports=[{"containerPort": port}]), ACCEPT if ok else REFUSE,
        "" if ok else "validateContainerPorts: must be between 1 and 65535")
for protocol, ok in (("TCP", True), ("UDP", True), ("SCTP", True), ("tcp", False), ("HTTP", False)):
    pod(f"port protocol {protocol!r}", main(ports=[{"containerPort": 80, "protocol": protocol}]), ACCEPT if ok else REFUSE,
        "" if ok else "validateContainerPorts: Unsupported value")
for name, ok in (("http", True), ("metrics-1", True), ("HTTP", False), ("my_port", False), ("a-very-long-name-16", False),
                 ("1234", False), ("a--b", False), ("-http", False)):
    pod(f"port name {name!r}", main(ports=[{"containerPort": 80, "name": name}]), ACCEPT if ok else REFUSE,
        "" if ok else "validateContainerPorts: IsValidPortName")
pod("port names duplicate", main(ports=[{"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}]),
    REFUSE, "validateContainerPorts: Duplicate value")
pod("hostPort 70000", main(ports=[{"containerPort": 80, "hostPort": 70000}]), REFUSE,
    "validateContainerPorts: must be between 1 and 65535")
pod("hostPort 8080", main(ports=[{"containerPort": 8080, "hostPort": 8080}]), ACCEPT)

# -- probes and lifecycle handlers (validateProbe, validateHandler, validateLifecycle) -----------------------------

pod("probe liveness exec", main(livenessProbe=EXEC), ACCEPT)
pod("probe readiness httpGet port 8080", main(readinessProbe={"httpGet": {"path": "/", "port": 8080}}), ACCEPT)
pod("probe readiness httpGet named port", main(readinessProbe={"httpGet": {"path": "/", "port": "http"}}), ACCEPT)
pod("probe tcpSocket", main(startupProbe={"tcpSocket": {"port": 22}}), ACCEPT)
pod("probe grpc", main(livenessProbe={"grpc": {"port": 9090}}), ACCEPT)
pod("probe without a handler", main(livenessProbe={"periodSeconds": 5}), REFUSE,
    "validateHandler: must specify a handler type")
pod("probe with two handlers", main(livenessProbe={**EXEC, "tcpSocket": {"port": 22}}), REFUSE,
    "validateHandler: may not specify more than 1 handler type")
pod("probe exec without command", main(livenessProbe={"exec": {}}), REFUSE, "validateExecAction: command Required")
pod("probe httpGet port 0", main(readinessProbe={"httpGet": {"port": 0}}), REFUSE, "ValidatePortNumOrName")
pod("probe httpGet port '8080' as a string", main(readinessProbe={"httpGet": {"port": "8080"}}), REFUSE,
    "ValidatePortNumOrName: IsValidPortName (a letter)")
pod("probe httpGet scheme http", main(readinessProbe={"httpGet": {"port": 80, "scheme": "http"}}), REFUSE,
    "validateHTTPGetAction: Unsupported value")
pod("probe liveness successThreshold 2", main(livenessProbe={**EXEC, "successThreshold": 2}), REFUSE,
    "validateContainers: successThreshold must be 1")
pod("probe readiness successThreshold 2", main(readinessProbe={**EXEC, "successThreshold": 2}), ACCEPT)
pod("probe negative periodSeconds", main(livenessProbe={**EXEC, "periodSeconds": -1}), REFUSE,
    "validateProbe: must be greater than or equal to 0")
pod("probe negative timeoutSeconds", main(readinessProbe={**EXEC, "timeoutSeconds": -5}), REFUSE,
    "validateProbe: must be greater than or equal to 0")
pod("probe on an init container", {"initContainers": [{"name": "i", "image": "busybox", "readinessProbe": EXEC}]}, REFUSE,
    "validateInitContainers: may not be set for init containers")
pod("lifecycle preStop sleep", main(lifecycle={"preStop": {"sleep": {"seconds": 5}}}), ACCEPT)
pod("lifecycle preStop without a handler", main(lifecycle={"preStop": {}}), REFUSE,
    "validateLifecycleHandler: must specify a handler type")

# -- chart values: the objects the chart renders, the master's start-up ---------------------------------------------

for request, limit, ok in (("2", "4", True), ("4", "1", False), ("2", "2", True), ("2500m", "2", False),
                           ("1", "1500m", True)):
    chart(f"masterCpuRequest {request} limit {limit}", {"masterCpuRequest": request, "masterCpuLimit": limit},
          ACCEPT if ok else REFUSE, "" if ok else "ValidateResourceRequirements (the master Deployment's container)")
for request, limit, ok in (("8Gi", "16Gi", True), ("8Gi", "4Gi", False), ("8G", "8Gi", True), ("9Gi", "9G", False)):
    chart(f"masterMemRequest {request} limit {limit}", {"masterMemRequest": request, "masterMemLimit": limit},
          ACCEPT if ok else REFUSE, "" if ok else "ValidateResourceRequirements (the master Deployment's container)")
chart("masterCpuRequest above the default request, no limit", {"masterCpuRequest": "16"}, ACCEPT)
chart("db cpu request above its limit", {"db": {"cpuRequest": "4", "cpuLimit": "2"}}, REFUSE,
      "ValidateResourceRequirements (the database Deployment's container)")
chart("db memory request above its limit", {"db": {"memRequest": "8Gi", "memLimit": "1Gi"}}, REFUSE,
      "ValidateResourceRequirements (the database Deployment's container)")
chart("db request above limit with an external database (no database deployed)",
      {"db": {"hostAddress": "pg.example.com", "cpuRequest": "4", "cpuLimit": "2"}}, ACCEPT)
for size, ok in (("30Gi", True), ("1Gi", True), ("0", False), ("0Gi", False), ("-1Gi", False), ("30GB", False),
                 ("100G", True)):
    chart(f"db.storageSize {size!r}", {"db": {"storageSize": size}}, ACCEPT if ok else REFUSE,
          "" if ok else "ValidatePersistentVolumeClaimSpec: must be greater than zero / ParseQuantity")
chart("db.storageSize 0 without a volume", {"db": {"storageSize": "0", "disablePVC": True}}, ACCEPT)
for name, value, ok in (("masterMemRequest", "8GB", False), ("masterCpuRequest", "2 cores", False),
                        ("masterCpuRequest", "500m", True), ("masterMemRequest", "8 GiB", False),
                        ("db.memRequest", "1GB", False), ("db.cpuRequest", "abc", False)):
    values: dict[str, Any] = {name: value} if "." not in name else {"db": {name.split(".")[1]: value}}
    chart(f"{name} {value!r}", values, ACCEPT if ok else REFUSE, "" if ok else "resource.ParseQuantity")
for pools, ok, why in (
        ([{"pool_name": "default"}], True, ""),
        ([{"pool_name": "a"}, {"pool_name": "b"}], True, ""),
        ([None, {"pool_name": "a"}, 5], False, "ResourcePoolConfig: entries must be mappings"),
        ([{"pool_name": "a"}, {"pool_name": "a"}], False, "ResourceConfig.Validate: duplicate name"),
        ([{"pool_name": ""}], False, "ResourcePoolConfig.Validate: resource pool name cannot be empty"),
        ([{"description": "no name"}], False, "ResourcePoolConfig.Validate: resource pool name cannot be empty"),
        ([None, None, {"pool_name": "y"}], False, "--set resourcePools[2].pool_name=y: null entries"),
        ([{"pool_name": "gpu", "description": "A100s"}], True, "")):
    chart(f"resourcePools {pools!r}", {"resourcePools": pools}, ACCEPT if ok else REFUSE, why)
chart("initialUserPassword missing on 0.38.1 (a fresh install)", {"initialUserPassword": None}, REFUSE,
      "the 0.31+ chart refuses a fresh install without an initial password")
chart("initialUserPassword missing on 0.30.0", {"initialUserPassword": None, "appVersion": "0.30.0"}, ACCEPT)
chart("cpuPodSpec with a toleration typo", {"taskContainerDefaults": {"cpuPodSpec": {"spec": {"tolerations": [
    {"key": "a", "operator": "Equals"}]}}}}, REFUSE, "validateTolerations (every CPU task pod)")
chart("gpuPodSpec with 64GB", {"taskContainerDefaults": {"gpuPodSpec": {"spec": {"containers": [
    {"name": MAIN, "resources": {"requests": {"memory": "64GB"}}}]}}}}, REFUSE, "ParseQuantity (every GPU task pod)")
chart("gpuPodSpec with 64G", {"taskContainerDefaults": {"gpuPodSpec": {"spec": {"containers": [
    {"name": MAIN, "resources": {"requests": {"memory": "64G"}}}]}}}}, ACCEPT)


# -- helpers -------------------------------------------------------------------------------------------------------


def as_pod(case: Case, name: str = "corpus") -> dict[str, Any]:
    """The complete Pod Determined's master would create from a `podspec` case: its spec merged into a minimal valid
    pod (main container `determined-container` with an image, restartPolicy Never unless the spec says otherwise).
    The user's `determined-container` entry is merged into the main container; other containers and null entries are
    passed on as they are, so the API server sees exactly what the spec holds."""
    if case["kind"] != "podspec":
        raise ValueError(f"{case['name']}: not a podspec case")
    value = copy.deepcopy(case["value"])
    spec = dict(value.get("spec") or {})
    metadata = {"name": name, **(value.get("metadata") or {})}
    metadata["name"] = name
    main_container: dict[str, Any] = {"name": MAIN, "image": IMAGE}
    containers: list[Any] = []
    merged = False
    for container in spec.pop("containers", None) or []:
        if isinstance(container, dict) and container.get("name") == MAIN and not merged:
            main_container = {**main_container, **container}
            main_container.setdefault("image", IMAGE)
            containers.append(main_container)
            merged = True
        else:
            containers.append(container)
    if not merged:
        containers.insert(0, main_container)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"restartPolicy": "Never", **spec, "containers": containers}}


def as_settings(case: Case) -> dict[str, Any]:
    """The settings values of a `chart` case: CHART_BASE with the case's values over it (None deletes a key)."""
    if case["kind"] != "chart":
        raise ValueError(f"{case['name']}: not a chart case")
    values = copy.deepcopy(CHART_BASE)
    for key, item in case["value"].items():
        if item is None:
            values.pop(key, None)
        else:
            values[key] = copy.deepcopy(item)
    return values


def podspec_cases() -> list[Case]:
    return [c for c in CASES if c["kind"] == "podspec"]


def chart_cases() -> list[Case]:
    return [c for c in CASES if c["kind"] == "chart"]
