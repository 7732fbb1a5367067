"""Release names and the object names the Determined chart derives from them.

helm accepts a release name that is a DNS-1123 label of at most 53 characters. The chart then
names the master Service `determined-master-service-<release>`, and a Service name must be a
DNS label of at most 63 characters, so a longer release installs "successfully" with no master
Service. Both limits are checked before anything runs.
"""

from __future__ import annotations

from ..errors import UsageError
from ..names import DNS1123_LABEL, shown

HELM_MAX = 53
SERVICE_PREFIX = "determined-master-service-"
MAX_RELEASE = 63 - len(SERVICE_PREFIX)  # 37


def validate_release_name(name: str, argument: str = "RELEASE") -> str:
    """Return the name, or raise a usage error (exit 2) naming the argument and the rule."""
    if not name:
        raise UsageError(f"{argument}: a release name is required", hint="e.g. det-k8s install determined -f ...")
    if not DNS1123_LABEL.fullmatch(name):  # whole string: "demo\n" must not pass
        raise UsageError(f"{argument} {shown(name)}: not a valid release name",
                         hint="use lower-case letters, digits and '-', starting and ending with a letter or digit "
                              "(a DNS-1123 label), e.g. determined")
    if len(name) > HELM_MAX:
        raise UsageError(f"{argument} {name!r}: {len(name)} characters; helm allows at most {HELM_MAX}")
    if len(name) > MAX_RELEASE:
        raise UsageError(f"{argument} {name!r}: {len(name)} characters; the master Service "
                         f"{SERVICE_PREFIX}<release> must fit in 63, so at most {MAX_RELEASE}")
    return name


def master_deployment(release: str) -> str:
    return f"determined-master-deployment-{release}"


def master_service(release: str) -> str:
    return f"{SERVICE_PREFIX}{release}"


def master_app(release: str) -> str:
    return f"determined-master-{release}"


def master_config(release: str) -> str:
    return f"determined-master-config-{release}"


def db_deployment(release: str) -> str:
    return f"determined-db-deployment-{release}"


def db_app(release: str) -> str:
    return f"determined-db-{release}"


def db_pvc(release: str) -> str:
    return f"determined-db-pvc-{release}"
