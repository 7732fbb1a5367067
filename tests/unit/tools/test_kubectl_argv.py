"""kubectl argv for the node commands, and the taint syntax checked before kubectl runs."""

from __future__ import annotations

import pytest

from det_k8s.errors import UsageError
from det_k8s.tools.helm import KubeFlags
from det_k8s.tools.kubectl import TaintSpec, label_argv, parse_taint, taint_argv, unlabel_argv

TAIL = ["--request-timeout", "30s"]


def test_label_and_unlabel_use_the_pedl_agent_label():
    assert label_argv(["gpu-0", "gpu-1"], KubeFlags()) == ["label", "nodes", "gpu-0", "gpu-1",
                                                           "determined.ai/pedl-agent=present", "--overwrite", *TAIL]
    assert unlabel_argv(["gpu-0"], KubeFlags(None, "prod", "/kc")) == [
        "label", "nodes", "gpu-0", "determined.ai/pedl-agent-", "--context", "prod", "--kubeconfig", "/kc", *TAIL]


def test_taint_add_and_remove():
    add = parse_taint("determined.ai/pedl-agent=present:NoSchedule")
    assert add == TaintSpec("determined.ai/pedl-agent", "present", "NoSchedule")
    assert taint_argv(["n1"], add, KubeFlags()) == ["taint", "nodes", "n1", "determined.ai/pedl-agent=present:NoSchedule",
                                                    "--overwrite", *TAIL]
    removed = parse_taint("accelerator:NoExecute-")
    assert removed == TaintSpec("accelerator", "", "NoExecute", remove=True)
    assert taint_argv(["n1"], removed, KubeFlags()) == ["taint", "nodes", "n1", "accelerator:NoExecute-", *TAIL]
    assert parse_taint("gpu=yes:PreferNoSchedule", remove=True).argument() == "gpu=yes:PreferNoSchedule-"


@pytest.mark.parametrize("text,says", [
    ("accelerator=gpu", "no effect"),
    ("accelerator=gpu:NoScheduel", "effect 'NoScheduel' is not one of NoSchedule, PreferNoSchedule, NoExecute"),
    ("-bad=x:NoSchedule", "key '-bad' is not a valid label key"),
    ("key=bad value:NoSchedule", "value 'bad value' is not a valid label value"),
])
def test_bad_taints_are_usage_errors_with_the_default_as_example(text, says):
    with pytest.raises(UsageError) as info:
        parse_taint(text)
    assert says in str(info.value)
    assert "determined.ai/pedl-agent=present:NoSchedule" in (info.value.hint or "")


@pytest.mark.parametrize("bad", ["--all", "-l", "Node_1", "", "a" * 254])
def test_node_names_never_reach_kubectl_as_flags(bad):
    with pytest.raises(UsageError, match="not a Kubernetes node name"):
        label_argv([bad], KubeFlags())
    with pytest.raises(UsageError):
        taint_argv(["ok", bad], parse_taint("k=v:NoSchedule"), KubeFlags())


def test_real_node_names_pass():
    assert label_argv(["gke-pool-1.c.internal"], KubeFlags())[2] == "gke-pool-1.c.internal"
