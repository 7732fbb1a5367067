""""Valid" means the master accepts it (issue 35, item 3): the validation corpus's settings cases on the REAL
Determined master, built from its source in ../shared.

For each `chart` case of tests/support/validation_corpus.py:
- det-k8s judges it offline, as `validate` does for a fresh install (tests/unit/settings/test_validation_corpus.judge).
- Accepted: the master configuration det-k8s would install (`det-k8s render` of the case's settings, then
  `helm template`) must start the real master (it answers /info).
- Refused: the chart's master configuration for the case's settings is rendered without det-k8s (`helm template` of
  the bundled chart with the case's values over CHART_BASE's; `--is-upgrade` where the chart refuses a fresh install).
  When that differs from CHART_BASE's, the refused setting is one the master reads (a master reason), and the master
  must refuse to start on it. When it does not differ, the refusal is another component's (the API server's, for a
  Deployment or a PersistentVolumeClaim) and the master is not asked.
- A case naming a release (`appVersion`) runs on it when it is buildable here (RELEASES), else is skipped, saying so.
Every master runs as the bundled chart configures it, changed only in OUT_OF_CLUSTER's fields (tests/support/realkube/
determined.py) and `db.name` (a database per release, and a fresh one for a case about the initial password: the
master checks it only on a database it has not migrated yet). One PostgreSQL and one control plane (the API server
alone: the master only needs it to start) serve every case.

    pytest tests/real/test_master_accepts.py          # CI: every master-reason refusal, a stratified sample of the
                                                      # accepted cases (seed printed; DET_K8S_SAMPLE_SEED sets it),
                                                      # and the bundled chart on the second release
    python -m tests.real.test_master_accepts --all    # every case, per case agree/disagree and the figures
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import validation_corpus as corpus
from tests.support.needs import need
from tests.support.realkube.components import BuildError
from tests.support.realkube.determined import (
    CHART_SETTINGS,
    OUT_OF_CLUSTER,
    RELEASE,
    REPO,
    SYSTEM_NS,
    Master,
    Postgres,
    build_master,
    cached_master,
    chart_master_config,
    free_low_port,
    master_dir,
    postgres_bin,
    render_chart,
    source_of,
)
from tests.unit.settings.test_validation_corpus import judge

pytestmark = pytest.mark.real

DEFAULT_RELEASE = "0.38.1"
SECOND_RELEASE = "0.32.1"
RELEASES = (DEFAULT_RELEASE, SECOND_RELEASE)  # buildable here from ../shared (0.29.1 too, not built by the tests)
# Beyond OUT_OF_CLUSTER: the test's one PostgreSQL holds a database per release, and a fresh one per case about the
# initial password.
TEST_FIELDS = {
    "db.name": "a database of the test's PostgreSQL: one per release (migrated once), a fresh one for a case about "
               "the initial password",
    "resource_manager.determined_master_ip/port (before 0.38)": "127.0.0.1 and the master's port, where OUT_OF_CLUSTER "
               "has determined_master_scheme/host/port: releases before 0.38 have only these two (an unknown field "
               "stops them), and look up the master Service without them",
}
PASSWORD_KEYS = ("initialUserPassword", "defaultPassword")
START_TIMEOUT = 120.0  # the first start on a database migrates it (tens of seconds on a busy 2-core machine)

# Cases where det-k8s and the real master disagree, on purpose: case name -> why (one line).
KNOWN_DISAGREEMENTS: dict[str, str] = {
    "initialUserPassword missing on 0.38.1 (a fresh install)":
        "the chart refuses it (helm's `required`, as the official chart does), not the master: 0.38.1 starts a "
        "fresh database without a password unless feature_switches holds prevent_blank_password",
    "cpuPodSpec with a toleration typo":
        "the master keeps pod specs as they are (it does not validate tolerations); the API server refuses every CPU "
        "task pod made from it, which det-k8s reports at install",
}


# -- what the master is asked -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    case: str
    release: str
    det_k8s: str  # accept / refuse
    errors: list[str]
    rendered: str = ""  # how the master configuration was made
    master: str = ""  # accept / refuse / no answer / not asked / skipped
    detail: str = ""
    seconds: float = 0.0

    @property
    def asked(self) -> bool:
        return self.master in (corpus.ACCEPT, corpus.REFUSE, "no answer")

    @property
    def agrees(self) -> bool:
        return self.master == self.det_k8s

    def line(self) -> str:
        if not self.asked:
            return f"{self.master:9} {self.case!r}: {self.detail}"
        word = "agree" if self.agrees else "KNOWN" if self.case in KNOWN_DISAGREEMENTS else "DISAGREE"
        out = (f"{word:9} {self.case!r} on {self.release}: det-k8s {self.det_k8s}s, the master {self.master}s "
               f"({self.seconds:.1f} s, {self.rendered})")
        if not self.agrees:
            out += f"\n          det-k8s: {self.errors[:1]}\n          master: {self.detail[-400:]}"
        elif self.master == corpus.REFUSE:
            out += f"\n          master: {self.detail[-300:]}"
        return out


def as_settings_case(case: corpus.Case) -> corpus.Case:
    """A chart case as it is; a pod-spec case as settings: CHART_BASE with the spec as taskContainerDefaults.cpuPodSpec
    (where a user writes it; the master decodes it into its own Kubernetes API's Pod when it starts)."""
    if case["kind"] == "chart":
        return case
    return {**case, "name": f"cpuPodSpec: {case['name']}", "kind": "chart",
            "value": {"taskContainerDefaults": {"cpuPodSpec": case["value"]}}, "podspec": True}


def release_of(case: corpus.Case) -> str | None:
    """The release the case runs on: its appVersion when it names one and it is buildable here, else the default;
    None when it names a release that cannot run here."""
    named = corpus.as_settings(case).get("appVersion")
    if named is None:
        return DEFAULT_RELEASE
    return str(named) if str(named) in RELEASES else None


def _touches_password(case: corpus.Case) -> bool:
    return any(key in case["value"] for key in PASSWORD_KEYS)


@dataclass
class Release:
    version: str
    binary: Path
    kubeconfig: Path
    chart_dir: Path  # `det-k8s render` of CHART_BASE: the bundled chart for refused cases' values to go over
    base_config: dict[str, Any]  # its master configuration


@dataclass
class Bench:
    """One PostgreSQL, one control plane, and for each release its master's RBAC, a database and a base chart."""

    plane: Any
    work: Path
    postgres: Postgres | None = None
    releases: dict[str, Release] = field(default_factory=dict)
    _databases: int = 0

    def start(self) -> Bench:
        self.postgres = Postgres(Path(tempfile.mkdtemp(prefix="det-k8s-pg-"))).start()
        self.plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}})
        return self

    def stop(self) -> None:
        if self.postgres is not None:
            self.postgres.stop()
            shutil.rmtree(self.postgres.directory, ignore_errors=True)

    def database(self, name: str) -> str:
        assert self.postgres is not None
        self.postgres._create_database(name)
        return name

    def fresh_database(self) -> str:
        self._databases += 1
        return self.database(f"fresh_{self._databases}")

    def release(self, version: str) -> Release:
        if version in self.releases:
            return self.releases[version]
        binary = build_master(version)
        work = self.work / f"release-{version}"
        work.mkdir(parents=True, exist_ok=True)
        objects = render_chart(work, corpus.CHART_BASE, version)
        for obj in objects:  # the master's ServiceAccount and ClusterRole(Binding), as the chart ships them
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding", "ServiceAccount") and \
                    obj["metadata"]["name"] == f"determined-master-{RELEASE}":
                self.plane.apply(obj)
        kubeconfig = self.plane.service_account_kubeconfig(SYSTEM_NS, f"determined-master-{RELEASE}",
                                                           work / "master.kubeconfig")
        self.database(_db_name(version))
        made = Release(version, binary, kubeconfig, work / "chart", chart_master_config(objects))
        self.releases[version] = made
        return made

    # -- the master configuration of a case --

    def chart_config(self, case: corpus.Case, release: Release, work: Path) -> tuple[dict[str, Any] | None, str]:
        """The master configuration the chart renders from the case's settings, without det-k8s's checks."""
        overlay = work / "case-values.yaml"
        overlay.write_text(yaml.safe_dump(case["value"]))  # None deletes a key of CHART_BASE's, as in as_settings
        for extra in ((), ("--is-upgrade",)):
            out = subprocess.run([_helm(), "template", RELEASE, str(release.chart_dir), "-n", SYSTEM_NS, "-f",
                                  str(overlay), *extra], capture_output=True, text=True, timeout=120)
            if out.returncode == 0:
                how = "helm template" + (" --is-upgrade (the chart refuses a fresh install)" if extra else "")
                return chart_master_config([d for d in yaml.safe_load_all(out.stdout) if d]), how
            last = out.stderr.strip().splitlines()[-1:] or [""]
        return None, f"helm template refuses it: {last[0][:300]}"

    def config_of(self, case: corpus.Case, outcome: Outcome, release: Release, work: Path
                  ) -> dict[str, Any] | None:
        if outcome.det_k8s == corpus.ACCEPT:
            outcome.rendered = "det-k8s render"
            return chart_master_config(render(work, corpus.as_settings(case), release.version))
        config, how = self.chart_config(case, release, work)
        outcome.rendered = how
        if config is None:
            outcome.master, outcome.detail = "not asked", how
            return None
        if config == release.base_config:
            outcome.master = "not asked"
            outcome.detail = (f"not a master reason: the chart's master configuration is CHART_BASE's "
                              f"(refused for {case['why'] or 'another reason'})")
            return None
        return config

    # -- the master --

    def out_of_cluster(self, config: Mapping[str, Any], release: Release, work: Path, port: int,
                       database: str) -> dict[str, Any]:
        """The chart's master configuration changed only in OUT_OF_CLUSTER's fields and TEST_FIELDS'."""
        assert self.postgres is not None
        out = copy.deepcopy(dict(config))
        out.update(port=port, root=str(master_dir(release.version) / "src" / "master"),
                   cache={"cache_dir": str(work / "cache")}, log={"level": "debug", "color": False})
        out.setdefault("db", {}).update(host="127.0.0.1", port=self.postgres.port, password=self.postgres.password,
                                        name=database)
        out["checkpoint_storage"] = {**out.get("checkpoint_storage", {}), "host_path": str(work / "checkpoints")}
        rm = out.get("resource_manager")
        if isinstance(rm, dict):
            rm.update(kubeconfig_path=str(release.kubeconfig), determined_master_port=port)
            if _knows(release.version, "determined_master_host"):
                rm.update(determined_master_scheme="http", determined_master_host="127.0.0.1")
            else:  # before 0.38: determined_master_ip (a master Service's ClusterIP otherwise)
                rm.update(determined_master_ip="127.0.0.1")
        return out

    def ask(self, config: Mapping[str, Any], release: Release, work: Path, database: str) -> tuple[str, str, float]:
        """Start the real master on `config`: (accept/refuse/no answer, what it said, seconds)."""
        port = free_low_port()
        master = Master(release.version, release.binary, work, self.out_of_cluster(config, release, work, port,
                                                                                   database), port)
        t0 = time.monotonic()
        try:
            master.start(timeout=START_TIMEOUT)
        except BuildError as e:
            exited = master.proc is not None and master.proc.poll() is not None
            return (corpus.REFUSE if exited else "no answer"), _last_error(str(e)), time.monotonic() - t0
        finally:
            seconds = time.monotonic() - t0
            master.stop()
        return corpus.ACCEPT, "answered /info", seconds

    def run(self, case: corpus.Case, index: int) -> Outcome:
        det_k8s, errors = judge(case)
        outcome = Outcome(case["name"], release_of(case) or "", det_k8s, errors)
        if not outcome.release:
            outcome.master = "skipped"
            outcome.detail = (f"names Determined {corpus.as_settings(case)['appVersion']}, which is not buildable "
                              f"here ({', '.join(RELEASES)})")
            return outcome
        if case.get("podspec") and det_k8s == corpus.REFUSE and not _says_master(errors):
            outcome.master = "not asked"
            outcome.detail = f"a pod spec refused for the API server's rule ({case['why']}), not the master's"
            return outcome
        release = self.release(outcome.release)
        work = self.work / f"case-{index:03d}"
        work.mkdir(parents=True, exist_ok=True)
        config = self.config_of(case, outcome, release, work)
        if config is None:
            return outcome
        database = self.fresh_database() if _touches_password(case) else _db_name(release.version)
        outcome.master, outcome.detail, outcome.seconds = self.ask(config, release, work, database)
        return outcome

    def bundled_chart(self, version: str) -> tuple[str, str, float]:
        """The master of `version` on the bundled chart's master configuration as the real-master tests install it
        (CHART_SETTINGS), on a database of its own."""
        release = self.release(version)
        work = self.work / f"bundled-{version}"
        work.mkdir(parents=True, exist_ok=True)
        config = chart_master_config(render_chart(work, CHART_SETTINGS, version))
        return self.ask(config, release, work, self.fresh_database())


def render(work: Path, settings: Mapping[str, Any], version: str) -> list[dict[str, Any]]:
    """render_chart's objects (`det-k8s render`, then `helm template`), det-k8s run in this process: a Python
    start per case would cost more than the master's."""
    from det_k8s.cli import main as det_k8s

    values = work / "site.yaml"
    values.write_text(yaml.safe_dump({**settings, "appVersion": version}))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = det_k8s(["render", "-f", str(values), "--output-dir", str(work / "chart")])
    if code != 0:
        raise BuildError(f"det-k8s render exited {code}: {err.getvalue().strip()[-1000:]}")
    out = subprocess.run([_helm(), "template", RELEASE, str(work / "chart"), "-n", SYSTEM_NS], capture_output=True,
                         text=True, timeout=120)
    if out.returncode != 0:
        raise BuildError(f"helm template: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _knows(version: str, field_name: str) -> bool:
    """Whether the release's resource_manager configuration has this field (read in its own source)."""
    source = master_dir(version) / "src" / "master" / "internal" / "config" / "resource_manager_config.go"
    return f'json:"{field_name}' in source.read_text()


def _db_name(version: str) -> str:
    return "determined_" + version.replace(".", "_")


def _helm() -> str:
    helm = shutil.which("helm", path=f"{REPO / '.tools' / 'bin'}:{os.environ.get('PATH', '')}")
    if helm is None:
        raise BuildError("helm is not in .tools/bin (./scripts/test fetches it)")
    return helm


def _last_error(text: str) -> str:
    """The master's reason: its error lines (logrus's `level=error`, or `ERRO[...]` in colour before its logger is
    configured, and Check's `error found at ...`), without Go's stack frames; else the tail."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    picked = [line.strip() for line in plain.splitlines()
              if re.search(r"level=(error|fatal)|^(ERRO|FATA)\[|error found at|cannot unmarshal", line.strip())]
    return " | ".join(picked[-4:]) if picked else plain[-600:]


@contextlib.contextmanager
def bench(work: Path, plane: Any) -> Iterator[Bench]:
    made = Bench(plane, work)
    try:
        yield made.start()
    finally:
        made.stop()


# -- which cases ----------------------------------------------------------------------------------------------------


def master_reason_candidates() -> list[corpus.Case]:
    """Refused settings cases whose setting may reach master.yaml (the run decides: their master configuration differs
    from CHART_BASE's). Offline: det-k8s's error names a key the chart writes into master.yaml."""
    keys = ("resourcePools", "taskContainerDefaults", "initialUserPassword", "defaultPassword")
    found = []
    for case in settings_cases():
        verdict, errors = judge(case)
        if verdict == corpus.REFUSE and (_says_master(errors) or not case.get("podspec") and any(
                line.removeprefix("error: ").startswith(keys) for line in errors)):
            found.append(case)
    return found


def _says_master(errors: list[str]) -> bool:
    """det-k8s's refusal names the master's rule (a pod spec's refusal is otherwise the API server's)."""
    return any("master refuses to start" in line for line in errors)


def settings_cases() -> list[corpus.Case]:
    """Every case of the corpus as settings: the chart cases, then the pod-spec cases as cpuPodSpec."""
    return corpus.chart_cases() + [as_settings_case(c) for c in corpus.podspec_cases()]


def _group(case: corpus.Case) -> str:
    """A case's group in the corpus: its kind and the first word of its name (masterCpuRequest, db, resourcePools;
    probe, port, containerPort, tolerations, ... for a pod spec)."""
    name = case["name"].removeprefix("cpuPodSpec: ")
    return ("pod spec " if case.get("podspec") else "") + name.split()[0].split(".")[0]


def sample(seed: int) -> list[corpus.Case]:
    """Every chart case refused for a master reason; one pod spec refused for a master reason per group, and one
    accepted case per group, chosen with `seed`."""
    rng = random.Random(seed)
    refused: dict[str, list[corpus.Case]] = {}
    accepted: dict[str, list[corpus.Case]] = {}
    for case in master_reason_candidates():
        refused.setdefault(_group(case), []).append(case)
    for case in settings_cases():
        if judge(case)[0] == corpus.ACCEPT and release_of(case) is not None:
            accepted.setdefault(_group(case), []).append(case)
    chart = [c for c in master_reason_candidates() if not c.get("podspec")]
    pods = [rng.choice(cases) for group, cases in sorted(refused.items()) if group.startswith("pod spec ")]
    return chart + pods + [rng.choice(cases) for _, cases in sorted(accepted.items())]


def summary(outcomes: list[Outcome]) -> str:
    asked = [o for o in outcomes if o.asked]
    agreed = sum(o.agrees for o in asked)
    known = sum(not o.agrees and o.case in KNOWN_DISAGREEMENTS for o in asked)
    return (f"{len(outcomes)} settings cases: {len(asked)} run on the real master, {agreed} agreements, "
            f"{len(asked) - agreed} disagreements ({known} known), "
            f"{sum(o.master == 'not asked' for o in outcomes)} refused for no master reason (not asked), "
            f"{sum(o.master == 'skipped' for o in outcomes)} skipped (release not buildable)")


# -- the CI test ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def master_bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    from tests.support.realkube.cluster import Options
    from tests.support.realkube.fixtures import start_plane

    need(source_of(DEFAULT_RELEASE) is not None, f"the Determined master {DEFAULT_RELEASE} is built from its source "
         "in ../shared/vendor/determined (or $DET_K8S_DETERMINED_SRC), which is not here")
    need(postgres_bin() is not None, "the Determined master needs PostgreSQL's server (Debian: apt-get install "
         "postgresql; ./scripts/test installs it where it can)")
    plane = start_plane(Options(scheduler=False, controller_manager=False, kwok=False))
    try:
        with bench(tmp_path_factory.mktemp("master-accepts"), plane) as made:
            yield made
    finally:
        plane.stop()


def test_the_master_agrees_with_det_k8s_on_a_sample_of_the_corpus(master_bench: Bench) -> None:
    seed = int(os.environ.get("DET_K8S_SAMPLE_SEED", "35"))
    cases = sample(seed)
    print(f"\nmaster accepts: {len(cases)} cases (seed {seed}; DET_K8S_SAMPLE_SEED={seed} repeats it)",
          file=sys.stderr)
    outcomes = []
    for i, case in enumerate(cases):
        outcome = master_bench.run(case, i)
        print(outcome.line(), file=sys.stderr)
        outcomes.append(outcome)
    print(summary(outcomes), file=sys.stderr)
    unexplained = [o.line() for o in outcomes if o.asked and not o.agrees and o.case not in KNOWN_DISAGREEMENTS]
    assert unexplained == [], "\n".join(unexplained)
    # a known disagreement that agrees now is stale: drop it from KNOWN_DISAGREEMENTS
    stale = [o.case for o in outcomes if o.asked and o.agrees and o.case in KNOWN_DISAGREEMENTS]
    assert stale == [], stale
    chart = [c["name"] for c in master_reason_candidates() if not c.get("podspec")]
    assert all(o.asked for o in outcomes if o.case in chart)  # every chart case refused for a master reason was asked


def test_the_master_starts_on_the_bundled_charts_configuration_of_the_second_release(master_bench: Bench) -> None:
    """The bundled chart's master configuration for 0.32.1 (0.38.1's: test_real_master.py)."""
    if cached_master(SECOND_RELEASE) is None:  # the second release is outside CI's time (it builds 0.38.1 only)
        pytest.skip(f"the Determined master {SECOND_RELEASE} is not built here: "
                    "`python -m tests.support.realkube.determined "
                    f"{SECOND_RELEASE}` builds it (about 5 minutes cold; CI builds 0.38.1 only)")
    verdict, detail, seconds = master_bench.bundled_chart(SECOND_RELEASE)
    assert verdict == corpus.ACCEPT, f"the master {SECOND_RELEASE} did not start on the bundled chart's configuration " \
                                     f"(changed only in {sorted(OUT_OF_CLUSTER) + sorted(TEST_FIELDS)}): {detail}"


# -- the whole corpus -----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    from tests.support.realkube.cluster import ControlPlane, Options
    from tests.support.realkube.components import build_all, cached

    parser = argparse.ArgumentParser(prog="python -m tests.real.test_master_accepts",
                                     description="The validation corpus's chart cases on the real Determined master.")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="every chart case")
    which.add_argument("--sample", type=int, metavar="SEED", help="the CI test's sample with this seed")
    parser.add_argument("--json", type=Path, help="also write every outcome here")
    args = parser.parse_args(argv)

    def stopped(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # the servers are stopped on the way out

    signal.signal(signal.SIGTERM, stopped)
    cases = settings_cases() if args.all else sample(args.sample)
    work = Path(tempfile.mkdtemp(prefix="det-k8s-master-accepts-"))
    plane = ControlPlane(cached() or build_all(), Options(scheduler=False, controller_manager=False, kwok=False))
    t0 = time.monotonic()
    outcomes: list[Outcome] = []
    try:
        plane.start()
        with bench(work, plane) as made:
            for i, case in enumerate(cases):
                outcome = made.run(case, i)
                print(outcome.line(), flush=True)
                outcomes.append(outcome)
            for version in RELEASES:
                if cached_master(version) is None:
                    print(f"skipped   the bundled chart on {version}: not built "
                          "(python -m tests.support.realkube.determined "
                          f"{version})")
                    continue
                verdict, detail, seconds = made.bundled_chart(version)
                print(f"{'agree' if verdict == corpus.ACCEPT else 'DISAGREE':9} the bundled chart's master "
                      f"configuration on {version}: the master {verdict}s ({seconds:.1f} s) {detail[-300:]}")
    finally:
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(summary(outcomes) + f"; {time.monotonic() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([o.__dict__ for o in outcomes], indent=1) + "\n")
    return 0 if all(o.agrees or o.case in KNOWN_DISAGREEMENTS for o in outcomes if o.asked) else 1


if __name__ == "__main__":
    sys.exit(main())
