"""helm: find it, learn its major version once, and build its argv in pure functions.

helm 3 and helm 4 differ in the flags det-k8s uses (checked against `helm <cmd> --help` of 3.17
and 4.1):

| what | helm 3 | helm 4 |
|---|---|---|
| wait for readiness | `--wait` | `--wait=watcher` (plain `--wait` means watcher too; the default is hookOnly) |
| undo a failed install/upgrade | `--atomic` | `--rollback-on-failure` (`--atomic` is deprecated) |
| list every status | `--all` (default: deployed and failed only) | the default (`--all` is gone) |
| render without a cluster | `helm template` (its `install --dry-run=client` still asks     | `install --dry-run=client` |
|                          | the cluster for its version)                                 |                            |
| render an upgrade offline (`diff`) | `helm template --is-upgrade` | `helm template --is-upgrade` |

Values always travel as `--values <file>`: det-k8s writes them to a private 0600 file, so no
password ever appears in an argv (visible in `ps`) or in a printed command.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DetK8sError, InputError, ToolFailed, ToolNotFound
from ..safe_read import load_json
from .failures import explain, scrub
from .locate import locate, version_of
from .process import Completed, run

HOW_TO_GET = ("install helm 3 or 4 (https://helm.sh/docs/intro/install/) or point --helm-binary / DET_K8S_HELM "
              "at it; developers: python scripts/fetch_tools.py puts one in .tools/bin")
DEFAULT_TIMEOUT = 120.0  # seconds, for helm calls that do not wait for the cluster (list, status, get)
SUPPORTED_MAJORS = (3, 4)


@dataclass(frozen=True)
class KubeFlags:
    """Which cluster and namespace a helm or kubectl call targets (None: the tool's own default)."""

    namespace: str | None = None
    kube_context: str | None = None
    kubeconfig: str | None = None

    def helm(self) -> list[str]:
        out: list[str] = []
        if self.namespace:
            out += ["--namespace", self.namespace]
        if self.kube_context:
            out += ["--kube-context", self.kube_context]
        if self.kubeconfig:
            out += ["--kubeconfig", self.kubeconfig]
        return out


@dataclass(frozen=True)
class ReleaseSpec:
    """What `helm install` / `helm upgrade` get: a rendered chart and its private values file."""

    release: str
    chart: str
    values_file: str
    kube: KubeFlags
    wait: bool = False
    timeout: str | None = None  # a Go duration, passed through as given
    create_namespace: bool = False
    rollback_on_failure: bool = False


def parse_major(version: str) -> int:
    """`v3.17.3+ge4da497` -> 3."""
    match = re.match(r"^v?(\d+)\.\d+", version.strip())
    if not match:
        raise ToolFailed(f"cannot tell helm's version from {version.strip()[:80]!r}", returncode=0)
    return int(match.group(1))


def _wait(major: int) -> list[str]:
    return ["--wait"] if major == 3 else ["--wait=watcher"]


def _rollback(major: int) -> list[str]:
    return ["--atomic"] if major == 3 else ["--rollback-on-failure"]


def _lifecycle_flags(major: int, spec: ReleaseSpec) -> list[str]:
    out = spec.kube.helm()
    if spec.wait:
        out += _wait(major)
    if spec.timeout:
        out += ["--timeout", spec.timeout]
    if spec.rollback_on_failure:
        out += _rollback(major)
    return out


def install_argv(major: int, spec: ReleaseSpec) -> list[str]:
    argv = ["install", spec.release, spec.chart, "--values", spec.values_file, *_lifecycle_flags(major, spec)]
    if spec.create_namespace:
        argv.append("--create-namespace")
    return argv


def upgrade_argv(major: int, spec: ReleaseSpec) -> list[str]:
    """`--reset-values`: the release gets exactly the values det-k8s rendered, nothing left over."""
    return ["upgrade", spec.release, spec.chart, "--values", spec.values_file, "--reset-values",
            *_lifecycle_flags(major, spec)]


def uninstall_argv(major: int, release: str, kube: KubeFlags, timeout: str | None = None, *, wait: bool = False,
                   keep_history: bool = False) -> list[str]:
    """`wait`: until the release's objects are gone (helm 3 `--wait`, helm 4 `--wait=watcher`); `keep_history`: the
    release's records stay, marked uninstalled (the same flag in both majors)."""
    argv = ["uninstall", release, *kube.helm()]
    if wait:
        argv += _wait(major)
    if keep_history:
        argv.append("--keep-history")
    if timeout:
        argv += ["--timeout", timeout]
    return argv


def list_argv(major: int, kube: KubeFlags, all_namespaces: bool = False) -> list[str]:
    argv = ["list", "--output", "json", *kube.helm()]
    if all_namespaces:
        argv.append("--all-namespaces")
    if major == 3:
        argv.append("--all")  # helm 3 hides pending and uninstalling releases by default
    return argv


def status_argv(release: str, kube: KubeFlags) -> list[str]:
    return ["status", release, "--output", "json", *kube.helm()]


def get_values_argv(release: str, kube: KubeFlags, *, all_values: bool = True, revision: int | None = None) -> list[str]:
    """Computed values by default (`db.hostAddress` may come from the chart's defaults); the user-supplied ones
    (what det-k8s passed as --values) with all_values=False."""
    return ["get", "values", release, *(["--all"] if all_values else []), "--output", "json", *kube.helm(),
            *_revision(revision)]


def _revision(revision: int | None) -> list[str]:
    return ["--revision", str(revision)] if revision is not None else []


def get_manifest_argv(release: str, kube: KubeFlags, revision: int | None = None) -> list[str]:
    """The manifests of a revision (the latest by default), hooks excluded."""
    return ["get", "manifest", release, *kube.helm(), *_revision(revision)]


def get_hooks_argv(release: str, kube: KubeFlags, revision: int | None = None) -> list[str]:
    return ["get", "hooks", release, *kube.helm(), *_revision(revision)]


def history_argv(release: str, kube: KubeFlags, max_revisions: int | None = None) -> list[str]:
    argv = ["history", release, "--output", "json", *kube.helm()]
    return argv + (["--max", str(max_revisions)] if max_revisions is not None else [])


def rollback_argv(major: int, release: str, revision: int, kube: KubeFlags, *, timeout: str | None = None) -> list[str]:
    """Back to `revision`. det-k8s then waits for the master itself (release/observe.py:wait_until_ready): helm's
    own wait would also wait for a load balancer's address, which never comes on clusters without one."""
    del major  # same flags in both majors
    argv = ["rollback", release, str(revision), *kube.helm()]
    return argv + (["--timeout", timeout] if timeout else [])


def render_argv(major: int, release: str, chart: str, values_file: str, namespace: str) -> list[str]:
    """Manifests without any cluster: helm 3 `template`, helm 4 `install --dry-run=client -o json`."""
    if major == 3:
        return ["template", release, chart, "--values", values_file, "--namespace", namespace]
    return ["install", release, chart, "--values", values_file, "--namespace", namespace, "--dry-run=client",
            "--output", "json"]


def upgrade_render_argv(release: str, chart: str, values_file: str, namespace: str) -> list[str]:
    """Manifests of an upgrade without any cluster, as YAML (helm 3 and 4 alike): `template --is-upgrade`, so the
    chart sees .Release.IsUpgrade as `helm upgrade` sets it (a check meant for a fresh install stays quiet)."""
    return ["template", release, chart, "--values", values_file, "--namespace", namespace, "--is-upgrade"]


def manifests_from_render(major: int, stdout: str) -> str:
    """The YAML stream a render printed (helm 4's JSON release holds it in `hooks` and `manifest`)."""
    if major == 3:
        return stdout
    try:
        release = load_json(stdout, "helm install --dry-run=client -o json")
    except InputError as exc:
        raise ToolFailed(f"helm printed something det-k8s cannot read: {exc.message}", returncode=0) from exc
    if not isinstance(release, dict):
        raise ToolFailed("helm install --dry-run=client -o json printed JSON of another shape (not a release)",
                         returncode=0)
    hooks = release.get("hooks")
    parts = [str(h.get("manifest") or "").strip() for h in (hooks if isinstance(hooks, list) else [])
             if isinstance(h, dict)]
    parts.append(str(release.get("manifest") or "").strip())
    return "\n---\n".join(p.removeprefix("---").strip() for p in parts if p) + "\n"


def failed(tool: str, args: Sequence[str], exc: ToolFailed, log: Callable[[str], None] | None, context: str | None,
           secrets: Sequence[str] = ()) -> DetK8sError:
    """The one-line error for a failed tool run; its raw stderr goes to `log` (printed with -v)."""
    if log is not None and exc.stderr.strip():
        log(f"{tool} said:\n" + "\n".join(f"  {line}" for line in scrub(exc.stderr, secrets).strip().splitlines()))
    return explain(tool, [tool, *args], exc.returncode, exc.stderr, context=context, secrets=secrets)


@dataclass(frozen=True)
class Helm:
    """A located helm binary of a known major version; `context` names the cluster in failure messages."""

    path: str
    version: str
    log: Callable[[str], None] | None = None
    context: str | None = None

    @property
    def major(self) -> int:
        try:
            return parse_major(self.version)
        except ToolFailed as exc:
            raise ToolFailed(f"{self.path}: {exc.message}; is it helm?", returncode=0,
                             hint="point --helm-binary or DET_K8S_HELM at a helm 3 or 4 binary") from exc

    def run(self, args: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT, check: bool = True,
            secrets: Sequence[str] = (), timeout_hint: str | None = None) -> Completed:
        """`secrets` are scrubbed from an error message (helm may quote a rendered template line). A failure is one
        det-k8s line (`tools/failures.py`); helm's own stderr is logged, shown with -v."""
        try:
            return run([self.path, *args], timeout=timeout, tool="helm", check=check, log=self.log, secrets=secrets,
                       timeout_hint=timeout_hint)
        except ToolFailed as exc:
            raise failed("helm", args, exc, self.log, self.context, secrets) from exc

    def json(self, args: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """helm's `-o json` output, bounded like every input (size, depth); its shape is the caller's to check."""
        text = self.run(args, timeout=timeout).stdout
        if not text.strip():
            return None
        try:
            return load_json(text, f"helm {args[0]} -o json")
        except InputError as exc:
            raise ToolFailed(f"helm {args[0]} printed something det-k8s cannot read: {exc.message}",
                             returncode=0) from exc


def find_helm(explicit: str | None = None, log: Callable[[str], None] | None = None) -> Helm:
    """Locate helm (flag, DET_K8S_HELM, PATH) and check it is helm 3 or 4."""
    path = locate("helm", explicit, "DET_K8S_HELM", HOW_TO_GET)
    helm = Helm(path, version_of(path, ("version", "--short"), "helm", log=log), log)
    if helm.major not in SUPPORTED_MAJORS:
        raise ToolNotFound(f"{path} is helm {helm.version}; det-k8s needs helm 3 or 4", hint=HOW_TO_GET)
    return helm
