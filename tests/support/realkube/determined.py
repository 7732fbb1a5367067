"""The real Determined master, built from its source beside the project, run outside the cluster on 127.0.0.1.

    ../shared/vendor/determined/determined-<release>-src.tar.gz  (or $DET_K8S_DETERMINED_SRC: a tarball or a
    directory holding master/ and proto/, a contributor's clone of the tag)
      -> `go build ./cmd/determined-master` once per release into the cache ($DET_K8S_CACHE or ~/.cache/det-k8s,
         under determined/<release>/), with the source kept there too: the master reads its migrations and
         static files from `root` (master/)
      -> PostgreSQL from the machine's packages (`initdb` in a temporary directory, 127.0.0.1, a free port)
      -> the master with `resource_manager.kubeconfig_path` pointing at the real control plane, handed a socket
         already bound to 127.0.0.1 the systemd way (it binds every interface otherwise and has no option not to)
      -> the `det` CLI of the same release from PyPI, in a venv of its own in the cache.

Every build prints a line at least every 20 s. Every server is a child in its own process group, stopped by PID.
Facts this encodes, each found by running the real master here (and in ../shared/vendor/determined/README.md):
- the master parses its socket's port as a signed 16-bit number: the port must be at most 32767;
- without `determined_master_host`/`port` it looks for a master Service in the cluster;
- kwok must serve `pods/log`, or the master's log streamer gets 404 and the trial never leaves STARTING.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.realkube.components import BuildError, _go_env, _run, build_lock, cache_root, go_binary, say

MASTER_VERSION = os.environ.get("DET_K8S_MASTER_VERSION", "0.38.1")
# The releases whose source ../shared/vendor/determined holds; 0.29.1 is the first whose master runs out of cluster.
OUT_OF_CLUSTER_FROM = (0, 29, 1)
REPO = Path(__file__).resolve().parents[3]
SHARED_SOURCE = REPO.parent / "shared" / "vendor" / "determined"
# The password the master sets for `admin` and `determined` on a fresh database (security.initial_user_password).
PASSWORD = "Det3rmined-kwok"


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3])


def source_of(version: str) -> Path | None:
    """Where the release's source is: $DET_K8S_DETERMINED_SRC (a tarball or a directory), else ../shared's tarball."""
    named = os.environ.get("DET_K8S_DETERMINED_SRC")
    if named:
        return Path(named)
    tarball = SHARED_SOURCE / f"determined-{version}-src.tar.gz"
    return tarball if tarball.is_file() else None


def master_dir(version: str) -> Path:
    return cache_root() / "determined" / version


def cached_master(version: str = MASTER_VERSION) -> Path | None:
    binary = master_dir(version) / "determined-master"
    return binary if binary.is_file() and (master_dir(version) / "src" / "master" / "static").is_dir() else None


def _extract(source: Path, dest: Path) -> None:
    """The release's source into dest (master/, proto/, go.mod where the release has one at the root)."""
    if dest.exists():
        shutil.rmtree(dest)
    if source.is_dir():
        shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", "node_modules", "webui"))
        return
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(source) as tar:
        tar.extractall(tmp, filter="data")
    tops = list(tmp.iterdir())
    top = tops[0] if len(tops) == 1 and tops[0].is_dir() else tmp
    top.rename(dest)
    shutil.rmtree(tmp, ignore_errors=True)


def build_master(version: str = MASTER_VERSION) -> Path:
    """determined-master of `version`, built once into the cache (5-6 minutes cold on a 2-core machine)."""
    if (have := cached_master(version)) is not None:
        return have
    with build_lock(f"determined-{version}"):
        if (have := cached_master(version)) is not None:
            return have
        return _build_master(version)


def _build_master(version: str) -> Path:
    source = source_of(version)
    if source is None:
        raise BuildError(f"no source for Determined {version}: {SHARED_SOURCE} has no determined-{version}-src.tar.gz "
                         "(set DET_K8S_DETERMINED_SRC to a tarball or a clone of the tag)")
    if go_binary() is None:
        raise BuildError("Go is not installed: the Determined master is built from its source (install Go 1.26)")
    dest = master_dir(version)
    dest.mkdir(parents=True, exist_ok=True)
    src = dest / "src"
    say(f"Determined {version}: unpacking {source} into {src}")
    _extract(source, src)
    if not (src / "master" / "cmd" / "determined-master").is_dir():
        raise BuildError(f"{source}: no master/cmd/determined-master in it")
    env = _go_env()
    env["GOFLAGS"] = "-buildvcs=false"
    say(f"Determined {version}: building determined-master (5-6 minutes the first time on 2 cores)")
    t0 = time.monotonic()
    partial = dest / ".determined-master.partial"
    _run(["go", "build", "-ldflags", f"-X github.com/determined-ai/determined/master/version.Version={version}",
          "-o", str(partial), "./cmd/determined-master"], src / "master", f"determined-master {version}", env)
    partial.replace(dest / "determined-master")
    say(f"  determined-master {version} built in {time.monotonic() - t0:.0f} s")
    return dest / "determined-master"


def det_cli(version: str = MASTER_VERSION) -> Path:
    """The `det` CLI of `version` (determined==version from PyPI) in a venv of its own in the cache."""
    venv = cache_root() / "determined-cli" / version
    det = venv / "bin" / "det"
    if det.is_file():
        return det
    with build_lock(f"determined-cli-{version}"):
        if det.is_file():
            return det
        return _install_det_cli(version, venv)


def _install_det_cli(version: str, venv: Path) -> Path:
    det = venv / "bin" / "det"
    say(f"Determined {version}: installing the det CLI (determined=={version}) into {venv} (about 2 minutes)")
    partial = venv.with_name(venv.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(partial)], REPO, "venv", dict(os.environ))
    _run([str(partial / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          f"determined=={version}"], REPO, f"pip install determined=={version}", dict(os.environ), timeout=1800)
    shutil.rmtree(venv, ignore_errors=True)
    # a venv's scripts name its directory in their #! lines: rename, then rewrite them to the final path
    partial.rename(venv)
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            with contextlib.suppress(UnicodeDecodeError, OSError):
                text = script.read_text()
                if str(partial) in text:
                    script.write_text(text.replace(str(partial), str(venv)))
    return det


# -- PostgreSQL -------------------------------------------------------------------------------------


def postgres_bin() -> Path | None:
    """The newest PostgreSQL server's bin directory from Debian's packages (/usr/lib/postgresql/N/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name)
                   if p.parent.parent.name.isdigit() else 0)
    return found[-1].parent if found else None


def free_low_port() -> int:
    """A free port on 127.0.0.1 at most 32767 (the master parses its port as a signed 16-bit number)."""
    for _ in range(200):
        port = random.randint(20000, 32767)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError("no free port between 20000 and 32767 on 127.0.0.1")


def _as_postgres() -> dict[str, Any]:
    """initdb and postgres refuse to run as root: as root, run them as the `postgres` user Debian's package makes."""
    if os.geteuid() != 0:
        return {}
    import pwd

    user = pwd.getpwnam("postgres")
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


@dataclass
class Postgres:
    directory: Path
    port: int = 0
    password: str = "postgres"
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Postgres:
        pgbin = postgres_bin()
        if pgbin is None:
            raise BuildError("PostgreSQL's server is not installed (Debian: apt-get install postgresql)")
        as_pg = _as_postgres()
        self.directory.mkdir(parents=True, exist_ok=True)
        data = self.directory / "data"
        pwfile = self.directory / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        if as_pg:
            os.chown(self.directory, as_pg["user"], as_pg["group"])
            os.chown(pwfile, as_pg["user"], as_pg["group"])
        out = subprocess.run([str(pgbin / "initdb"), "-D", str(data), "-U", "postgres", f"--pwfile={pwfile}",
                              "-A", "scram-sha-256", "--no-sync", "--no-instructions"],
                             capture_output=True, text=True, timeout=300, **as_pg)
        pwfile.unlink()
        if out.returncode != 0:
            raise BuildError(f"initdb exited {out.returncode}: {out.stderr[-2000:]}")
        self.port = free_low_port()
        log = (self.directory / "postgres.log").open("wb")
        sock = self.directory / "sock"
        sock.mkdir(exist_ok=True)
        if as_pg:
            os.chown(sock, as_pg["user"], as_pg["group"])
        self.proc = subprocess.Popen(
            [str(pgbin / "postgres"), "-D", str(data), "-c", "listen_addresses=127.0.0.1", "-p", str(self.port),
             "-k", str(sock), "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, **as_pg)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BuildError(f"postgres exited {self.proc.returncode}: "
                                 f"{(self.directory / 'postgres.log').read_text(errors='replace')[-2000:]}")
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            time.sleep(0.2)
        self._create_database("determined")
        say(f"  PostgreSQL ({pgbin.parent.name}) on 127.0.0.1:{self.port}")
        return self

    def _create_database(self, name: str) -> None:
        pgbin = postgres_bin()
        assert pgbin is not None
        deadline = time.monotonic() + 30
        while True:
            out = subprocess.run([str(pgbin / "psql"), "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                                  "-c", f"CREATE DATABASE {name};"], capture_output=True, text=True, timeout=60,
                                 env={**os.environ, "PGPASSWORD": self.password})
            if out.returncode == 0 or "already exists" in out.stderr:
                return
            if time.monotonic() > deadline:
                raise BuildError(f"CREATE DATABASE {name}: {out.stderr.strip()}")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGINT)  # postgres's "fast" shutdown
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


# -- the master --------------------------------------------------------------------------------------

# The child execs the master with the inherited socket as fd 3, announced as systemd does (LISTEN_PID is its own pid,
# which exec keeps).
_LAUNCH = ("import os, sys; fd = int(sys.argv[1]); os.dup2(fd, 3); os.set_inheritable(3, True); "
           "os.environ.update(LISTEN_FDS='1', LISTEN_PID=str(os.getpid())); os.execv(sys.argv[2], sys.argv[2:])")


@dataclass
class Master:
    """A running determined-master; `det(...)` runs the det CLI of the same release against it, logged in."""

    version: str
    binary: Path
    work: Path
    config: dict[str, Any]
    port: int
    proc: subprocess.Popen[bytes] | None = None
    home: Path = field(init=False)
    _token: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        self.home = self.work / "home"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.work / "master.log"

    def start(self, timeout: float = 180) -> Master:
        (self.work / "cache").mkdir(parents=True, exist_ok=True)
        (self.work / "checkpoints").mkdir(parents=True, exist_ok=True)
        conf = self.work / "master.yaml"
        conf.write_text(json.dumps(self.config, indent=1) + "\n")
        conf.chmod(0o600)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(1024)
        try:
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", _LAUNCH, str(sock.fileno()), str(self.binary), "--config-file", str(conf)],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                    pass_fds=(sock.fileno(),), cwd=self.work)
        finally:
            sock.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BuildError(f"determined-master {self.version} exited {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(OSError, ValueError), \
                    urllib.request.urlopen(self.url + "/info", timeout=3) as resp:
                info = json.loads(resp.read())
                say(f"  determined-master {info.get('version')} on {self.url} (pid {self.proc.pid})")
                return self
            time.sleep(0.5)
        raise BuildError(f"determined-master {self.version} did not answer /info within {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(line for line in text if "level=debug" not in line)[-6000:] or "\n".join(text[-lines:])

    def stop(self, sig: int = signal.SIGTERM, grace: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self._token = ""
        self.start()

    # -- the REST API --

    def token(self) -> str:
        if not self._token:
            req = urllib.request.Request(self.url + "/api/v1/auth/login", method="POST",
                                         data=json.dumps({"username": "admin", "password": PASSWORD}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                self._token = str(json.loads(resp.read())["token"])
        return self._token

    def api(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {self.token()}"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{method} {path}: {e.code} {e.read()[-1000:]!r}") from None
        return json.loads(raw) if raw else None


# -- the whole thing: a control plane, PostgreSQL, the master as the bundled chart configures it ---------------------

RELEASE = "demo"
SYSTEM_NS = "determined"  # the release's namespace: the master's ServiceAccount, det-k8s's queue and RBAC
TASK_NS = SYSTEM_NS  # where the master creates its task Jobs and pods: the chart's default_namespace
MASTER_SA = f"system:serviceaccount:{SYSTEM_NS}:determined-master-{RELEASE}"
SCHEDULER_SA = f"system:serviceaccount:{SYSTEM_NS}:det-k8s-scheduler"

# Fields of the bundled chart's master configuration that running outside the cluster changes, and why.
OUT_OF_CLUSTER = {
    "port": "a free port <= 32767 on 127.0.0.1 (the chart's 8080 is the pod's)",
    "root": "the release's master/ source (migrations, static files; the image has them in /usr/share/determined)",
    "db.host, db.port, db.password": "the test's PostgreSQL on 127.0.0.1 (the chart's is a Service name)",
    "cache.cache_dir, checkpoint_storage.host_path": "directories on this machine",
    "log.level": "debug, so a failure shows what the master did",
    "resource_manager.kubeconfig_path": "the master's ServiceAccount token in a kubeconfig (in a pod: its mount)",
    "resource_manager.determined_master_scheme/host/port": "127.0.0.1 (else the master looks up its own Service; "
                                                           "determined_master_ip/port before 0.38)",
}

# The bundled chart's settings for the tests' GPU cluster: det-k8s's gang scheduler serves `coscheduler`.
CHART_SETTINGS: dict[str, Any] = {
    "maxSlotsPerPod": 4, "defaultScheduler": "coscheduler", "initialUserPassword": PASSWORD,
    "detK8sScheduler": {"enabled": False}, "checkpointStorage": {"type": "shared_fs", "hostPath": "/tmp"}}


def render_chart(tmp: Path, settings: Mapping[str, Any], version: str) -> list[dict[str, Any]]:
    """The bundled chart's objects for `settings`, as `det-k8s render` writes it and `helm template` renders it."""
    import yaml

    values = tmp / "site.yaml"
    values.write_text(yaml.safe_dump({**settings, "appVersion": version}))
    env = {**os.environ, "NO_COLOR": "1", "PATH": f"{REPO / '.tools' / 'bin'}:{os.environ.get('PATH', '')}"}
    out = subprocess.run([sys.executable, "-m", "det_k8s", "render", "-f", str(values), "--output-dir",
                          str(tmp / "chart")], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    if out.returncode != 0:
        raise BuildError(f"det-k8s render: {out.stderr.strip()}")
    helm = shutil.which("helm", path=env["PATH"])
    if helm is None:
        raise BuildError("helm is not in .tools/bin (./scripts/test fetches it)")
    out = subprocess.run([helm, "template", RELEASE, str(tmp / "chart"), "-n", SYSTEM_NS], capture_output=True,
                         text=True, timeout=120, env=env)
    if out.returncode != 0:
        raise BuildError(f"helm template: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def chart_master_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    import yaml

    for obj in objects:
        if obj["kind"] in ("Secret", "ConfigMap") and obj["metadata"]["name"].startswith("determined-master-config"):
            data = obj.get("stringData") or obj.get("data") or {}
            return dict(yaml.safe_load(data["master.yaml"]))
    raise BuildError("the bundled chart rendered no master configuration")


def kwok_serving_logs(work: Path) -> Any:
    """Control plane options under which kwok serves every container's log on 127.0.0.1 (the master follows its
    pods' logs, and a trial whose log cannot be read never leaves STARTING)."""
    from tests.support.realkube.cluster import Options

    logs = work / "kwok-logs"
    logs.mkdir(parents=True, exist_ok=True)
    fake_log = logs / "container.log"
    fake_log.write_text("2026-01-01T00:00:00.000000000Z stdout F kwok: no container runs on this fake node\n")
    (logs / "logs.yaml").write_text(json.dumps({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs", "metadata": {"name": "all-containers"},
        "spec": {"logs": [{"logsFile": str(fake_log), "follow": True}]}}) + "\n")
    return Options(kwok_logs=logs / "logs.yaml", kwok_stages=_stages_with_exits(logs / "stages.yaml"))


# A kubelet reports a deleted pod's containers as terminated before the pod object goes; kwok's pod-delete Stage
# removes it at once. Masters before 0.34 wait for their containers' exits ("killing again after 30s without all
# container exits") and never let a preempted trial ask again. This Stage, ahead of kwok's pod-delete, ends the
# containers of a pod being deleted (exit 137, as after SIGKILL), and pod-delete then removes a pod that has ended.
_TERMINATE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-terminate
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running', 'Pending']
    - key: '.spec.nodeName'
      operator: 'Exists'
  next:
    statusTemplate: |
      phase: Failed
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        state:
          terminated:
            exitCode: 137
            reason: Error
            finishedAt: {{ Now | Quote }}
      {{ end }}
"""


def _stages_with_exits(dest: Path) -> Path:
    from tests.support.realkube.components import STAGES_FILE, cached

    binaries = cached()
    if binaries is None:
        raise BuildError("the real control plane is not built (python -m tests.support.realkube.components)")
    docs = (binaries.kwok.parent / STAGES_FILE).read_text().split("\n---\n")
    out = []
    for doc in docs:
        if "name: pod-delete" in doc:  # only a pod that has ended (or was never bound) is removed
            doc = doc.replace("""      operator: 'Exists'
  next:""", """      operator: 'Exists'
    - key: '.status.phase'
      operator: 'NotIn'
      values: ['Running', 'Pending']
  next:""", 1)
            out.append(_TERMINATE.strip())
        out.append(doc.strip())
    dest.write_text("\n---\n".join(out) + "\n")
    return dest


class DeterminedOnKube:
    """A real control plane (started by the caller), PostgreSQL, and the master on the bundled chart's configuration
    and ClusterRole; helpers to read what it made and to drive it with the det CLI."""

    def __init__(self, plane: Any, work: Path, version: str = MASTER_VERSION,
                 settings: Mapping[str, Any] | None = None) -> None:
        self.plane, self.work, self.version = plane, work, version
        self.settings = dict(settings or CHART_SETTINGS)
        self.postgres = Postgres(Path(tempfile.mkdtemp(prefix="det-k8s-pg-")))
        self.master: Master | None = None
        self.chart_config: dict[str, Any] = {}

    def start(self) -> DeterminedOnKube:
        binary = build_master(self.version)
        det_cli(self.version)
        try:
            self.postgres.start()
            objects = render_chart(self.work, self.settings, self.version)
            self.plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}})
            for obj in objects:  # the master's ServiceAccount and ClusterRole(Binding); the chart's PriorityClasses
                masters = obj["kind"] in ("ClusterRole", "ClusterRoleBinding", "ServiceAccount") and \
                    obj["metadata"]["name"] == f"determined-master-{RELEASE}"
                if masters or obj["kind"] == "PriorityClass":
                    self.plane.apply(obj)
            kubeconfig = self.plane.service_account_kubeconfig(SYSTEM_NS, f"determined-master-{RELEASE}",
                                                               self.work / "master.kubeconfig")
            self.chart_config = chart_master_config(objects)
            port = free_low_port()
            config = json.loads(json.dumps(self.chart_config))
            config.update(port=port, root=str(master_dir(self.version) / "src" / "master"),
                          cache={"cache_dir": str(self.work / "cache")}, log={"level": "debug", "color": False})
            config.setdefault("db", {}).update(host="127.0.0.1", port=self.postgres.port,
                                               password=self.postgres.password)
            config["checkpoint_storage"] = {**config.get("checkpoint_storage", {}),
                                            "host_path": str(self.work / "checkpoints")}
            where = ({"determined_master_scheme": "http", "determined_master_host": "127.0.0.1"}
                     if _version_tuple(self.version) >= (0, 38) else {"determined_master_ip": "127.0.0.1"})
            config["resource_manager"].update(kubeconfig_path=str(kubeconfig), determined_master_port=port, **where)
            self.master = Master(self.version, binary, self.work, config, port).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.master is not None:
            self.master.stop()
        self.postgres.stop()
        shutil.rmtree(self.postgres.directory, ignore_errors=True)

    @property
    def m(self) -> Master:
        assert self.master is not None, "the master is not started"
        return self.master

    def reconfigure(self, **resource_manager: Any) -> None:
        """Restart the master with these resource_manager fields changed (e.g. default_scheduler="")."""
        self.m.stop()
        self.m.config["resource_manager"].update(resource_manager)
        self.m.start()

    # -- what the cluster holds --

    def pods(self) -> list[dict[str, Any]]:
        status, body = self.plane.request("GET", f"/api/v1/namespaces/{TASK_NS}/pods")
        if status != 200:
            raise AssertionError(f"list pods: {status} {body}")
        return list(body["items"])

    def trial_pods(self, experiment: int) -> list[dict[str, Any]]:
        """The experiment's live task pods: by their determined.ai/experiment_id label, or (masters that do not set
        it) by the trial's description in their name (exp-E-trial-T)."""
        import re

        named = re.compile(rf"(?:^|-)exp-{experiment}-trial-[0-9]+-")
        out = []
        for pod in self.pods():
            meta = pod["metadata"]
            labels = meta.get("labels") or {}
            if "determined" not in labels or meta.get("deletionTimestamp"):
                continue
            label = labels.get("determined.ai/experiment_id")
            if label == str(experiment) or (label is None and named.search(meta["name"])):
                out.append(pod)
        return out

    def bound(self, experiment: int) -> tuple[int, int]:
        """(pods bound to a node, pods) of the experiment's live pods."""
        pods = self.trial_pods(experiment)
        return sum(1 for p in pods if p["spec"].get("nodeName")), len(pods)

    def events(self) -> list[dict[str, Any]]:
        return list(self.plane.request("GET", f"/api/v1/namespaces/{TASK_NS}/events")[1]["items"])

    def nodes(self, count: int, gpus: int = 4) -> None:
        """Exactly `count` kwok nodes of `gpus` GPUs, Ready and untainted."""
        from tests.support.realkube.cluster import fake_node

        _, listed = self.plane.request("GET", "/api/v1/nodes")
        for item in (listed or {}).get("items", []):
            if int(item["metadata"]["name"].rsplit("-", 1)[-1]) >= count:
                self.plane.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}", {"gracePeriodSeconds": 0})
        for i in range(count):
            made = fake_node(f"gpu-{i}", gpus=gpus)
            # where kwok serves the node's kubelet API (pods/log, which the master follows), as its Stage would say
            made["status"]["addresses"] = [{"type": "InternalIP", "address": "127.0.0.1"},
                                           {"type": "Hostname", "address": made["metadata"]["name"]}]
            made["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": self.plane.kwok_port}}
            self.plane.apply(made)

        def ready() -> bool:
            items = self.plane.request("GET", "/api/v1/nodes")[1]["items"]
            return len(items) == count and all(
                any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or ())
                and not n["spec"].get("taints") for n in items)

        self.plane.wait_for(f"{count} nodes Ready and untainted", ready, timeout=60)

    # -- the master, through the det CLI and its REST API --

    def det_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
        env.update(DET_MASTER=self.m.url, DET_USER="admin", DET_PASS=PASSWORD, NO_COLOR="1", HOME=str(self.m.home))
        self.m.home.mkdir(parents=True, exist_ok=True)
        return env

    def create(self, name: str, slots: int, *, priority: int | None = None, extra: Mapping[str, Any] | None = None
               ) -> subprocess.Popen[str]:
        """`det experiment create` of a one-trial experiment of `slots` GPUs, started (kwok runs nothing)."""
        model = Path(tempfile.mkdtemp(prefix="model-", dir=self.work))
        config: dict[str, Any] = {"name": name, "entrypoint": "python3 train.py", "max_restarts": 0,
                                  "resources": {"slots_per_trial": slots},
                                  "searcher": {"name": "single", "metric": "loss"}}
        if _version_tuple(self.version) < (0, 38):
            config["searcher"]["max_length"] = {"batches": 1}
        if priority is not None:
            config["resources"]["priority"] = priority
        config.update(extra or {})
        (model / "const.yaml").write_text(json.dumps(config) + "\n")
        (model / "train.py").write_text("print('never runs under kwok')\n")
        return subprocess.Popen([str(det_cli(self.version)), "experiment", "create", str(model / "const.yaml"),
                                 str(model)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.det_env(), start_new_session=True)

    def submit(self, *slots: int, priority: int | None = None, extra: Mapping[str, Any] | None = None) -> list[int]:
        """One experiment per entry of `slots`, all submitted at once (they contend as users' would); their ids."""
        procs = [self.create(f"exp-{s}gpu-{n}", s, priority=priority, extra=extra) for n, s in enumerate(slots)]
        ids = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                raise AssertionError(f"det experiment create exited {proc.returncode}: {out[-2000:]}{err[-2000:]}")
            ids.append(_experiment_id(out))
        return ids

    def det(self, *args: str, timeout: float = 120) -> str:
        out = subprocess.run([str(det_cli(self.version)), *args], capture_output=True, text=True, timeout=timeout,
                             env=self.det_env(), start_new_session=True)
        if out.returncode != 0:
            raise AssertionError(f"det {' '.join(args)} exited {out.returncode}: {out.stdout[-2000:]}{out.stderr[-2000:]}")
        return out.stdout

    def kill(self, experiment: int) -> None:
        self.m.api("POST", f"/api/v1/experiments/{experiment}/kill")

    def kill_all(self, timeout: float = 180) -> None:
        """Every experiment killed, and every task pod gone (the next round starts on an empty cluster)."""
        listed = self.m.api("GET", "/api/v1/experiments?limit=500")
        for exp in listed.get("experiments") or ():
            if exp["state"] not in ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"):
                self.kill(int(exp["id"]))
        self.plane.wait_for("every task pod gone", lambda: not self.pods(), timeout=timeout, interval=0.5)

    def state(self, experiment: int) -> str:
        return str(self.m.api("GET", f"/api/v1/experiments/{experiment}")["experiment"]["state"])

    def trial_id(self, experiment: int) -> int:
        trials = self.m.api("GET", f"/api/v1/experiments/{experiment}/trials")["trials"]
        return int(trials[0]["id"])


def _experiment_id(out: str) -> int:
    """The id in `det experiment create`'s "Created experiment N"."""
    import re

    found = re.search(r"Created experiment (\d+)", out)
    if found is None:
        raise AssertionError(f"no experiment id in det experiment create's output: {out[-500:]}")
    return int(found.group(1))


def prepare(version: str = MASTER_VERSION) -> tuple[Path, Path]:
    """Build what the real-master tests need: the master and the det CLI (cached per release)."""
    binary = build_master(version)
    det = det_cli(version)
    return binary, det


if __name__ == "__main__":
    try:
        versions = sys.argv[1:] or [MASTER_VERSION]
        for v in versions:
            prepare(v)
            say(f"Determined {v}: master and det CLI are in {master_dir(v)} and {cache_root() / 'determined-cli' / v}")
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
