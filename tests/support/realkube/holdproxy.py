"""A proxy in front of the real kube-apiserver that can hold a chosen request, as `ApiEmulator.pause` does.

The kill harness stops det-k8s while one of its requests is in flight. The emulator can hold a request on demand;
the real API server cannot, so this proxy sits between det-k8s and it: det-k8s talks plain HTTP to 127.0.0.1
(a kubeconfig with `http://` and the same bearer token), the proxy forwards every request over TLS to the real
API server, streaming the answers (watches included), and holds the first request matching
(method, resource, after N) until the test releases it (forwarded then, however long ago its client gave up) or
drops it (answered 503, never forwarded).
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade", "te",
              "trailer"}
_RESOURCE = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/[^/]+)?/([^/?]+)")


@dataclass
class Hold:
    method: str
    plural: str
    after: int = 0  # let this many matching requests through first
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    agent: str = ""  # only requests whose User-Agent holds this (e.g. "Helm/": helm's, not det-k8s's own)
    dropped: bool = False
    seen: int = 0

    def release(self) -> None:
        self.released.set()

    def drop(self) -> None:
        self.dropped = True
        self.released.set()


def resource_of(path: str) -> str:
    """The resource a request path names ("pods" for /api/v1/namespaces/x/pods/y/binding); "" for others."""
    match = _RESOURCE.match(path)
    return match.group(1) if match else ""


class HoldProxy:
    def __init__(self, upstream: str, ca: Path | None = None) -> None:
        """`upstream`: https:// (the API server, whose CA is `ca`) or http:// (a storage emulator)."""
        parsed = urllib.parse.urlsplit(upstream)
        self.tls = parsed.scheme == "https"
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or (443 if self.tls else 80)
        self.ssl = ssl.create_default_context(cafile=str(ca)) if self.tls else None
        self.holds: list[Hold] = []
        self.token = ""
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                proxy._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="holdproxy").start()

    def hold(self, method: str, plural: str, *, after: int = 0, agent: str = "") -> Hold:
        """Hold the (after+1)th request of `method` on `plural` ("*": any path, for a storage emulator)."""
        held = Hold(method.upper(), plural, after, agent=agent)
        with self.lock:
            self.holds.append(held)
        return held

    def kubeconfig(self, path: Path, token: str, namespace: str = "default") -> Path:
        """A kubeconfig for the proxy. client-go (helm, kubectl) sends no bearer token over plain http, so the proxy
        adds this one to requests that come without one."""
        self.token = token
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "real",
                  "clusters": [{"name": "real", "cluster": {"server": self.url}}],
                  "users": [{"name": "real", "user": {"token": token}}],
                  "contexts": [{"name": "real", "context": {"cluster": "real", "user": "real",
                                                            "namespace": namespace}}]}
        path.write_text(json.dumps(config) + "\n")
        path.chmod(0o600)
        return path

    def close(self) -> None:
        with self.lock:
            for held in self.holds:
                held.drop()
        self.server.shutdown()
        self.server.server_close()

    def _match(self, method: str, path: str, agent: str) -> Hold | None:
        resource = resource_of(path)
        with self.lock:
            for held in self.holds:
                if held.reached.is_set() or held.method != method or held.plural not in ("*", resource):
                    continue
                if held.agent and held.agent.lower() not in agent.lower():
                    continue
                held.seen += 1
                if held.seen > held.after:
                    held.reached.set()
                    return held
        return None

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        held = self._match(handler.command, handler.path.split("?", 1)[0], handler.headers.get("User-Agent") or "")
        if held is not None:
            held.released.wait()
            if held.dropped:
                held.finished.set()
                self._answer(handler, 503, b'{"kind":"Status","status":"Failure","message":"dropped by the proxy",'
                             b'"code":503}')
                return
        try:
            upstream: http.client.HTTPConnection = (
                http.client.HTTPSConnection(self.host, self.port, context=self.ssl, timeout=600) if self.tls
                else http.client.HTTPConnection(self.host, self.port, timeout=600))
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP
                       and (k.lower() != "host" or not self.tls)}  # a storage request's signature may cover Host
            if self.token and not any(k.lower() == "authorization" for k in headers):
                headers["Authorization"] = f"Bearer {self.token}"
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            answer = upstream.getresponse()
            try:
                handler.send_response(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in HOP_BY_HOP:
                        handler.send_header(key, value)
                handler.send_header("Connection", "close")
                handler.end_headers()
                while chunk := answer.read1(65536):
                    handler.wfile.write(chunk)
                    handler.wfile.flush()
            finally:
                upstream.close()
        except OSError:
            pass  # the client hung up (a stopped det-k8s), or the upstream went away
        finally:
            if held is not None:
                held.finished.set()

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, code: int, body: bytes) -> None:
        try:
            handler.send_response(code)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:
            pass
