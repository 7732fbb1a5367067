import pytest

from tests.cli.test_experiment_commands import gpus  # noqa: F401
from tests.conftest import example


@pytest.mark.parametrize("method,plural,status,after", [
    ("POST", "configmaps", 409, 0), ("POST", "configmaps", 429, 0), ("POST", "configmaps", 503, 0),
    ("POST", "pods", 429, 0), ("POST", "pods", 422, 1), ("POST", "pods", 409, 0), ("POST", "pods", 504, 2),
    ("GET", "nodes", 429, 0), ("PUT", "leases", 409, 0), ("POST", "leases", 403, 0), ("PUT", "configmaps", 409, 0),
    ("PATCH", "configmaps", 500, 0), ("DELETE", "pods", 500, 0),
])
def test_create_faults(run_cli, cluster, gpus, method, plural, status, after):  # noqa: F811
    cluster.api.fail(method, plural, status, "boom", times=100, after=after)
    r = run_cli("experiment", "create", example("experiments") / "distributed-12gpu-a.yaml", "-f", gpus)
    pods = [p["metadata"]["name"] for p in cluster.api.items("pods")]
    cms = [c["metadata"]["name"] for c in cluster.api.items("configmaps")]
    with open("/tmp/r3a/faults.txt", "a") as f:
        f.write(f"== {method} {plural} {status} after={after}: rc={r.code}\n{r.out}{r.err}pods={pods}\ncms={cms}\n")
    assert "Traceback" not in r.err and "internal error" not in r.err
    cluster.api.faults.clear()
    r2 = run_cli("experiment", "list")
    with open("/tmp/r3a/faults.txt", "a") as f:
        f.write(f"-- list rc={r2.code}\n{r2.out}{r2.err}pods={[p['metadata']['name'] for p in cluster.api.items('pods')]}\n")
