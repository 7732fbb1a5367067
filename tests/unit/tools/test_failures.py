"""helm and kubectl failures in det-k8s's own words: one line, the context named, klog noise gone."""

from __future__ import annotations

from det_k8s.errors import ClusterError, ClusterUnreachable, Forbidden, NotFound, ToolFailed, UsageError
from det_k8s.tools.failures import explain, meaningful_lines

KLOG = ("E0312 10:00:00.123456   12345 memcache.go:265] couldn't get current server API group list: Get "
        '"http://localhost:8080/api?timeout=32s": dial tcp [::1]:8080: connect: connection refused')


def test_klog_lines_and_repeats_are_not_the_tools_message():
    text = f"{KLOG}\n{KLOG}\nThe connection to the server localhost:8080 was refused\nUse --debug for details\n"
    assert meaningful_lines(text) == ["The connection to the server localhost:8080 was refused"]


def test_unreachable_in_any_wording_names_the_address_and_context():
    error = explain("kubectl", ["kubectl", "label", "nodes", "a"], 1, f"{KLOG}\n", context="prod")
    assert isinstance(error, ClusterUnreachable)
    assert error.message == "kubectl label nodes: cannot reach the Kubernetes API (context prod): [::1]:8080: " \
                            "connection refused"
    helm = explain("helm", ["helm", "list", "--kube-context", "lab"], 1, "Error: Kubernetes cluster unreachable: Get "
                   '"https://x:6443/version": dial tcp: lookup x on 1.1.1.1:53: no such host\n')
    assert isinstance(helm, ClusterUnreachable) and "(context lab)" in helm.message


def test_credentials_rbac_tls_and_missing_contexts():
    assert isinstance(explain("helm", ["helm", "list"], 1, "Error: Unauthorized\n"), Forbidden)
    forbidden = explain("helm", ["helm", "list"], 1, 'Error: secrets is forbidden: User "bob" cannot list\n',
                        context="dev")
    assert isinstance(forbidden, Forbidden) and forbidden.message.endswith("(context dev)")
    tls = explain("helm", ["helm", "list"], 1, "Error: Get ...: x509: certificate signed by unknown authority\n")
    assert isinstance(tls, ClusterError) and "TLS certificate was not accepted" in tls.message
    missing = explain("kubectl", ["kubectl", "label"], 1, 'error: context "nope" does not exist\n')
    assert isinstance(missing, UsageError) and missing.message == "kubectl label: no context nope in your kubeconfig"


def test_a_403_from_admission_is_not_called_an_rbac_problem():
    # Seen from a real API server: helm install into a namespace that was still being deleted.
    stderr = ('Error: INSTALLATION FAILED: create: failed to create: secrets "sh.helm.release.v1.demo.v1" is '
              "forbidden: unable to create new content in namespace detrel because it is being terminated\n")
    error = explain("helm", ["helm", "install", "demo", "c", "--namespace", "detrel"], 1, stderr, context="real")
    assert isinstance(error, Forbidden) and error.hint == (
        "detrel is being deleted: wait until `kubectl get namespace detrel` finds nothing, or use another namespace")
    quota = explain("helm", ["helm", "install", "demo", "c", "-n", "ml"], 1,
                    'Error: pods "x" is forbidden: exceeded quota: gpu-quota, requested: nvidia.com/gpu=4\n')
    assert quota.hint == "a ResourceQuota refuses it: kubectl describe resourcequota -n ml"


def test_a_missing_release_is_not_found_naming_it():
    error = explain("helm", ["helm", "get", "manifest", "demo", "--namespace", "ml"], 1, "Error: release: not found\n",
                    context="dev")
    assert isinstance(error, NotFound)
    assert error.message == "no release demo in namespace ml (context dev)"
    history = explain("helm", ["helm", "history", "demo"], 1, "Error: release: not found\n")
    assert history.message == "no release demo in the current namespace (the current context)"


def test_anything_else_keeps_the_tools_error_line_and_scrubs_secrets():
    error = explain("helm", ["helm", "install", "demo"], 1,
                    "Error: INSTALLATION FAILED: template: x: password s3cr3t is bad\n", secrets=["s3cr3t"])
    assert isinstance(error, ToolFailed)
    assert error.message == "helm install demo failed (exit 1): Error: INSTALLATION FAILED: template: x: password " \
                            "<redacted> is bad"
    assert "s3cr3t" not in error.stderr


def test_a_silent_server_is_the_address_and_the_innermost_cause():
    # helm 4.1 and kubectl 1.35 against a server that accepts connections and never answers (their exact stderr)
    helm = explain("helm", ["helm", "list"], 1, 'Error: kubernetes cluster unreachable: Get '
                   '"https://127.0.0.1:18766/version": net/http: TLS handshake timeout\n', context="silent")
    assert isinstance(helm, ClusterUnreachable)
    assert helm.message == "helm list: cannot reach the Kubernetes API (context silent): 127.0.0.1:18766: TLS " \
                           "handshake timeout"
    kubectl = explain("kubectl", ["kubectl", "label", "nodes", "a"], 1,
                      "Unable to connect to the server: net/http: TLS handshake timeout\n", context="silent")
    assert kubectl.message == "kubectl label nodes: cannot reach the Kubernetes API (context silent): TLS handshake " \
                              "timeout"
    lookup = explain("helm", ["helm", "list"], 1, 'Error: Kubernetes cluster unreachable: Get "https://x:6443/version": '
                     "dial tcp: lookup x on 10.0.0.2:53: no such host\n", context="lab")
    assert lookup.message == "helm list: cannot reach the Kubernetes API (context lab): x:6443: no such host"
