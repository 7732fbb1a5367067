"""`/readyz` and `/healthz` for the in-cluster scheduler loop (`scheduler run --health-port`), as Kubernetes
controllers serve them (controller-runtime's health probe endpoints).

- `/readyz`: 200 once the loop has listed the cluster and finished its first iteration (a pass, or waiting as the
  standby while another replica holds the Lease), 503 before that and from the moment a stop signal arrives. A
  rolling update (maxSurge 0) stops the next old replica only when the new one is ready.
- `/healthz`: 200 while the loop moves: its last heartbeat (the start or end of an iteration) is more recent than
  `stale_after` seconds. A loop stuck in a pass gets 503 and the kubelet restarts the container.

The server is a daemon thread on its own port; it reads two numbers the loop writes, and never touches the
cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .errors import UsageError


@dataclass
class Health:
    stale_after: float  # seconds without a heartbeat before /healthz fails
    ready: bool = False
    stopping: Callable[[], bool] = lambda: False  # a stop signal has arrived: the loop is winding down
    last_beat: float = field(default_factory=time.monotonic)

    def beat(self, *, ready: bool = False) -> None:
        """The loop is alive (and, with `ready`, has finished an iteration)."""
        self.last_beat = time.monotonic()
        self.ready = self.ready or ready

    def answer(self, path: str) -> tuple[int, str]:
        if path == "/readyz":
            if self.stopping():
                return 503, "stopping\n"
            return (200, "ok\n") if self.ready else (503, "not ready: the first pass has not finished\n")
        if path in ("/healthz", "/livez"):
            quiet = time.monotonic() - self.last_beat
            if quiet > self.stale_after:
                return 503, f"the scheduling loop has not moved for {quiet:.0f}s\n"
            return 200, "ok\n"
        return 404, "not found: /readyz or /healthz\n"


class _Handler(BaseHTTPRequestHandler):
    health: Health

    def do_GET(self) -> None:  # noqa: N802 (the http.server hook's name)
        code, text = self.health.answer(self.path.split("?", 1)[0])
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        return  # probes every few seconds: no log lines


def serve(health: Health, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:  # noqa: S104 (a pod's probe)
    """Start answering probes on `port` in a daemon thread; UsageError if the port cannot be had."""
    handler = type("HealthHandler", (_Handler,), {"health": health})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        raise UsageError(f"--health-port {port}: cannot listen there: {exc.strerror or exc}",
                         hint="choose a free port (the manifest uses 8081)") from exc
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="det-k8s-health", daemon=True).start()
    return server
