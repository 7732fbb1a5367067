"""Names as Kubernetes defines them, checked as whole strings wherever they come from.

Every check is a full-string match: `re.match` with `$` accepts a trailing newline ("demo\\n"), and a
name that passes must be exactly what the API server accepts, since it ends up in argv, in URL
paths and in messages. Namespaces are DNS-1123 labels (the API server's rule for Namespace names),
node names DNS-1123 subdomains, label keys an optional DNS-1123 subdomain prefix and a name part.
"""

from __future__ import annotations

import re

from .errors import UsageError

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
LABEL_MAX, SUBDOMAIN_MAX = 63, 253


def is_dns_label(text: object) -> bool:
    return isinstance(text, str) and len(text) <= LABEL_MAX and DNS1123_LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: object) -> bool:
    return isinstance(text, str) and len(text) <= SUBDOMAIN_MAX and DNS1123_SUBDOMAIN.fullmatch(text) is not None


def is_label_key(text: object) -> bool:
    """`name` or `prefix/name`: prefix a DNS-1123 subdomain, name at most 63 of [-A-Za-z0-9_.]."""
    if not isinstance(text, str):
        return False
    prefix, slash, name = text.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return False
    return len(name) <= LABEL_MAX and LABEL_NAME.fullmatch(name) is not None


def is_label_value(text: object) -> bool:
    return isinstance(text, str) and (text == "" or (len(text) <= LABEL_MAX and LABEL_NAME.fullmatch(text) is not None))


# An image reference as the kubelet parses it (github.com/distribution/reference: domain[:port]/path[:tag][@digest],
# path components lower-case); anything else ends in InvalidImageName.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"(?:(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")


def is_image_reference(text: object) -> bool:
    return isinstance(text, str) and len(text) <= 255 + 128 + 80 and IMAGE_REFERENCE.fullmatch(text) is not None


def shown(text: str, width: int = 80) -> str:
    """A user's value for a message: repr (so a newline shows as \\n), clipped."""
    quoted = repr(text)
    return quoted if len(quoted) <= width else quoted[: width - 4] + "...'"


def check_namespace(name: str, source: str = "--namespace") -> str:
    """The namespace, or a usage error (exit 2) naming where it came from (`-n`, HELM_NAMESPACE, a kubeconfig)."""
    if not is_dns_label(name):
        raise UsageError(f"{source} {shown(name)}: not a valid namespace name",
                         hint="a namespace is at most 63 lower-case letters, digits and '-', starting and ending "
                              "with a letter or digit (a DNS-1123 label), e.g. research")
    return name


def check_node_name(name: str, source: str = "NODE") -> str:
    if not is_dns_subdomain(name):
        raise UsageError(f"{source} {shown(name)}: not a Kubernetes node name",
                         hint="node names are lowercase letters, digits, '-' and '.'; see `det-k8s nodes list`")
    return name


def check_label_key(key: str, source: str) -> str:
    """A label key (`name` or `prefix/name`), or a usage error (exit 2) naming the flag it came from."""
    if not is_label_key(key):
        raise UsageError(f"{source} {shown(key)}: not a node label key",
                         hint="a key is an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' "
                              "and '.', e.g. topology.kubernetes.io/zone")
    return key
