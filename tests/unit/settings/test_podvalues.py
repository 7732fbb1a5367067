"""podvalues.py: what the corpus does not pin down, the messages, hints and versions."""

from __future__ import annotations

from det_k8s.settings.podvalues import check_pod_values, quantity_hint


def found(spec: dict, kube: tuple[int, int] = (1, 37)) -> dict[str, str]:
    return {".".join(str(p) for p in f.path[1:]): f.message for f in check_pod_values({"spec": spec}, kube)}


def test_quantity_hints_say_what_was_meant():
    assert quantity_hint("64GB") == "did you mean 64G (powers of 10) or 64Gi (powers of 2)?"
    assert quantity_hint("8 GiB") == "did you mean 8Gi?"
    assert quantity_hint("8 cores") == "did you mean 8?"
    assert quantity_hint("2 CPUs") == "did you mean 2?"
    assert quantity_hint("abc").startswith("a quantity is a number")


def test_environment_variable_names_follow_the_version():
    env = {"containers": [{"name": "determined-container", "env": [{"name": "1VAR", "value": "x"}]}]}
    assert found(env, (1, 37)) == {}
    assert found(env, (1, 31)) == {"containers.0.env.0.name": "'1VAR' is not a valid environment variable name "
                                   "(letters, digits, '_', '-' and '.', not starting with a digit)"}


def test_proc_mount_is_judged_only_where_the_api_server_keeps_it():
    """Before 1.33 the ProcMountType gate is off by default and kube-apiserver drops procMount before validating (a
    generated case found on the real 1.31.0: `Unmasked` without hostUsers false was accepted there)."""
    unmasked = {"containers": [{"name": "determined-container", "securityContext": {"procMount": "Unmasked"}}]}
    odd = {"containers": [{"name": "determined-container", "securityContext": {"procMount": "default"}}]}
    assert found(unmasked, (1, 37)) == {"containers.0.securityContext.procMount":
                                        "Unmasked needs the pod's hostUsers: false (a user namespace)"}
    assert found(unmasked, (1, 33)) != {} and found(odd, (1, 33)) != {}
    assert found(unmasked, (1, 32)) == {} and found(odd, (1, 31)) == {}
    assert found({**unmasked, "hostUsers": False}, (1, 37)) == {}


def test_required_node_affinity_values_are_label_values_from_1_32():
    """A generated case found on the real kube-apiserver 1.37.2 (a 64-character value under `In`); 1.31 accepts it,
    and a preferred term's values are never checked."""
    long = "a" * 64
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["ok", long]}]}
    required = {"containers": [{"name": "determined-container"}], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}}
    preferred = {"containers": [{"name": "determined-container"}], "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": term}]}}}
    where = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.0." \
            "matchExpressions.0.values.1"
    assert list(found(required, (1, 37))) == [where] and list(found(required, (1, 32))) == [where]
    assert "is not a valid label value" in found(required, (1, 37))[where]
    assert found(required, (1, 31)) == {}
    assert found(preferred, (1, 37)) == {}


def test_env_values_are_never_echoed():
    secret = "hunter2-Secret"
    spec = {"containers": [{"name": "determined-container", "env": [
        {"name": "A=B", "value": secret, "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}
    messages = found(spec)
    assert set(messages) == {"containers.0.env.0.name", "containers.0.env.0.valueFrom"}
    assert secret not in " ".join(messages.values())


def test_every_problem_of_one_pod_spec_at_once():
    spec = {"tolerations": [{"key": "a", "operator": "Equals", "effect": "NoSchedul"}, None],
            "containers": [None, {"name": "determined-container",
                                  "resources": {"requests": {"cpu": "abc", "memory": "64GB", "gpu": 1}}}],
            "restartPolicy": "never"}
    assert sorted(found(spec)) == [
        "containers.0", "containers.1.resources.requests.cpu", "containers.1.resources.requests.gpu",
        "containers.1.resources.requests.memory", "restartPolicy", "tolerations.0.effect", "tolerations.0.operator",
        "tolerations.1"]


def test_wrong_types_are_left_to_the_schema_check():
    spec = {"tolerations": [{"key": 5, "operator": 7, "effect": True}],
            "containers": [{"name": "determined-container", "resources": {"requests": {"cpu": True}}, "env": "x",
                            "ports": [{"containerPort": "80"}]}]}
    assert found(spec) == {}


def test_container_restart_policies_follow_the_version():
    """ContainerRestartRules (beta, on from 1.35): before it a regular container's restartPolicy is refused and an
    init container's may only be Always; the real kube-apiserver 1.31.13 refused exactly these."""
    spec = {"initContainers": [{"name": "init", "image": "x", "restartPolicy": "Never"},
                               {"name": "side", "image": "x", "restartPolicy": "Always"}],
            "containers": [{"name": "determined-container", "restartPolicy": "OnFailure"}]}
    assert found(spec, (1, 37)) == {} and found(spec, (1, 35)) == {}
    assert found(spec, (1, 34)) == {
        "initContainers.0.restartPolicy": "must be Always for an init container on Kubernetes 1.34 (a sidecar), "
                                          "found 'Never'",
        "containers.0.restartPolicy": "may not be set for non-init containers on Kubernetes 1.34 (per-container "
                                      "restart policies came with 1.35)"}
