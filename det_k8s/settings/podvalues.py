"""The values inside a pod spec, checked as the Kubernetes API server checks them.

`podspec.py` checks a pod spec's structure against the OpenAPI schema (field names and types); the
schema says nothing of values: `operator: Equals`, `memory: 64GB`, a request above its limit, two
containers of one name all pass it, are written into the master configuration, and every task pod
is then refused. No maintained Python implementation of the API server's validation exists
(`kubernetes-validate` checks the OpenAPI structure only), so det-k8s writes these rules itself, each
naming the function of Kubernetes' `pkg/apis/core/validation/validation.go` (or of
`k8s.io/apimachinery/pkg/util/validation`) it mirrors, as of Kubernetes 1.37.

Determined merges a pod spec into its own task pod: the container named `determined-container` is
merged into the master's main container (which brings the image), every other container is passed on
as it is. So a pod spec may leave out `containers` and the image of `determined-container`, nothing
else. Values of environment variables are never echoed (they may be secrets); quantities and enums
are.

Pure: data in, findings out (paths relative to the pod spec document).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..names import is_dns_label, is_dns_subdomain, is_label_key, is_label_value
from ..quantity import QuantityError, parse_quantity

MAIN_CONTAINER = "determined-container"  # Determined's model.DeterminedK8ContainerName
NEWEST = (1, 37)

Where = tuple[str | int, ...]


@dataclass(frozen=True)
class Finding:
    path: Where
    message: str
    hint: str | None = None


class _Out:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, path: Where, message: str, hint: str | None = None) -> None:
        self.findings.append(Finding(path, message, hint))


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:36] + "...'"


def _choose(out: _Out, path: Where, value: Any, choices: Sequence[str], *, empty: bool = False) -> None:
    """An enum field, as the API server's `field.NotSupported` checks it, after defaulting: an empty one is unset
    (SetDefaults_Container, SetDefaults_PodSpec... fill it in), so it passes."""
    if value is None or value == "" or (isinstance(value, str) and value in choices):
        return
    options = [*choices, "empty"] if empty else list(choices)
    shown = f"{', '.join(options[:-1])} or {options[-1]}" if len(options) > 1 else options[0]
    hint = None
    if isinstance(value, str):
        close = [c for c in choices if c.lower() == value.strip().lower()] or difflib.get_close_matches(
            value, list(choices), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else None
    out.add(path, f"must be {shown}, found {_shown(value)}", hint)


# -- quantities: k8s.io/apimachinery/pkg/api/resource.ParseQuantity --------------------------------------------

_UNIT_TYPOS = {"kb": "k", "mb": "M", "gb": "G", "tb": "T", "pb": "P", "eb": "E", "kib": "Ki", "mib": "Mi",
               "gib": "Gi", "tib": "Ti", "pib": "Pi", "eib": "Ei", "cores": "", "core": "", "cpus": "", "cpu": "",
               "b": "", "bytes": "", "millicores": "m"}
_LOOSE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")


_KUBE_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT_LIMIT = 1000  # beyond it the value is valid but too large to compare (the API server takes up to int32)
UNCOMPARABLE = Fraction(-1, 10**30)  # a valid quantity det-k8s does not compute (e.g. 1e5000)


def quantity(value: Any) -> Fraction | None:
    """The quantity as the API server parses it, else None: resource.ParseQuantity after Quantity.UnmarshalJSON's
    TrimSpace, as permissive as it is (`Gi`, `+`, `.` and `E` alone are 0; digits are optional before a suffix).
    A valid quantity too large to compute is UNCOMPARABLE."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    if isinstance(value, int | float):
        try:
            return parse_quantity(value)
        except QuantityError:
            return None
    text = value.strip()
    match = _KUBE_QUANTITY.fullmatch(text) if text and len(text) <= 128 else None
    if match is None:
        return None
    sign, whole, fraction, suffix = match[1], match[2] or "0", match[3] or "", match[4] or ""
    number = Fraction(int(whole + fraction), 10 ** len(fraction))
    if sign == "-":
        number = -number
    if suffix in _BINARY:
        return number * Fraction(2 ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return number * _pow10(_DECIMAL[suffix])
    if suffix:
        exponent = int(suffix[1:])
        if abs(exponent) >= 2**31:
            return None  # strconv.ParseInt(..., 10, 32) refuses it
        if abs(exponent) > _EXPONENT_LIMIT:
            return UNCOMPARABLE
        return number * _pow10(exponent)
    return number


def _pow10(exponent: int) -> Fraction:
    return Fraction(10**exponent) if exponent >= 0 else Fraction(1, 10**-exponent)


def quantity_hint(value: Any) -> str:
    """What a user most likely meant by a text that is not a quantity (`64GB` -> 64G or 64Gi)."""
    match = _LOOSE.match(value) if isinstance(value, str) else None
    if match is not None:
        number, unit = match[1], match[2]
        fixed = _UNIT_TYPOS.get(unit.lower()) if unit.lower() in _UNIT_TYPOS else (
            unit if unit in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", "m") else None)
        if unit.lower() in ("kb", "mb", "gb", "tb", "pb", "eb"):
            return f"did you mean {number}{fixed} (powers of 10) or {number}{fixed}i (powers of 2)?"
        if fixed is not None:
            return f"did you mean {number}{fixed}?"
    return "a quantity is a number with an optional suffix: 8, 500m, 64G, 16Gi"


# -- resource names: validateContainerResourceName, IsExtendedResourceName, IsHugePageResourceName ----------------

_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_HUGEPAGES = "hugepages-"


def _is_native(name: str) -> bool:
    """helper.IsNativeResource: no prefix, or a kubernetes.io/ one."""
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: not native, and `requests.<name>` a qualified name (quota's form)."""
    return not _is_native(name) and not name.startswith("requests.") and is_label_key(f"requests.{name}")


def _is_hugepages(name: str) -> bool:
    return name.startswith(_HUGEPAGES)


def _overcommit(name: str) -> bool:
    """helper.IsOvercommitAllowed: native resources except huge pages may be requested below their limit."""
    return _is_native(name) and not _is_hugepages(name)


def _resource_name(out: _Out, path: Where, name: str) -> None:
    """validation.go: validateContainerResourceName (with validateResourceName, IsStandardContainerResourceName)."""
    if not is_label_key(name):
        out.add(path, f"{_shown(name)} is not a resource name (a qualified name: [prefix/]name of letters, "
                "digits, '-', '_' and '.')", "e.g. cpu, memory, nvidia.com/gpu")
    elif "/" not in name:
        if name not in _CONTAINER_RESOURCES and not _is_hugepages(name):
            close = difflib.get_close_matches(name.lower(), list(_CONTAINER_RESOURCES), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else (
                "GPUs are an extended resource: nvidia.com/gpu or amd.com/gpu" if "gpu" in name.lower() else
                "a device is an extended resource with its vendor's prefix, e.g. nvidia.com/gpu")
            out.add(path, f"{_shown(name)} is not a resource a container can request (cpu, memory, "
                    "ephemeral-storage, hugepages-<size>, or prefix/name)", hint)
    elif not _is_native(name) and not _is_extended(name):
        out.add(path, f"{_shown(name)} does not follow the extended resource name standard")


def _hugepage_size(name: str) -> Fraction | None:
    return quantity(name[len(_HUGEPAGES):])


def _resource_list(out: _Out, path: Where, resources: Any) -> dict[str, Fraction]:
    """Each name and quantity of a ResourceList: ValidateResourceQuantityValue (non-negative; an integer for
    extended resources) and validateResourceQuantityHugePageValue. Returns the valid entries."""
    parsed: dict[str, Fraction] = {}
    if not isinstance(resources, Mapping):
        return parsed
    for name, value in resources.items():
        where = (*path, name)
        if not isinstance(name, str):
            continue
        _resource_name(out, where, name)
        amount = quantity(value)
        if amount is None:
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                out.add(where, f"{_shown(value)} is not a Kubernetes quantity", quantity_hint(value))
            continue  # another type: the schema check reports it
        if amount is UNCOMPARABLE:
            continue
        if amount < 0:
            out.add(where, f"must be greater than or equal to 0, found {_shown(value)}")
            continue
        if _is_extended(name) and amount.denominator != 1:
            out.add(where, f"must be an integer, found {_shown(value)} ({name} is counted in whole devices)")
            continue
        if _is_hugepages(name):
            size = _hugepage_size(name)
            if size is None or size <= 0 or (amount / size).denominator != 1:
                out.add(where, f"{_shown(value)} is not a positive integer multiple of {name}")
                continue
        parsed[name] = amount
    return parsed


def resource_requirements(out: _Out, path: Where, resources: Any, *, pod_level: bool = False) -> None:
    """validation.go: ValidateResourceRequirements, after SetDefaults_Pod copied limits into unset requests."""
    if not isinstance(resources, Mapping):
        return
    limits = _resource_list(out, (*path, "limits"), resources.get("limits"))
    requests = _resource_list(out, (*path, "requests"), resources.get("requests"))
    given = resources.get("limits")
    raw_limits: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    for name, amount in requests.items():
        if name in limits:
            limit = limits[name]
            if amount != limit and not _overcommit(name):
                out.add((*path, "requests", name), f"must be equal to {name} limit of {_shown(raw_limits[name])} "
                        f"({name} cannot be overcommitted)", "give the same value in requests and limits, or only "
                        "limits (the request defaults to it)")
            elif amount > limit:
                out.add((*path, "requests", name), f"must be less than or equal to {name} limit of "
                        f"{_shown(raw_limits[name])}", f"raise limits.{name} or lower requests.{name}")
        elif name not in raw_limits and not _overcommit(name):
            out.add((*path, "limits", name), f"required: a limit must be set for {name}, which cannot be "
                    "overcommitted", f"set limits.{name} (the request defaults to it)")
    names = set(limits) | set(requests)
    if any(_is_hugepages(n) for n in names) and not names & {"cpu", "memory"}:
        out.add(path, "huge pages require a cpu or memory request or limit")
    if pod_level:  # validation.go: validatePodResourceRequirements (pod-level resources)
        for kind in ("requests", "limits"):
            for name in resources.get(kind) or {} if isinstance(resources.get(kind), Mapping) else {}:
                if isinstance(name, str) and name not in ("cpu", "memory") and not _is_hugepages(name):
                    out.add((*path, kind, name), f"{_shown(name)} is not supported at the pod level "
                            "(only cpu, memory and hugepages-<size>)", "move it into the container's resources")


# -- tolerations: validation.go validateTolerations, validateTaintEffect --------------------------------------

TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def tolerations(out: _Out, path: Where, items: Any) -> None:
    for index, item in enumerate(items if isinstance(items, list) else ()):
        where = (*path, index)
        if not isinstance(item, Mapping):
            continue  # null: reported by _nulls; another type by the schema
        key, operator, value = item.get("key") or "", item.get("operator") or "", item.get("value") or ""
        effect = item.get("effect") or ""
        if isinstance(key, str) and key and not is_label_key(key):
            out.add((*where, "key"), f"{_shown(key)} is not a valid taint key (a qualified name: [prefix/]name)")
        if not isinstance(operator, str):
            continue
        if operator not in ("", *TOLERATION_OPERATORS):
            _choose(out, (*where, "operator"), operator, TOLERATION_OPERATORS)
        elif key == "" and operator != "Exists":
            out.add((*where, "operator"), "must be Exists when key is empty (a toleration without a key tolerates "
                    "every taint)", "set operator: Exists, or give the taint's key")
        elif operator == "Exists" and value != "":
            out.add((*where, "value"), "must be empty when operator is Exists",
                    "use operator: Equal to match this value, or remove value")
        elif operator in ("", "Equal") and isinstance(value, str) and not is_label_value(value):
            out.add((*where, "value"), f"{_shown(value)} is not a valid taint value (at most 63 letters, digits, "
                    "'-', '_' and '.', starting and ending with a letter or digit)")
        if isinstance(effect, str):
            _choose(out, (*where, "effect"), effect, TAINT_EFFECTS, empty=True)
        if item.get("tolerationSeconds") is not None and effect != "NoExecute":
            out.add((*where, "effect"), "must be NoExecute when tolerationSeconds is set",
                    "tolerationSeconds only bounds how long a NoExecute taint is tolerated")


# -- containers: validateContainers, validateInitContainers, validateContainerCommon -----------------------

PULL_POLICIES = ("Always", "IfNotPresent", "Never")
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PROTOCOLS = ("TCP", "UDP", "SCTP")
_STRICT_ENV = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_PORT_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")


def is_port_name(name: str) -> bool:
    """validation.IsValidPortName: an IANA_SVC_NAME, at most 15 characters, a letter, no '--'."""
    return (len(name) <= 15 and _PORT_NAME.fullmatch(name) is not None and "--" not in name
            and re.search("[a-z]", name) is not None)


def _port_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _port_num_or_name(out: _Out, path: Where, value: Any) -> None:
    """validation.go: ValidatePortNumOrName."""
    if value is None:
        out.add(path, "required")
    elif isinstance(value, int) and not isinstance(value, bool):
        if not _port_number(value):
            out.add(path, f"must be between 1 and 65535, found {value}")
    elif isinstance(value, str) and not is_port_name(value):
        hint = "write the number without quotes" if value.isdigit() else None
        out.add(path, f"{_shown(value)} is not a port number or name (an IANA service name: at most 15 lower-case "
                "letters, digits and '-', with a letter)", hint)


def _ports(out: _Out, path: Where, ports: Any) -> None:
    """validation.go: validateContainerPorts."""
    names: set[str] = set()
    for index, port in enumerate(ports if isinstance(ports, list) else ()):
        where = (*path, index)
        if not isinstance(port, Mapping):
            continue
        name = port.get("name")
        if isinstance(name, str) and name:
            if not is_port_name(name):
                out.add((*where, "name"), f"{_shown(name)} is not a port name (an IANA service name: at most 15 "
                        "lower-case letters, digits and '-', with a letter)")
            elif name in names:
                out.add((*where, "name"), f"duplicate port name {_shown(name)} in this container")
            names.add(name)
        number = port.get("containerPort")
        if isinstance(number, int) and not isinstance(number, bool) and not _port_number(number):
            out.add((*where, "containerPort"), f"must be between 1 and 65535, found {number}")
        host = port.get("hostPort")
        if isinstance(host, int) and not isinstance(host, bool) and host != 0 and not _port_number(host):
            out.add((*where, "hostPort"), f"must be between 1 and 65535, found {host}")
        _choose(out, (*where, "protocol"), port.get("protocol"), PROTOCOLS)


def _host_ports(out: _Out, spec: Mapping[str, Any], base: Where) -> None:
    """validation.go: checkHostPortConflicts (AccumulateUniqueHostPorts) over the containers: a host port is taken once
    per protocol (TCP when unset) and host IP (`spec.containers[0].ports[1].hostPort: Duplicate value: "TCP//8080"`)."""
    taken: dict[tuple[str, str, int], Where] = {}
    containers = spec.get("containers")
    for index, container in enumerate(containers if isinstance(containers, list) else ()):
        ports = container.get("ports") if isinstance(container, Mapping) else None
        for number, port in enumerate(ports if isinstance(ports, list) else ()):
            if not isinstance(port, Mapping):
                continue
            host = port.get("hostPort")
            if not isinstance(host, int) or isinstance(host, bool) or host == 0:
                continue
            key = (str(port.get("protocol") or "TCP"), str(port.get("hostIP") or ""), host)
            where = (*base, "containers", index, "ports", number)
            if key in taken:
                out.add((*where, "hostPort"), f"host port {host}/{key[0]} is already taken (also at "
                        f"{_format(taken[key])})", "a host port may be taken once per protocol and host IP")
            else:
                taken[key] = where


def _env(out: _Out, path: Where, env: Any, kube: tuple[int, int]) -> None:
    """validation.go: validateEnv (IsRelaxedEnvVarName from 1.32, RelaxedEnvironmentVariableValidation; IsEnvVarName
    before), validateEnvVarValueFrom."""
    for index, var in enumerate(env if isinstance(env, list) else ()):
        where = (*path, index)
        if not isinstance(var, Mapping):
            continue
        name = var.get("name")
        if name in (None, "") and "name" in var:  # left out: the schema check says EnvVar needs it
            out.add((*where, "name"), "required")
        elif isinstance(name, str):
            if kube >= (1, 32):
                if any(ord(c) > 126 or ord(c) < 32 or c == "=" for c in name):
                    out.add((*where, "name"), f"{_shown(name)} is not a valid environment variable name (printable "
                            "ASCII characters except '=')")
            elif not _STRICT_ENV.fullmatch(name):
                out.add((*where, "name"), f"{_shown(name)} is not a valid environment variable name (letters, digits, "
                        "'_', '-' and '.', not starting with a digit)")
        source = var.get("valueFrom")
        if isinstance(source, Mapping):
            count = sum(1 for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
                        if source.get(k) is not None)
            if count == 0:
                out.add((*where, "valueFrom"), "must specify one of fieldRef, resourceFieldRef, configMapKeyRef or "
                        "secretKeyRef")
            elif count > 1:
                out.add((*where, "valueFrom"), "may not have more than one field specified at a time")
            elif var.get("value") not in (None, ""):
                out.add((*where, "valueFrom"), "may not be specified when value is not empty",
                        "give value or valueFrom, not both")


_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")


def _handler(out: _Out, path: Where, handler: Mapping[str, Any], kinds: Sequence[str]) -> None:
    """validation.go: validateHandler / validateLifecycleHandler: exactly one handler, each valid."""
    given = [k for k in kinds if handler.get(k) is not None]
    if not given:
        out.add(path, f"must specify a handler type ({', '.join(kinds)})")
    elif len(given) > 1:
        out.add(path, f"may not specify more than 1 handler type, found {' and '.join(given)}")
    exec_ = handler.get("exec")
    if isinstance(exec_, Mapping) and not exec_.get("command"):
        out.add((*path, "exec", "command"), "required")
    for kind in ("httpGet", "tcpSocket"):
        action = handler.get(kind)
        if isinstance(action, Mapping) and "port" in action:  # left out: the schema check says so
            _port_num_or_name(out, (*path, kind, "port"), action.get("port"))
    http = handler.get("httpGet")
    if isinstance(http, Mapping):
        _choose(out, (*path, "httpGet", "scheme"), http.get("scheme"), ("HTTP", "HTTPS"))
    grpc = handler.get("grpc")
    if isinstance(grpc, Mapping) and not _port_number(grpc.get("port")):
        out.add((*path, "grpc", "port"), f"must be between 1 and 65535, found {_shown(grpc.get('port'))}")


def _probe(out: _Out, path: Where, probe: Any, *, liveness: bool) -> None:
    """validation.go: validateProbe (and validateContainers' successThreshold of liveness and startup probes)."""
    if not isinstance(probe, Mapping):
        return
    _handler(out, path, probe, _PROBE_HANDLERS)
    for name in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        value = probe.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            out.add((*path, name), f"must be greater than or equal to 0, found {value}")
    grace = probe.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and not isinstance(grace, bool) and grace <= 0:
        out.add((*path, "terminationGracePeriodSeconds"), f"must be greater than 0, found {grace}")
    threshold = probe.get("successThreshold")
    if liveness and isinstance(threshold, int) and not isinstance(threshold, bool) and threshold not in (0, 1):
        out.add((*path, "successThreshold"), f"must be 1 for liveness and startup probes, found {threshold}")


_PROC_MOUNTS = ("Default", "Unmasked")
_MAX_ID = 2**31 - 1


def _security(out: _Out, path: Where, context: Any, host_users: Any, kube: tuple[int, int]) -> None:
    """validation.go: ValidateSecurityContext: runAsUser and runAsGroup 0 to 2147483647 (IsValidUserID,
    IsValidGroupID), procMount Default or Unmasked (Unmasked only with hostUsers: false), allowPrivilegeEscalation
    false neither with privileged nor with capability CAP_SYS_ADMIN. Before 1.33 the ProcMountType gate is off by
    default (kube_features.go: beta, default true from 1.33), and the API server drops procMount before it validates
    (pod/util.go: dropDisabledProcMountField): any value passes there."""
    if not isinstance(context, Mapping):
        return
    for field in ("runAsUser", "runAsGroup"):
        value = context.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= _MAX_ID:
            out.add((*path, field), f"must be between 0 and {_MAX_ID}, found {value}")
    proc = context.get("procMount") if kube >= (1, 33) else None
    if proc == "":
        out.add((*path, "procMount"), "must be Default or Unmasked, found ''")
    else:
        _choose(out, (*path, "procMount"), proc, _PROC_MOUNTS)
    if proc == "Unmasked" and host_users is not False:
        out.add((*path, "procMount"), "Unmasked needs the pod's hostUsers: false (a user namespace)")
    if context.get("allowPrivilegeEscalation") is False:
        if context.get("privileged") is True:
            out.add((*path, "allowPrivilegeEscalation"), "cannot be false with privileged: true")
        capabilities = context.get("capabilities")
        added = capabilities.get("add") if isinstance(capabilities, Mapping) else None
        if isinstance(added, list) and "CAP_SYS_ADMIN" in added:
            out.add((*path, "allowPrivilegeEscalation"), "cannot be false with capability CAP_SYS_ADMIN added")


def _host_aliases(out: _Out, path: Where, aliases: Any) -> None:
    """validation.go: ValidateHostAliases: an IP address (IsValidIPForLegacyField), host names DNS-1123 subdomains."""
    for index, alias in enumerate(aliases if isinstance(aliases, list) else ()):
        if not isinstance(alias, Mapping):
            continue
        ip = alias.get("ip")
        if isinstance(ip, str):
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                out.add((*path, index, "ip"), f"{_shown(ip)} is not an IP address (e.g. 10.9.8.7 or 2001:db8::ffff)")
        names = alias.get("hostnames")
        for number, name in enumerate(names if isinstance(names, list) else ()):
            if isinstance(name, str) and not is_dns_subdomain(name):
                out.add((*path, index, "hostnames", number), f"{_shown(name)} is not a host name (a DNS-1123 "
                        "subdomain: lower-case letters, digits, '-' and '.')")


_SYSCTL = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
_FS_GROUP_POLICIES = ("OnRootMismatch", "Always")


def _pod_security(out: _Out, path: Where, context: Any) -> None:
    """validation.go: validatePodSpecSecurityContext: runAsUser, runAsGroup, fsGroup and supplementalGroups 0 to
    2147483647, fsGroupChangePolicy Always or OnRootMismatch, sysctls named (IsValidSysctlName) once each."""
    if not isinstance(context, Mapping):
        return
    for field in ("runAsUser", "runAsGroup", "fsGroup"):
        value = context.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= _MAX_ID:
            out.add((*path, field), f"must be between 0 and {_MAX_ID}, found {value}")
    groups = context.get("supplementalGroups")
    for index, value in enumerate(groups if isinstance(groups, list) else ()):
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= _MAX_ID:
            out.add((*path, "supplementalGroups", index), f"must be between 0 and {_MAX_ID}, found {value}")
    policy = context.get("fsGroupChangePolicy")
    if policy == "":
        out.add((*path, "fsGroupChangePolicy"), "must be OnRootMismatch or Always, found ''")
    else:
        _choose(out, (*path, "fsGroupChangePolicy"), policy, _FS_GROUP_POLICIES)
    sysctls = context.get("sysctls")
    names: set[str] = set()
    for index, sysctl in enumerate(sysctls if isinstance(sysctls, list) else ()):
        name = sysctl.get("name") if isinstance(sysctl, Mapping) else None
        if not isinstance(name, str):
            continue
        where = (*path, "sysctls", index, "name")
        if not name:
            out.add(where, "required: a sysctl name")
        elif len(name) > 253 or not _SYSCTL.fullmatch(name):
            out.add(where, f"{_shown(name)} is not a sysctl name (e.g. net.ipv4.ip_forward)")
        elif name in names:
            out.add(where, f"duplicate sysctl {_shown(name)}")
        names.add(name)


def _container(out: _Out, path: Where, container: Mapping[str, Any], *, init: bool, kube: tuple[int, int]) -> None:
    """validation.go: validateContainerCommon and what validateContainers/validateInitContainers add."""
    name = container.get("name")
    if name in (None, "") and "name" in container:  # left out: the schema check says the Container needs it
        out.add((*path, "name"), "required", "every container needs a name (a DNS-1123 label, e.g. sidecar)")
    elif isinstance(name, str) and not is_dns_label(name):
        out.add((*path, "name"), f"{_shown(name)} is not a valid container name (a DNS-1123 label: at most 63 "
                "lower-case letters, digits and '-', starting and ending with a letter or digit)")
    if container.get("image") in (None, "") and (init or name != MAIN_CONTAINER):
        out.add((*path, "image"), "required", f"Determined gives its image only to the container named "
                f"{MAIN_CONTAINER}; every other container is passed on as it is")
    _choose(out, (*path, "imagePullPolicy"), container.get("imagePullPolicy"), PULL_POLICIES)
    _choose(out, (*path, "terminationMessagePolicy"), container.get("terminationMessagePolicy"),
            ("File", "FallbackToLogsOnError"))
    resource_requirements(out, (*path, "resources"), container.get("resources"))
    _ports(out, (*path, "ports"), container.get("ports"))
    _env(out, (*path, "env"), container.get("env"), kube)
    sidecar = init and container.get("restartPolicy") == "Always"
    policy = container.get("restartPolicy")  # validateContainerRestartPolicy: a set field is never defaulted
    if policy is not None and kube < CONTAINER_RESTART_RULES:  # before the ContainerRestartRules gate (beta, 1.35)
        if not init:  # validation.go: validateContainerRestartPolicy on a regular container
            out.add((*path, "restartPolicy"), f"may not be set for non-init containers on Kubernetes "
                    f"{kube[0]}.{kube[1]} (per-container restart policies came with 1.35)", "remove it")
        elif policy != "Always":  # an init container: only Always (a sidecar)
            out.add((*path, "restartPolicy"), f"must be Always for an init container on Kubernetes {kube[0]}.{kube[1]}"
                    f" (a sidecar), found {_shown(policy)}", "remove it, or Always for a sidecar")
    elif policy == "":
        out.add((*path, "restartPolicy"), "must be Always, Never or OnFailure, found ''", "remove it, or give one")
    else:
        _choose(out, (*path, "restartPolicy"), policy, RESTART_POLICIES)
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if container.get(probe) is None:
            continue
        if init and not sidecar:
            out.add((*path, probe), "may not be set for init containers without restartPolicy: Always")
            continue
        _probe(out, (*path, probe), container.get(probe), liveness=probe != "readinessProbe")
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, Mapping):
        if init and not sidecar:
            out.add((*path, "lifecycle"), "may not be set for init containers without restartPolicy: Always")
        else:
            for hook in ("postStart", "preStop"):
                if isinstance(lifecycle.get(hook), Mapping):
                    _handler(out, (*path, "lifecycle", hook), lifecycle[hook], _LIFECYCLE_HANDLERS)
    mounts = container.get("volumeMounts")
    for index, mount in enumerate(mounts if isinstance(mounts, list) else ()):
        if isinstance(mount, Mapping):
            for field in ("name", "mountPath"):
                if mount.get(field) in (None, "") and field in mount:  # left out: the schema check says so
                    out.add((*path, "volumeMounts", index, field), "required")


# -- lists with null entries ------------------------------------------------------------------------------------

_OBJECT_LISTS = ("containers", "initContainers", "tolerations", "volumes", "hostAliases",
                 "topologySpreadConstraints", "readinessGates", "resourceClaims")
_CONTAINER_OBJECT_LISTS = ("env", "envFrom", "ports", "volumeMounts", "volumeDevices")


def _nulls(out: _Out, path: Where, items: Any) -> None:
    """A null entry decodes to an empty object, which every list of objects in a Pod refuses (a container without a
    name, a toleration without key and operator...). `--set a.b[1].c=x` leaves such an entry at [0]."""
    for index, item in enumerate(items if isinstance(items, list) else ()):
        if item is None:
            out.add((*path, index), "an empty entry (null): the API server refuses the pod",
                    "remove it, or fill it in (--set ...[N].x=y leaves every entry before N null)")


def _names(out: _Out, spec: Mapping[str, Any], base: Where) -> None:
    """validation.go: validateContainers / validateInitContainers: names unique across containers and init
    containers."""
    seen: dict[str, Where] = {}
    inits = spec.get("initContainers")
    for index, container in enumerate(inits if isinstance(inits, list) else ()):
        if isinstance(container, Mapping) and container.get("name") == MAIN_CONTAINER:
            out.add((*base, "initContainers", index, "name"), f"duplicate container name {MAIN_CONTAINER!r}: "
                    "Determined's main container has it", "give the init container another name")
    for kind in ("initContainers", "containers"):
        items = spec.get(kind)
        for index, container in enumerate(items if isinstance(items, list) else ()):
            name = container.get("name") if isinstance(container, Mapping) else None
            if not isinstance(name, str) or not name or (kind == "initContainers" and name == MAIN_CONTAINER):
                continue
            if name in seen:
                out.add((*base, kind, index, "name"), f"duplicate container name {_shown(name)} (also at "
                        f"{_format(seen[name])})", "container names are unique across containers and initContainers")
            else:
                seen[name] = (kind, index)


def _volumes(out: _Out, path: Where, volumes: Any) -> set[str]:
    """validation.go: ValidateVolumes: a name is required, a DNS-1123 label (ValidateDNS1123Label), and unique
    (`spec.volumes[1].name: Duplicate value`); a volume with an error of its own is not counted among the names."""
    seen: dict[str, int] = {}
    for index, volume in enumerate(volumes if isinstance(volumes, list) else ()):
        if not isinstance(volume, Mapping):
            continue  # null entries: `_nulls`; other types: the schema check
        name = volume.get("name")
        where = (*path, index, "name")
        if not isinstance(name, str):
            continue  # missing or of another type: the schema check
        if not name:
            out.add(where, "required: a volume has a name")
        elif not is_dns_label(name):
            out.add(where, f"{_shown(name)} is not a valid volume name (a DNS-1123 label: at most 63 lower-case "
                    "letters, digits and '-', starting and ending with a letter or digit)")
        elif name in seen:
            out.add(where, f"duplicate volume name {_shown(name)} (also at {_format((*path, seen[name]))})",
                    "volume names are unique in a pod: rename or remove one")
        else:
            seen[name] = index
    return set(seen)


def _mounts(out: _Out, spec: Mapping[str, Any], base: Where, volumes: set[str]) -> None:
    """validation.go: ValidateVolumeMounts: a mount names a volume of the pod (`Not found`), a container mounts a path
    once (`must be unique`), a subPath is a relative path that does not climb out (validateLocalDescendingPath)."""
    for kind in ("initContainers", "containers"):
        items = spec.get(kind)
        for index, container in enumerate(items if isinstance(items, list) else ()):
            mounts = container.get("volumeMounts") if isinstance(container, Mapping) else None
            paths: set[str] = set()
            for number, mount in enumerate(mounts if isinstance(mounts, list) else ()):
                if not isinstance(mount, Mapping):
                    continue
                where = (*base, kind, index, "volumeMounts", number)
                name, mount_path, sub_path = mount.get("name"), mount.get("mountPath"), mount.get("subPath")
                if isinstance(name, str) and name and name not in volumes:
                    out.add((*where, "name"), f"no volume named {_shown(name)} in the pod spec's volumes",
                            "add it to volumes, or mount one of them")
                if isinstance(mount_path, str) and mount_path:
                    if mount_path in paths:
                        out.add((*where, "mountPath"), f"{_shown(mount_path)} is mounted twice in this container")
                    paths.add(mount_path)
                if isinstance(sub_path, str) and sub_path:
                    if sub_path.startswith("/"):
                        out.add((*where, "subPath"), "must be a relative path")
                    elif ".." in sub_path.split("/"):  # (Go: filepath.ToSlash, a no-op on Linux)
                        out.add((*where, "subPath"), "must not contain '..'")


_NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _node_requirement(out: _Out, path: Where, requirement: Any) -> None:
    """validation.go: ValidateNodeSelectorRequirement: the operator, how many values it takes, a label key."""
    if not isinstance(requirement, Mapping):
        return
    operator, values, key = requirement.get("operator"), requirement.get("values"), requirement.get("key")
    count = len(values) if isinstance(values, list) else 0
    if operator in ("In", "NotIn") and count == 0:
        out.add((*path, "values"), "required when operator is In or NotIn: at least one value")
    elif operator in ("Exists", "DoesNotExist") and count:
        out.add((*path, "values"), "must be empty when operator is Exists or DoesNotExist")
    elif operator in ("Gt", "Lt") and count != 1:
        out.add((*path, "values"), "must be one value when operator is Gt or Lt")
    elif isinstance(operator, str) and operator not in _NODE_OPERATORS:
        if operator:
            _choose(out, (*path, "operator"), operator, _NODE_OPERATORS)
        else:  # (no default fills it in)
            out.add((*path, "operator"), f"must be {', '.join(_NODE_OPERATORS[:-1])} or Lt, found ''")
    if isinstance(key, str) and not is_label_key(key):
        out.add((*path, "key"), f"{_shown(key)} is not a valid label key (a qualified name: [prefix/]name, the name at "
                "most 63 letters, digits, '-', '_' and '.')")


def _node_field_requirement(out: _Out, path: Where, requirement: Any) -> None:
    """validation.go: ValidateNodeFieldSelectorRequirement: In or NotIn one node name, of the key metadata.name."""
    if not isinstance(requirement, Mapping):
        return
    operator, values, key = requirement.get("operator"), requirement.get("values"), requirement.get("key")
    if operator in ("In", "NotIn"):
        if not isinstance(values, list) or len(values) != 1:
            out.add((*path, "values"), "must be exactly one value when operator is In or NotIn (a node field selector)")
    elif isinstance(operator, str):
        out.add((*path, "operator"), f"must be In or NotIn for a node field selector, found {_shown(operator)}")
    if isinstance(key, str) and key != "metadata.name":
        out.add((*path, "key"), f"{_shown(key)} is not a valid field selector key (only metadata.name)")
    elif isinstance(values, list):
        for index, value in enumerate(values):
            if isinstance(value, str) and not is_dns_subdomain(value):
                out.add((*path, "values", index), f"{_shown(value)} is not a valid node name (a DNS-1123 subdomain)")


def _node_term(out: _Out, path: Where, term: Any, label_values: bool = False) -> None:
    """validation.go: ValidateNodeSelectorTerm; with `label_values`, every value of a matchExpressions requirement is
    a label value (ValidateNodeSelectorRequirement, for a required term of a new pod from 1.32)."""
    if not isinstance(term, Mapping):
        return
    for name, check in (("matchExpressions", _node_requirement), ("matchFields", _node_field_requirement)):
        items = term.get(name)
        for index, requirement in enumerate(items if isinstance(items, list) else ()):
            check(out, (*path, name, index), requirement)
            values = requirement.get("values") if isinstance(requirement, Mapping) else None
            if label_values and name == "matchExpressions" and isinstance(values, list):
                for at, value in enumerate(values):
                    if isinstance(value, str) and not is_label_value(value):
                        out.add((*path, name, index, "values", at), f"{_shown(value)} is not a valid label value (at "
                                "most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit)")


def _node_affinity(out: _Out, path: Where, affinity: Any, kube: tuple[int, int]) -> None:
    """validation.go: validateAffinity / validateNodeAffinity (ValidateNodeSelector, validatePreferredSchedulingTerms):
    a required selector has at least one term, every requirement is checked (from 1.32 a required term's values are
    label values: AllowInvalidLabelValueInRequiredNodeAffinity is false for a new pod; a preferred term's never are
    checked), a preferred term weighs 1 to 100."""
    node = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    if not isinstance(node, Mapping):
        return
    path = (*path, "nodeAffinity")
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, Mapping):
        where = (*path, "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
        terms = required.get("nodeSelectorTerms")
        if not terms:
            out.add(where, "required: at least one node selector term")
        for index, term in enumerate(terms if isinstance(terms, list) else ()):
            _node_term(out, (*where, index), term, label_values=kube >= (1, 32))
    preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution")
    for index, item in enumerate(preferred if isinstance(preferred, list) else ()):
        if not isinstance(item, Mapping):
            continue
        where = (*path, "preferredDuringSchedulingIgnoredDuringExecution", index)
        weight = item.get("weight")
        if isinstance(weight, int) and not isinstance(weight, bool) and not 1 <= weight <= 100:
            out.add((*where, "weight"), f"must be between 1 and 100, found {weight}")
        _node_term(out, (*where, "preference"), item.get("preference"))


_SPREAD_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")


def _spread(out: _Out, path: Where, items: Any) -> None:
    """validation.go: validateTopologySpreadConstraints: maxSkew above 0, a topologyKey,
    whenUnsatisfiable DoNotSchedule or ScheduleAnyway (no default), each (topologyKey, whenUnsatisfiable) once,
    minDomains above 0 and only with DoNotSchedule."""
    seen: set[tuple[Any, Any]] = set()
    for index, item in enumerate(items if isinstance(items, list) else ()):
        if not isinstance(item, Mapping):
            continue
        where = (*path, index)
        skew, key, action, domains = (item.get("maxSkew"), item.get("topologyKey"), item.get("whenUnsatisfiable"),
                                      item.get("minDomains"))
        if isinstance(skew, int) and not isinstance(skew, bool) and skew <= 0:
            out.add((*where, "maxSkew"), f"must be greater than 0, found {skew}")
        if key == "":  # (ValidateTopologyKey: only that it is set; a real API server took a/b/c)
            out.add((*where, "topologyKey"), "required: a node label key")
        if action == "":
            out.add((*where, "whenUnsatisfiable"), "must be DoNotSchedule or ScheduleAnyway, found ''")
        else:
            _choose(out, (*where, "whenUnsatisfiable"), action, _SPREAD_ACTIONS)
        if (key, action) in seen:
            out.add(where, f"a second constraint of topologyKey {_shown(key)} and whenUnsatisfiable {_shown(action)}",
                    "merge them: each pair may appear once")
        seen.add((key, action))
        if isinstance(domains, int) and not isinstance(domains, bool):
            if domains <= 0:
                out.add((*where, "minDomains"), f"must be greater than 0, found {domains}")
            elif action != "DoNotSchedule":
                out.add((*where, "minDomains"), "may only be set with whenUnsatisfiable: DoNotSchedule")


def _format(path: Where) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else ("." if i else "") + p for i, p in enumerate(path))


def _labels(out: _Out, path: Where, labels: Any) -> None:
    """apimachinery validation: ValidateLabels (keys qualified names, values label values); also nodeSelector."""
    if not isinstance(labels, Mapping):
        return
    for key, value in labels.items():
        if not is_label_key(key):
            out.add((*path, str(key)), f"{_shown(key)} is not a valid label key (a qualified name: [prefix/]name, "
                    "the name at most 63 letters, digits, '-', '_' and '.')")
        elif isinstance(value, str) and not is_label_value(value):
            out.add((*path, str(key)), f"{_shown(value)} is not a valid label value (at most 63 letters, digits, "
                    "'-', '_' and '.', starting and ending with a letter or digit)")


ANNOTATIONS_LIMIT = 256 * 1024  # apimachinery validation: TotalAnnotationSizeLimitB


def _annotations(out: _Out, path: Where, annotations: Any) -> None:
    """apimachinery validation: ValidateAnnotations: keys are qualified names (checked lower-cased), all of them and
    their values at most 256 KiB."""
    if not isinstance(annotations, Mapping):
        return
    size = 0
    for key, value in annotations.items():
        size += len(str(key)) + (len(value) if isinstance(value, str) else 0)
        if not is_label_key(str(key).lower()):
            out.add((*path, str(key)), f"{_shown(key)} is not a valid annotation key (a qualified name: [prefix/]name, "
                    "the name at most 63 letters, digits, '-', '_' and '.')")
    if size > ANNOTATIONS_LIMIT:
        out.add(path, f"{size} bytes of annotations: at most {ANNOTATIONS_LIMIT} (256 KiB)")


# pkg/features/kube_features.go (v1.37.2): ContainerRestartRules alpha in 1.34 (off), beta and on from 1.35; before
# it, a regular container's restartPolicy is refused and an init container's may only be Always
CONTAINER_RESTART_RULES = (1, 35)


def check_pod_values(document: Mapping[str, Any], kube: tuple[int, int] = NEWEST) -> list[Finding]:
    """Every value of a pod spec document (`metadata`, `spec`) the API server refuses (validation.go:
    ValidatePodCreate, ValidatePodSpec), on Kubernetes `kube` (major, minor). Wrong types are left to the schema
    check (podspec.py)."""
    out = _Out()
    meta = document.get("metadata")
    if isinstance(meta, Mapping):
        _labels(out, ("metadata", "labels"), meta.get("labels"))
        _annotations(out, ("metadata", "annotations"), meta.get("annotations"))
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        return out.findings
    base: Where = ("spec",)
    for name in _OBJECT_LISTS:
        _nulls(out, (*base, name), spec.get(name))
    for kind in ("initContainers", "containers"):
        items = spec.get(kind)
        for index, container in enumerate(items if isinstance(items, list) else ()):
            if isinstance(container, Mapping):
                for name in _CONTAINER_OBJECT_LISTS:
                    _nulls(out, (*base, kind, index, name), container.get(name))
                _container(out, (*base, kind, index), container, init=kind == "initContainers", kube=kube)
    _names(out, spec, base)
    _mounts(out, spec, base, _volumes(out, (*base, "volumes"), spec.get("volumes")))
    _host_ports(out, spec, base)
    _pod_security(out, (*base, "securityContext"), spec.get("securityContext"))
    _host_aliases(out, (*base, "hostAliases"), spec.get("hostAliases"))
    _node_affinity(out, (*base, "affinity"), spec.get("affinity"), kube)
    for kind in ("initContainers", "containers"):
        items = spec.get(kind)
        for index, container in enumerate(items if isinstance(items, list) else ()):
            if isinstance(container, Mapping):
                _security(out, (*base, kind, index, "securityContext"), container.get("securityContext"),
                          spec.get("hostUsers"), kube)
    _spread(out, (*base, "topologySpreadConstraints"), spec.get("topologySpreadConstraints"))
    tolerations(out, (*base, "tolerations"), spec.get("tolerations"))
    _choose(out, (*base, "restartPolicy"), spec.get("restartPolicy"), RESTART_POLICIES)
    _choose(out, (*base, "dnsPolicy"), spec.get("dnsPolicy"), DNS_POLICIES)
    _labels(out, (*base, "nodeSelector"), spec.get("nodeSelector"))
    overhead = spec.get("overhead")
    if isinstance(overhead, Mapping):  # validation.go: validateOverhead (ValidateResourceRequirements on limits)
        resource_requirements(out, (*base, "overhead"), {"limits": overhead})
    resource_requirements(out, (*base, "resources"), spec.get("resources"), pod_level=True)
    deadline = spec.get("activeDeadlineSeconds")  # validation.go: ValidatePodSpec
    if isinstance(deadline, int) and not isinstance(deadline, bool) and not 1 <= deadline <= 2**31 - 1:
        out.add((*base, "activeDeadlineSeconds"), f"must be between 1 and 2147483647, found {deadline}")
    # terminationGracePeriodSeconds: a negative one is made 1 before validation (pod strategy), not refused
    dns = spec.get("dnsConfig")
    servers = dns.get("nameservers") if isinstance(dns, Mapping) else None
    if spec.get("dnsPolicy") == "None" and not servers:  # validation.go: validateDNSPolicy / validatePodDNSConfig
        out.add((*base, "dnsConfig", "nameservers"), "required when dnsPolicy is None: at least one DNS nameserver")
    # schedulerName: the API server takes any string (a real API server 1.37.2 accepted My_Scheduler)
    overhead_set = isinstance(overhead, Mapping) and bool(overhead)
    if overhead_set and not spec.get("runtimeClassName"):  # plugin/pkg/admission/runtimeclass: PodOverhead
        out.add((*base, "overhead"), "set without a RuntimeClass: the RuntimeClass admission plugin refuses the pod",
                "remove it: a RuntimeClass with an overhead sets it (runtimeClassName)")
    return out.findings
