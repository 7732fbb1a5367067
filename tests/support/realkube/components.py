"""Build the real Kubernetes components the tests and benchmarks run, once per machine, from the Go module proxy.

One row per component in ``COMPONENTS``: its module, version and the Go packages built from it. Binaries go to a
cache outside the clone, ``$DET_K8S_CACHE`` or ``~/.cache/det-k8s``, under ``<component>/<version>/``, so only the
first build on a machine pays (kube-apiserver: 10-30 minutes on a cold 2-core machine). A build prints a line at
least every 20 seconds: no minute of silence.

``k8s.io/kubernetes`` cannot be ``go install``-ed at a version: its go.mod replaces its staging modules
(``k8s.io/api``, ``k8s.io/apimachinery``, ...) with local paths. The usual way, done here, is a small go.mod of our
own that requires ``k8s.io/kubernetes`` and replaces every staging module with the published ``v0.x.y`` of the same
release. etcd's server module has the same shape. The Go toolchain is the machine's (``GOTOOLCHAIN=local``) and must
be of the minor version the Kubernetes release names in its ``.go-version``: a newer Go builds a kube-apiserver whose
``/openapi/v2`` is broken (seen with Go 1.27 and Kubernetes 1.36).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The newest Kubernetes release served here; the oldest the clouds still support is the second target
# (`scripts/cluster build --kube-version 1.31.x`), outside CI's time.
KUBE_VERSION = os.environ.get("DET_K8S_KUBE_VERSION", "1.37.2")
# etcd 3.6 serves every Kubernetes from 1.31 to 1.37 (1.37 names 3.7.0 in build/dependencies.yaml).
ETCD_VERSION = "3.6.16"
KWOK_VERSION = "0.8.0"
KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def cache_root() -> Path:
    return Path(os.environ.get("DET_K8S_CACHE") or Path.home() / ".cache" / "det-k8s")


def say(msg: str) -> None:
    print(f"==> {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    etcd: Path
    kwok: Path
    kube_version: str
    etcd_version: str
    kwok_version: str


class BuildError(RuntimeError):
    pass


def go_binary() -> str | None:
    return shutil.which("go")


def _go_env(gopath_bin: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"
    env["GOFLAGS"] = "-buildvcs=false -mod=mod"
    env["CGO_ENABLED"] = "0"
    if gopath_bin is not None:
        env["GOBIN"] = str(gopath_bin)
    return env


def _run(argv: list[str], cwd: Path, what: str, env: dict[str, str], timeout: float = 3600) -> str:
    """Run a go command, printing a heartbeat every 20 s; its output is shown only when it fails."""
    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(20):
                say(f"  {what}: still building ({time.monotonic() - started:.0f} s)")

        t = threading.Thread(target=beat, daemon=True)
        t.start()
        try:
            rc = proc.wait(timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            stop.set()
        log.seek(0)
        out = log.read()
    if rc != 0:
        raise BuildError(f"{what}: `{' '.join(argv)}` exited {rc}:\n{out[-4000:]}")
    return out


def _kube_staging_replaces(version: str, env: dict[str, str], work: Path) -> list[str]:
    """The staging modules k8s.io/kubernetes@vVERSION replaces with ./staging paths, pinned to their v0.x.y."""
    out = _run(["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"], work, "go mod download", env)
    gomod = Path(json.loads(out[out.index("{"):])["GoMod"]).read_text()
    staging = re.findall(r"^\s*(k8s\.io/[\w.\-/]+)\s+=>\s+\./staging/", gomod, re.M)
    if not staging:
        raise BuildError(f"k8s.io/kubernetes@v{version}: no staging replaces found in its go.mod")
    minor = version.split(".", 1)[1]
    return [f"replace {m} => {m} v0.{minor}" for m in staging]


def _check_go_version(version: str, env: dict[str, str]) -> None:
    have = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, env=env, timeout=60).stdout.strip()
    gomod_dir = Path(env.get("GOMODCACHE") or subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, env=env, timeout=60).stdout.strip())
    want_file = gomod_dir / f"k8s.io/kubernetes@v{version}" / ".go-version"
    if want_file.is_file():
        want = want_file.read_text().strip()
        if ".".join(have.removeprefix("go").split(".")[:2]) != ".".join(want.split(".")[:2]):
            say(f"  warning: Kubernetes {version} names Go {want} (.go-version); building with {have}")


def build_kube(version: str = KUBE_VERSION) -> dict[str, Path]:
    dest = cache_root() / "kubernetes" / f"v{version}"
    want = {name: dest / name for name in KUBE_BINARIES}
    if all(p.is_file() for p in want.values()):
        return want
    env = _go_env()
    with tempfile.TemporaryDirectory(prefix="det-k8s-kube-build-") as tmp:
        work = Path(tmp)
        (work / "go.mod").write_text("module detk8s.local/kubebuild\n\ngo 1.26.0\n")
        say(f"Kubernetes {version}: resolving k8s.io/kubernetes and its staging modules (go mod download)")
        replaces = _kube_staging_replaces(version, env, work)
        (work / "go.mod").write_text(
            "module detk8s.local/kubebuild\n\ngo 1.26.0\n\n"
            f"require k8s.io/kubernetes v{version}\n\n" + "\n".join(replaces) + "\n")
        (work / "tools.go").write_text(
            "//go:build tools\n\npackage tools\n\nimport (\n"
            + "".join(f'\t_ "k8s.io/kubernetes/cmd/{n}"\n' for n in KUBE_BINARIES) + ")\n")
        say(f"Kubernetes {version}: go mod tidy (downloads every module the three binaries need)")
        _run(["go", "mod", "tidy"], work, "go mod tidy", env)
        _check_go_version(version, env)
        dest.mkdir(parents=True, exist_ok=True)
        for name in KUBE_BINARIES:
            say(f"Kubernetes {version}: building {name} (the first build on a machine takes 10-30 minutes)")
            t0 = time.monotonic()
            partial = dest / f".{name}.partial"
            _run(["go", "build", "-trimpath", "-ldflags", _kube_ldflags(version), "-o", str(partial),
                  f"k8s.io/kubernetes/cmd/{name}"], work, name, env)
            partial.replace(dest / name)
            say(f"  {name} built in {time.monotonic() - t0:.0f} s")
    return want


def _kube_ldflags(version: str) -> str:
    # What the Kubernetes build stamps, so /version says the real release (kubectl and helm read it).
    major, minor, _ = version.split(".", 2)
    pkgs = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
    flags = ["-s", "-w"]
    for p in pkgs:
        flags += [f"-X {p}.gitVersion=v{version}", f"-X {p}.gitMajor={major}", f"-X {p}.gitMinor={minor}",
                  f"-X {p}.gitTreeState=clean", f"-X {p}.buildDate=1970-01-01T00:00:00Z"]
    return " ".join(flags)


def build_etcd(version: str = ETCD_VERSION) -> Path:
    dest = cache_root() / "etcd" / f"v{version}" / "etcd"
    if dest.is_file():
        return dest
    env = _go_env()
    with tempfile.TemporaryDirectory(prefix="det-k8s-etcd-build-") as tmp:
        work = Path(tmp)
        (work / "go.mod").write_text(
            "module detk8s.local/etcdbuild\n\ngo 1.26.0\n\n"
            f"require go.etcd.io/etcd/server/v3 v{version}\n")
        (work / "tools.go").write_text('//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n')
        say(f"etcd {version}: go mod tidy")
        _run(["go", "mod", "tidy"], work, "go mod tidy (etcd)", env)
        dest.parent.mkdir(parents=True, exist_ok=True)
        say(f"etcd {version}: building (2-5 minutes the first time)")
        partial = dest.parent / ".etcd.partial"
        _run(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial), "go.etcd.io/etcd/server/v3"],
             work, "etcd", env)
        partial.replace(dest)
    return dest


def build_kwok(version: str = KWOK_VERSION) -> Path:
    dest = cache_root() / "kwok" / f"v{version}" / "kwok"
    if dest.is_file() and (dest.parent / STAGES_FILE).is_file():
        return dest
    with tempfile.TemporaryDirectory(prefix="det-k8s-kwok-build-") as tmp:
        env = _go_env(Path(tmp) / "bin")
        env["GOFLAGS"] = "-buildvcs=false"
        say(f"kwok {version}: go install sigs.k8s.io/kwok/cmd/kwok@v{version} (2-5 minutes the first time)")
        _run(["go", "install", "-trimpath", "-ldflags", "-s -w", f"sigs.k8s.io/kwok/cmd/kwok@v{version}"],
             Path(tmp), "kwok", env)
        dest.parent.mkdir(parents=True, exist_ok=True)
        _kwok_stages(version, env, dest.parent / STAGES_FILE)
        shutil.move(str(Path(tmp) / "bin" / "kwok"), dest)
    return dest


# kwok run on its own (not through kwokctl) needs its Stages in a config file: the ones kwokctl uses by default, read
# from kwok's module (node: initialize, heartbeat; pod: ready, delete), but for pod-complete, which ends every pod a
# Job owns at once: a Determined trial runs until it is done, so a test ends a pod itself (status.phase Succeeded).
KWOK_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat/node-heartbeat.yaml", "pod/fast/pod-ready.yaml",
               "pod/fast/pod-delete.yaml")
STAGES_FILE = "stages-v2.yaml"  # renamed whenever KWOK_STAGES changes, so a cached kwok gets the new list


def _kwok_stages(version: str, env: dict[str, str], dest: Path) -> None:
    modcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, env=env,
                              timeout=60).stdout.strip()
    root = Path(modcache) / f"sigs.k8s.io/kwok@v{version}" / "kustomize" / "stage"
    docs = [(root / rel).read_text().strip().removeprefix("---").strip() for rel in KWOK_STAGES]
    dest.write_text("\n---\n".join(docs) + "\n")


# The coscheduling plugin of sigs.k8s.io/scheduler-plugins, a peer in the side-by-side benchmark
# (benchmarks/sidebyside.py). v0.34.7 is built against Kubernetes 1.34, so it is built with its own Kubernetes version
# set (its go.mod's replace directives, copied), not KUBE_VERSION; it talks to the 1.37 API server as a client.
SCHEDULER_PLUGINS_VERSION = "0.34.7"
SCHEDULER_PLUGINS_MODULE = "sigs.k8s.io/scheduler-plugins"
# Module versions its go.mod pins that the Go module proxy here refuses (403 "This module version is not available"),
# replaced by the nearest patch release it serves: the same minor, so the same API.
SCHEDULER_PLUGINS_OVERRIDES = {"k8s.io/csi-translation-lib": "v0.34.5"}  # v0.34.6 and v0.34.7 refused (2026-11)
# Only the plugin the benchmark runs is registered: the module's cmd/scheduler registers all of them, which pulls
# in more packages to build for nothing.
_COSCHED_MAIN = """package main

import (
\t"os"

\t"k8s.io/component-base/cli"
\t_ "k8s.io/component-base/metrics/prometheus/clientgo"
\t_ "k8s.io/component-base/metrics/prometheus/version"
\t"k8s.io/kubernetes/cmd/kube-scheduler/app"

\t_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
\t"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
)

func main() {
\tcommand := app.NewSchedulerCommand(app.WithPlugin(coscheduling.Name, coscheduling.New))
\tos.Exit(cli.Run(command))
}
"""


def coscheduling_paths(version: str = SCHEDULER_PLUGINS_VERSION) -> tuple[Path, Path]:
    """(the scheduler binary, the PodGroup CRD manifest) in the cache."""
    dest = cache_root() / "scheduler-plugins" / f"v{version}"
    return dest / "coscheduling-scheduler", dest / "podgroup-crd.yaml"


def build_coscheduling(version: str = SCHEDULER_PLUGINS_VERSION) -> tuple[Path, Path]:
    """Build kube-scheduler with the coscheduling plugin from sigs.k8s.io/scheduler-plugins@vVERSION, once."""
    binary, crd = coscheduling_paths(version)
    if binary.is_file() and crd.is_file():
        return binary, crd
    if go_binary() is None:
        raise BuildError("Go is not installed: the coscheduling scheduler is built from its Go module")
    env = _go_env()
    with tempfile.TemporaryDirectory(prefix="det-k8s-cosched-build-") as tmp:
        work = Path(tmp)
        (work / "go.mod").write_text("module detk8s.local/coschedbuild\n\ngo 1.26.0\n")
        say(f"scheduler-plugins {version}: go mod download")
        out = _run(["go", "mod", "download", "-json", f"{SCHEDULER_PLUGINS_MODULE}@v{version}"], work,
                   "go mod download", env)
        info = json.loads(out[out.index("{"):])
        gomod = Path(info["GoMod"]).read_text()
        # Its replace directives, single-line and block form, copied as they are (module => module version).
        replaces = re.findall(r"^\s*(?:replace\s+)?([\w.\-/]+\s+=>\s+[\w.\-/]+\s+v[\w.\-+]+)\s*$", gomod, re.M)
        if not replaces:
            raise BuildError(f"{SCHEDULER_PLUGINS_MODULE}@v{version}: no replace directives found in its go.mod")
        replaces = [f"{r.split()[0]} => {r.split()[0]} {SCHEDULER_PLUGINS_OVERRIDES[r.split()[0]]}"
                    if r.split()[0] in SCHEDULER_PLUGINS_OVERRIDES else r for r in replaces]
        (work / "go.mod").write_text(
            "module detk8s.local/coschedbuild\n\ngo 1.26.0\n\n"
            f"require {SCHEDULER_PLUGINS_MODULE} v{version}\n\n"
            + "".join(f"replace {r}\n" for r in replaces))
        (work / "main.go").write_text(_COSCHED_MAIN)
        say(f"scheduler-plugins {version}: go mod tidy (Kubernetes 1.34 modules, as its go.mod pins them)")
        _run(["go", "mod", "tidy"], work, "go mod tidy (scheduler-plugins)", env)
        binary.parent.mkdir(parents=True, exist_ok=True)
        kube = re.search(r"^\s*k8s\.io/kubernetes\s+=>\s+k8s\.io/kubernetes\s+v([\d.]+)", gomod, re.M)
        say(f"scheduler-plugins {version}: building the coscheduling scheduler (5-20 minutes the first time)")
        t0 = time.monotonic()
        partial = binary.parent / ".coscheduling-scheduler.partial"
        _run(["go", "build", "-trimpath", "-ldflags", _kube_ldflags(kube.group(1) if kube else "1.34.0"),
              "-o", str(partial), "."], work, "coscheduling scheduler", env)
        partial.replace(binary)
        shutil.copyfile(Path(info["Dir"]) / "manifests" / "coscheduling" / "crd.yaml", crd)
        say(f"  coscheduling scheduler built in {time.monotonic() - t0:.0f} s")
    return binary, crd


def cached(kube_version: str = KUBE_VERSION) -> Binaries | None:
    """The binaries (Kubernetes `kube_version`) if all are built already (no Go needed), else None."""
    root = cache_root()
    kube = root / "kubernetes" / f"v{kube_version}"
    b = Binaries(kube / "kube-apiserver", kube / "kube-controller-manager", kube / "kube-scheduler",
                 root / "etcd" / f"v{ETCD_VERSION}" / "etcd", root / "kwok" / f"v{KWOK_VERSION}" / "kwok",
                 kube_version, ETCD_VERSION, KWOK_VERSION)
    paths = (b.kube_apiserver, b.kube_controller_manager, b.kube_scheduler, b.etcd, b.kwok,
             b.kwok.parent / STAGES_FILE)
    return b if all(p.is_file() for p in paths) else None


@contextlib.contextmanager
def build_lock(what: str) -> Iterator[None]:
    """One build of `what` at a time on this machine: a second process (a test run beside `./scripts/test`'s build)
    waits for the first, saying so every 20 s, and then finds the binaries cached."""
    import fcntl

    cache_root().mkdir(parents=True, exist_ok=True)
    with (cache_root() / f".{what}.lock").open("w") as lock:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if int(time.monotonic() - started) % 20 == 0:
                    say(f"  another process is building {what}: waiting ({time.monotonic() - started:.0f} s)")
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_all() -> Binaries:
    if (have := cached()) is not None:
        say(f"real control plane: Kubernetes {KUBE_VERSION}, etcd {ETCD_VERSION}, kwok {KWOK_VERSION} are in "
            f"{cache_root()}")
        return have
    if go_binary() is None:
        raise BuildError("Go is not installed: the real control plane is built from Go modules (install Go 1.26)")
    with build_lock("control-plane"):
        if (have := cached()) is not None:
            return have
        return _build_all()


def _build_all() -> Binaries:
    t0 = time.monotonic()
    build_etcd()
    build_kwok()
    build_kube()
    say(f"real control plane built in {time.monotonic() - t0:.0f} s into {cache_root()}")
    built = cached()
    assert built is not None
    return built


if __name__ == "__main__":
    try:
        if sys.argv[1:] == ["coscheduling"]:
            build_coscheduling()
        else:
            build_all()
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
