"""The one adapter over the official `kubernetes` client; nothing else imports it.

It uses the client's kubeconfig loading, authentication, TLS and HTTP stack, but speaks in
plain dicts (the API's own JSON) rather than generated models: the pure core reads dicts, and a
30,000-pod list parses several times faster this way. Every call has a timeout, lists are paged,
and every failure becomes a det-k8s error: NotFound (404), Conflict (409), Forbidden (401/403),
ClusterUnreachable (no connection, naming the context), OperationTimeout, or ClusterError.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import stopping
from ..errors import (
    ClusterError,
    ClusterUnreachable,
    Conflict,
    Expired,
    Forbidden,
    NotFound,
    OperationTimeout,
    Rejected,
)
from .config import Target, kubeconfig_paths, resolve, user_of
from .credentials import Credential, plugin_of, run_plugin, with_credential
from .incluster import in_cluster_target
from .kinds import NAMESPACES, PODS, Kind

DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds
# 429 Too Many Requests: API Priority and Fairness turned the request away before handling it, so any verb is
# safe to send again. client-go (kubectl, helm) waits Retry-After (1 s when absent) and retries up to 10 times;
# det-k8s does the same, each wait at most THROTTLE_WAIT_MAX seconds, and all of a request's waits together at most
# THROTTLE_BUDGET seconds (or its read timeout, when shorter): a throttled request takes no longer than a slow answer
# may, and a Lease renewal held back by 429s lands well within the Lease's 30 s, not 100 s later.
THROTTLE_RETRIES = 10
THROTTLE_WAIT_MAX = 10.0
THROTTLE_BUDGET = 20.0
PAGE_SIZE = 500
POOL_SIZE = 32  # connections kept open to the API server (at least; `KubeApi.connect`)
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
Objects = list[dict[str, Any]]  # (inside KubeApi, `list` names the method)


@dataclass
class KubeApi:
    """A connection to one cluster. Create it with `KubeApi.connect(...)`."""

    target: Target
    _client: Any  # kubernetes.client.ApiClient
    timeout: tuple[float, float] = DEFAULT_TIMEOUT
    _credential: Credential | None = None  # from the context's exec plugin, which det-k8s runs itself
    _renew: Callable[[], Credential] | None = None
    _version: dict[str, Any] | None = field(default=None, repr=False)  # /version, asked once
    # Told of every write (any method but GET): (method, path, the answer, or None when it failed). A pass
    # without a watch uses it to leave a precise fence (live/scheduler.py). Not copied by clone().
    observe_writes: Callable[[str, str, Any], None] | None = field(default=None, repr=False)

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None,
                timeout: tuple[float, float] = DEFAULT_TIMEOUT) -> KubeApi:
        """Load the kubeconfig the way kubectl does and return a ready adapter (no request made yet).

        A context whose user has an exec credential plugin gets it run here, by det-k8s, with a time
        limit (`kube/credentials.py`): a plugin that fails or hangs stops the command with an error
        naming the context and the plugin, instead of the client carrying on without credentials.
        Inside a pod with no kubeconfig file, the pod's service account is used (`incluster.py`).
        """
        from kubernetes import config as k8s_config
        from kubernetes.client import ApiClient, Configuration
        from kubernetes.config.config_exception import ConfigException
        from urllib3.util.retry import Retry

        configuration = Configuration()
        credential: Credential | None = None
        renew: Callable[[], Credential] | None = None
        inside = None
        if not kubeconfig and context is None and not any(p.is_file() for p in kubeconfig_paths(None)):
            inside = in_cluster_target(os.environ, namespace)
        if inside is not None:
            target = inside
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except ConfigException as exc:
                raise ClusterError(f"in-cluster configuration: {exc}") from exc
        else:
            target, data = resolve(kubeconfig, context, namespace)
            ctx = next((c.get("context") for c in data.get("contexts") or []
                        if isinstance(c, dict) and c.get("name") == target.context), None) or {}
            plugin = plugin_of(user_of(data, ctx))
            if plugin is not None:
                cluster = next((c.get("cluster") for c in data.get("clusters") or []
                                if isinstance(c, dict) and c.get("name") == ctx.get("cluster")), None)

                def run_it() -> Credential:
                    return run_plugin(plugin, target.context, cluster if isinstance(cluster, dict) else None)

                renew = run_it
                credential = renew()
                data = with_credential(data, str(ctx.get("user")), credential)
            try:
                k8s_config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                    data, context=target.context, client_configuration=configuration, persist_config=False)
            except (ConfigException, ValueError, TypeError, AttributeError, KeyError, OSError) as exc:
                raise ClusterError(f"{target.kubeconfig}: context {target.context}: the kubernetes client cannot use "
                                   f"it: {str(exc)[:300] or type(exc).__name__}") from exc
        # Set before the client builds its connection pool, or urllib3's default (3 retries) applies.
        # One retry of a connection that never opened is safe for any verb; nothing sent is ever resent.
        # A 429's Retry-After is ours to honour (`_request`): urllib3 would retry a GET once, then call the
        # throttled server unreachable ("too many 429 error responses").
        configuration.retries = Retry(total=1, connect=1, read=0, status=0, redirect=0, other=0,
                                      respect_retry_after_header=False)
        # The scheduler's threads (bindings, the fence's writes and reads, Events) share this pool; past its size
        # urllib3 opens a connection per request and drops it (a TLS handshake each), the kubernetes client's default
        # being 5 per CPU
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, POOL_SIZE)
        if not configuration.verify_ssl:
            # urllib3 would print InsecureRequestWarning and a source line on every request; the CLI says it once.
            from urllib3.exceptions import InsecureRequestWarning

            warnings.filterwarnings("ignore", category=InsecureRequestWarning)
        if credential is not None:  # the loader's hook would put the first token back: renewal is ours
            configuration.refresh_api_key_hook = None
        return cls(target, ApiClient(configuration=configuration), timeout, credential, renew)

    @property
    def namespace(self) -> str:
        return self.target.namespace

    def clone(self) -> KubeApi:
        """The same cluster and credentials over its own connection pool (for a watch in another thread)."""
        from kubernetes.client import ApiClient

        return KubeApi(self.target, ApiClient(configuration=self._client.configuration), self.timeout,
                       self._credential, self._renew)

    def close(self) -> None:
        self._client.close()

    # -- the generic verbs -------------------------------------------------------------------

    def request(self, method: str, path: str, *, query: Sequence[tuple[str, Any]] = (), body: Any = None,
                content_type: str = "application/json", what: str = "", raw: bool = False) -> Any:
        """One HTTP request through the official client; JSON (or text with raw=True) back."""
        observer = self.observe_writes if method != "GET" else None
        if observer is None:
            return self._request(method, path, query=query, body=body, content_type=content_type, what=what, raw=raw)
        try:
            answer = self._request(method, path, query=query, body=body, content_type=content_type, what=what,
                                   raw=raw)
        except BaseException:
            observer(method, path, None)
            raise
        observer(method, path, answer)
        return answer

    def _request(self, method: str, path: str, *, query: Sequence[tuple[str, Any]], body: Any,
                 content_type: str, what: str, raw: bool) -> Any:
        """`_attempt`, sent again while the API server answers 429 (see THROTTLE_RETRIES and THROTTLE_BUDGET).

        Once a stop's undo was cut (det_k8s/stopping.py `after_hurry`), what still runs (an outer cleanup: the Lease
        given back, a fence lowered) has a few seconds in all, and no signal comes to cut it: each request waits at
        most what is left of them, none is sent after, and a 429 is not waited out."""
        budget = min(THROTTLE_BUDGET, self.timeout[1])
        for tries in range(1, THROTTLE_RETRIES + 2):
            timeout = self.timeout
            left = stopping.after_hurry()
            if left is not None:
                if left <= 0:
                    raise OperationTimeout(f"{what or path}: not sent: det-k8s is stopping and its undo was cut short",
                                           hint="the next det-k8s pass finishes what was left")
                timeout = (min(timeout[0], left / 2), min(timeout[1], left))  # (a connect is tried twice: `connect`)
            try:
                return self._attempt(method, path, query=query, body=body, content_type=content_type, what=what,
                                     raw=raw, timeout=timeout)
            except _Throttled as throttled:
                if tries > THROTTLE_RETRIES or throttled.wait > budget or left is not None:
                    waited = min(THROTTLE_BUDGET, self.timeout[1]) - budget
                    what_, message = throttled.what, _status_message(throttled.payload)
                    raise ClusterError(
                        f"{what_}: the API server kept answering 429 Too Many Requests ({tries} "
                        f"{'try' if tries == 1 else 'tries'}, {waited:g}s of waiting): {message} "
                        f"(context {self.target.context})".strip(": "),
                        hint="the API server is overloaded (API Priority and Fairness); try again later") from None
                budget -= throttled.wait
                time.sleep(throttled.wait)
        raise AssertionError("unreachable: the last try returns or raises")

    def _attempt(self, method: str, path: str, *, query: Sequence[tuple[str, Any]], body: Any,
                 content_type: str, what: str, raw: bool, timeout: tuple[float, float]) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import (
            ConnectTimeoutError,
            HTTPError,
            MaxRetryError,
            NewConnectionError,
            ReadTimeoutError,
            TimeoutError,
        )

        headers = {"Accept": "application/json", "Content-Type": content_type}
        if timeout is self.timeout:  # (a stop's last cleanup runs no exec plugin: the token it has, or a refusal)
            self._fresh_credential()
        started = time.monotonic()
        try:
            method_, url, headers_, body_, _ = self._client.param_serialize(
                method=method, resource_path=path, query_params=list(query) or None, header_params=headers,
                body=body, auth_settings=["BearerToken"])
            response = self._client.call_api(method_, url, header_params=headers_, body=body_,
                                             _request_timeout=timeout)
            payload = response.read()
        except ApiException as exc:  # raised by the REST layer for some statuses
            if exc.status == 429:
                raise _Throttled(exc.body or "", what or path, exc.headers) from exc
            raise self._error(exc.status or 0, exc.body or "", what) from exc
        except (MaxRetryError, NewConnectionError, HTTPError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            if isinstance(reason, ReadTimeoutError) or (isinstance(exc, TimeoutError)
                                                        and not isinstance(reason, ConnectTimeoutError)):
                waited = time.monotonic() - started  # the connect limit may have fired first (a TLS handshake)
                raise OperationTimeout(
                    f"the Kubernetes API at {self.target.server} (context {self.target.context}) did not answer in "
                    f"{waited:.1f}s ({what or path})",
                    hint="the API server is overloaded or a network path is broken; try again") from exc
            refused = _certificate_refused(reason)
            if refused is not None:  # the cluster answered: its certificate, or the CA to check it by, is the trouble
                raise ClusterError(
                    f"the Kubernetes API at {self.target.server} (context {self.target.context}): the TLS certificate "
                    f"was not accepted: {refused}",
                    hint="check certificate-authority(-data) for this cluster in your kubeconfig") from exc
            raise ClusterUnreachable(
                f"cannot reach the Kubernetes API at {self.target.server} (context {self.target.context}): "
                f"{_short(reason)}", hint="is the cluster up? check --kube-context and your kubeconfig") from exc
        if response.status == 429:
            raise _Throttled(payload, what or path, response.getheaders())
        if not 200 <= response.status < 300:
            raise self._error(response.status, payload, what or path)
        if raw:
            return payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else str(payload)
        if not payload:
            return {}
        try:  # the C scanner guards its own recursion; readers check the shapes of the fields they read
            return json.loads(payload)
        except (ValueError, RecursionError) as exc:
            text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
            raise ClusterError(
                f"{what or path}: the server at {self.target.server} (context {self.target.context}) answered "
                f"something that is not JSON ({_short(text)[:60]!r})",
                hint="is it a Kubernetes API server? check the cluster's server in your kubeconfig") from exc

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any]:
        ns = self._ns(kind, namespace)
        result: dict[str, Any] = self.request("GET", kind.path(ns, name), what=_what(kind, name, ns))
        return result

    def exists(self, kind: Kind, name: str, namespace: str | None = None) -> bool:
        try:
            self.get(kind, name, namespace)
        except NotFound:
            return False
        return True

    def list(self, kind: Kind, namespace: str | None = None, *, all_namespaces: bool = False,
             label_selector: str | None = None, field_selector: str | None = None) -> list[dict[str, Any]]:
        """Every object of a kind (paged), in one namespace or, with all_namespaces, everywhere."""
        return list(self.iter_list(kind, namespace, all_namespaces=all_namespaces, label_selector=label_selector,
                                   field_selector=field_selector))

    def iter_list(self, kind: Kind, namespace: str | None = None, *, all_namespaces: bool = False,
                  label_selector: str | None = None, field_selector: str | None = None) -> Iterator[dict[str, Any]]:
        ns = None if all_namespaces or not kind.namespaced else self._ns(kind, namespace)
        query: list[tuple[str, Any]] = [("limit", PAGE_SIZE)]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        token = None
        while True:
            page_query = query + ([("continue", token)] if token else [])
            page = self.request("GET", kind.path(ns), query=page_query, what=f"{kind.plural}")
            item_kind = str(page.get("kind", "")).removesuffix("List")
            for item in page.get("items") or []:
                if item_kind and "kind" not in item:  # list items come without kind; put it back
                    item = {"kind": item_kind, **item}
                yield item
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def create(self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = self._ns(kind, namespace or (body.get("metadata") or {}).get("namespace"))
        name = (body.get("metadata") or {}).get("name", "")
        result: dict[str, Any] = self.request("POST", kind.path(ns), body=dict(body), what=_what(kind, name, ns))
        return result

    def replace(self, kind: Kind, name: str, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """PUT: with metadata.resourceVersion set, a concurrent change makes this a Conflict."""
        ns = self._ns(kind, namespace)
        result: dict[str, Any] = self.request("PUT", kind.path(ns, name), body=dict(body),
                                              what=_what(kind, name, ns))
        return result

    def patch(self, kind: Kind, name: str, patch: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """JSON merge patch (null removes a key)."""
        ns = self._ns(kind, namespace)
        result: dict[str, Any] = self.request("PATCH", kind.path(ns, name), body=dict(patch),
                                              content_type=MERGE_PATCH, what=_what(kind, name, ns))
        return result

    def delete(self, kind: Kind, name: str, namespace: str | None = None, *, grace_seconds: int | None = None,
               missing_ok: bool = False) -> bool:
        """Delete one object; returns False when it was already gone and missing_ok allows that."""
        ns = self._ns(kind, namespace)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self.request("DELETE", kind.path(ns, name), body=body, what=_what(kind, name, ns))
        except NotFound:
            if missing_ok:
                return False
            raise
        return True

    def logs(self, name: str, namespace: str | None = None, *, container: str | None = None,
             tail_lines: int = 50) -> str:
        query: list[tuple[str, Any]] = [("tailLines", tail_lines)]
        if container:
            query.append(("container", container))
        ns = self._ns(PODS, namespace)
        text: str = self.request("GET", PODS.path(ns, name, "log"), query=query, raw=True,
                                 what=f"logs of pod {ns}/{name}")
        return text

    def server_version(self) -> dict[str, Any]:
        """GET /version (asked once); any Kubernetes API server answers it, so a 404 means the kubeconfig points
        elsewhere."""
        if self._version is not None:
            return self._version
        try:
            result = self.request("GET", "/version", what="server version")
        except NotFound as exc:
            raise ClusterError(
                f"the server at {self.target.server} (context {self.target.context}) answered 404 for /version: it "
                "does not look like a Kubernetes API server",
                hint="check the cluster's server address in your kubeconfig") from exc
        if not isinstance(result, dict) or not (result.get("gitVersion") or result.get("major")):
            raise ClusterError(f"the server at {self.target.server} (context {self.target.context}) answered /version "
                               "without a Kubernetes version: it does not look like a Kubernetes API server",
                               hint="check the cluster's server address in your kubeconfig")
        self._version = result
        return result

    @property
    def insecure(self) -> bool:
        """The context skips TLS verification (insecure-skip-tls-verify): the server's identity is not checked."""
        return not bool(getattr(self._client.configuration, "verify_ssl", True))

    def namespace_exists(self, name: str) -> bool:
        return self.exists(NAMESPACES, name)

    # -- subresources and watch (det-k8s as the scheduler of the master's pods) ---------------

    def create_subresource(self, kind: Kind, name: str, subresource: str, body: Mapping[str, Any],
                           namespace: str | None = None) -> dict[str, Any]:
        """POST to a subresource, e.g. a Binding to pods/<name>/binding."""
        ns = self._ns(kind, namespace)
        result: dict[str, Any] = self.request("POST", kind.path(ns, name, subresource), body=dict(body),
                                              what=f"{_what(kind, name, ns)} ({subresource})")
        return result

    def patch_subresource(self, kind: Kind, name: str, subresource: str, patch: Mapping[str, Any],
                          namespace: str | None = None, *, strategic: bool = True) -> dict[str, Any]:
        """PATCH a subresource (pods/<name>/status); strategic merge merges lists by their key (conditions by type)."""
        ns = self._ns(kind, namespace)
        result: dict[str, Any] = self.request(
            "PATCH", kind.path(ns, name, subresource), body=dict(patch),
            content_type=STRATEGIC_MERGE_PATCH if strategic else MERGE_PATCH,
            what=f"{_what(kind, name, ns)} ({subresource})")
        return result

    def list_page(self, kind: Kind, namespace: str | None = None, *, all_namespaces: bool = False,
                  label_selector: str | None = None, field_selector: str | None = None) -> tuple[Objects, str]:
        """Every object of a kind (paged) and the list's resourceVersion, to watch from."""
        ns = None if all_namespaces or not kind.namespaced else self._ns(kind, namespace)
        query: list[tuple[str, Any]] = [("limit", PAGE_SIZE)]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        items: Objects = []
        token, version = None, ""
        while True:
            page = self.request("GET", kind.path(ns), query=query + ([("continue", token)] if token else []),
                                what=kind.plural)
            item_kind = str(page.get("kind", "")).removesuffix("List")
            for item in page.get("items") or []:
                items.append({"kind": item_kind, **item} if item_kind and "kind" not in item else item)
            meta = page.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)  # the first page's is the list's snapshot
            token = meta.get("continue")
            if not token:
                return items, version

    def watch(self, kind: Kind, namespace: str | None = None, *, all_namespaces: bool = False,
              resource_version: str = "", label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: int = 300, bookmarks: bool = True) -> Iterator[dict[str, Any]]:
        """Watch events ({type, object}) from `resource_version` until the server ends the stream.

        Raises Expired (HTTP 410 Gone, at the start or as an ERROR event) when the version is too old
        to replay: the caller lists again. The read timeout exceeds the server-side timeout, so a quiet
        stream is not mistaken for a dead one.
        """
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError, ProtocolError, ReadTimeoutError

        if stopping.after_hurry() is None:  # (a stop's cut undo runs no exec plugin)
            self._fresh_credential()
        ns = None if all_namespaces or not kind.namespaced else self._ns(kind, namespace)
        query: list[tuple[str, Any]] = [("watch", "true"), ("timeoutSeconds", timeout_seconds)]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        headers = {"Accept": "application/json"}
        method_, url, headers_, _body, _ = self._client.param_serialize(
            method="GET", resource_path=kind.path(ns), query_params=query, header_params=headers,
            auth_settings=["BearerToken"])
        try:
            response = self._client.call_api(method_, url, header_params=headers_,
                                             _request_timeout=(self.timeout[0], timeout_seconds + 30))
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(f"watch of {kind.plural}: {_status_message(exc.body or '')}") from exc
            raise self._error(exc.status or 0, exc.body or "", f"watch of {kind.plural}") from exc
        except (HTTPError, OSError) as exc:
            raise ClusterUnreachable(f"cannot reach the Kubernetes API at {self.target.server} "
                                     f"(context {self.target.context}): {_short(getattr(exc, 'reason', None) or exc)}"
                                     ) from exc
        raw = response.response
        try:
            if response.status == 410:
                raise Expired(f"watch of {kind.plural} from resourceVersion {resource_version}: "
                              f"{_status_message(raw.data)}")
            if not 200 <= response.status < 300:
                raise self._error(response.status, raw.data, f"watch of {kind.plural}")
            buffered = b""
            for chunk in raw.stream(65536, decode_content=True):
                buffered += chunk
                *lines, buffered = buffered.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        if status.get("code") == 410:
                            raise Expired(f"watch of {kind.plural}: {status.get('message') or 'expired'}")
                        raise self._error(int(status.get("code") or 500), json.dumps(status), f"watch of {kind.plural}")
                    yield event
        except (ProtocolError, ReadTimeoutError, HTTPError, OSError) as exc:
            raise ClusterUnreachable(f"the watch of {kind.plural} broke off: {_short(exc)}") from exc
        finally:
            raw.close()  # an unfinished stream cannot go back to the pool

    # -- helpers -----------------------------------------------------------------------------

    def _fresh_credential(self) -> None:
        """Run the exec plugin again when its token has expired (a `scheduler run` loop outlives EKS's 15 minutes)."""
        if self._credential is None or self._renew is None or not self._credential.expired():
            return
        self._credential = self._renew()
        if self._credential.token:
            self._client.configuration.api_key["BearerToken"] = f"Bearer {self._credential.token}"

    def _ns(self, kind: Kind, namespace: str | None) -> str | None:
        if not kind.namespaced:
            return None
        return namespace or self.target.namespace

    def _error(self, status: int, payload: Any, what: str) -> ClusterError:
        message = _status_message(payload)
        context = f"(context {self.target.context})"
        if status == 404:
            missing = _missing_namespace(payload)
            if missing is not None:  # the API server's namespace lifecycle admission: a write into no namespace
                return NotFound(f"namespace {missing} does not exist" + (f" ({what})" if what else ""),
                                hint=f"create it: kubectl create namespace {missing}; or pass -n NAME of one that "
                                     "exists")
            return NotFound(f"{what} not found" if what else message)
        if status == 409:
            return Conflict(f"{what}: {message}" if what else message,
                            hint="someone else changed it at the same time; run the command again")
        if status in (401, 403):
            return Forbidden(f"{message} {context}",
                             hint="ask a cluster admin for the RBAC permission, or use another --kube-context")
        if status in (400, 422):
            return Rejected(f"{what}: rejected by the API server: {message}")
        return ClusterError(f"{what}: API server answered {status}: {message} {context}".strip(": "))


class _Throttled(Exception):
    """A 429 answer: what was asked and the server's words (for the error if it lasts), and how long to wait before
    sending the request again."""

    def __init__(self, payload: Any, what: str, headers: Any) -> None:
        super().__init__(what)
        self.payload, self.what = payload, what
        raw = None
        if headers is not None:
            raw = next((str(v) for k, v in dict(headers).items() if str(k).lower() == "retry-after"), None)
        try:
            seconds = float(raw) if raw is not None else 1.0
        except ValueError:  # an HTTP date, or junk: client-go's default
            seconds = 1.0
        self.wait = min(max(seconds, 0.0), THROTTLE_WAIT_MAX) if seconds == seconds else 1.0


def _what(kind: Kind, name: str, namespace: str | None) -> str:
    return f"{kind.name} {namespace}/{name}" if namespace else f"{kind.name} {name}"


def _certificate_refused(reason: Any) -> str | None:
    """What is wrong with the TLS certificate or the certificate authority, when that is why a connection failed
    (kubectl says the same: "x509: ..."); None for any other reason (a refused connection, a timeout)."""
    error = reason
    for _ in range(4):  # urllib3 wraps the ssl module's error: SSLError(SSLCertVerificationError(...))
        if isinstance(error, ssl.SSLError) or error is None:
            break
        error = error.args[0] if getattr(error, "args", None) and isinstance(error.args[0], BaseException) else (
            error.__cause__ or error.__context__)
    if not isinstance(error, ssl.SSLError):
        text = str(reason)
        return _short(text) if "CERTIFICATE_VERIFY_FAILED" in text or "X509" in text else None
    library, code = str(getattr(error, "library", "") or ""), str(getattr(error, "reason", "") or "")
    if isinstance(error, ssl.SSLCertVerificationError):
        return str(getattr(error, "verify_message", "") or _short(error)).rstrip(".")
    if library in ("X509", "PEM") or code in ("NO_CERTIFICATE_OR_CRL_FOUND", "NO_START_LINE"):
        return "the certificate authority holds no certificate (an empty file, or data that is not PEM)"
    return None


def _missing_namespace(payload: Any) -> str | None:
    """The namespace a 404 says does not exist (`namespaces "ml" not found`, details.kind namespaces), else None."""
    text = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else str(payload or "")
    try:
        status = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(status, dict):
        return None
    details = status.get("details")
    if isinstance(details, dict) and details.get("kind") == "namespaces" and isinstance(details.get("name"), str):
        return str(details["name"])
    found = re.fullmatch(r'namespaces "([a-z0-9][-a-z0-9]{0,62})" not found', str(status.get("message") or ""))
    return found.group(1) if found else None


def _status_message(payload: Any) -> str:
    text = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else str(payload or "")
    try:
        status = json.loads(text)
    except (ValueError, RecursionError):
        return _short(text) or "no details"
    if isinstance(status, dict) and status.get("message"):
        return str(status["message"])[:2000]
    return _short(text)


def _short(value: Any, width: int = 300) -> str:
    text = str(value).strip().splitlines()[0] if str(value).strip() else ""
    # urllib3 reasons look like "<urllib3.connection.HTTPConnection object at 0x..>: Failed to establish a new
    # connection: [Errno 111] Connection refused"; keep the part a person can act on.
    if "Failed to establish a new connection:" in text:
        text = text.split("Failed to establish a new connection:", 1)[1].strip()
    return text[:width]
