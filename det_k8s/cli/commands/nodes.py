"""`det-k8s nodes list|label|unlabel|taint|check-gpu`: the nodes Determined's task pods run on.

Reads go through the API adapter. Labels and taints go through kubectl (see `tools/kubectl.py`
for why): the agent label `determined.ai/pedl-agent=present` and the taint
`determined.ai/pedl-agent=present:NoSchedule` are the ones the PEDL document describes.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from ...errors import DetK8sError, UsageError
from ...release.gpu_check import IMAGE
from ...tools import DEFAULT_TAINT
from ...tools.duration import HELP as DURATION_HELP
from ...tools.duration import go_duration, parse_duration
from .. import output
from ..common import KubectlBinaryOpt, cluster, kube_flags, kubectl
from ..inputs import SetOpt, SetStringOpt, ValuesOpt
from ..nodemap import ByOpt, GroupByOpt, HtmlOpt, QueuesFileOpt, SummaryOpt, SvgOpt
from ..options import OutputOpt, current, with_global_options, with_options
from ..output import OutputFormat

app = typer.Typer(help="Cluster nodes: capacity, a map of who holds each GPU, the agent label, taints, a GPU check.",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
                  rich_markup_mode=None)
NodesArg = Annotated[list[str], typer.Argument(metavar="NODE...", help="Node names.", show_default=False)]
POLL_SECONDS = 1.0


def _cpu(milli: int) -> str:
    from fractions import Fraction

    from ...quantity import format_cpu

    return format_cpu(Fraction(milli, 1000))


CLUSTER_SCOPED = ("kube_context", "kubeconfig", "verbose", "debug")


def _no_namespace(ctx: typer.Context, value: str | None) -> None:
    if value is not None:
        raise UsageError(f"-n {value}: nodes belong to no namespace; nodes {ctx.info_name} takes no -n",
                         hint="drop -n")


NoNamespaceOpt = Annotated[str | None, typer.Option("--namespace", "-n", hidden=True, callback=_no_namespace,
                                                    metavar="NAME", help="Refused: nodes belong to no namespace.")]


@app.command("list")
@with_options(*CLUSTER_SCOPED)  # nodes belong to no namespace: no -n
def list_nodes(output_format: OutputOpt = OutputFormat.table, namespace: NoNamespaceOpt = None) -> None:
    """Per node: readiness, GPUs and CPUs allocatable/requested, taints, the agent label."""
    from ...cluster.model import GPU
    from ...kube.snapshot import read_snapshot
    from ...labels import AGENT_LABEL, AGENT_VALUE

    api = current().connect()
    snapshot = read_snapshot(api)
    rows: list[dict[str, Any]] = []
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        used = snapshot.used[node.name]
        rows.append({"name": node.name, "ready": node.ready, "schedulable": not node.unschedulable,
                     "gpu": {"capacity": node.capacity.get(GPU, 0) // 1000, "allocatable": node.gpus,
                             "requested": used.get(GPU, 0) // 1000},
                     "cpu": {"capacity": _cpu(node.capacity.get("cpu", 0)),
                             "allocatable": _cpu(node.allocatable.get("cpu", 0)),
                             "requested": _cpu(used.get("cpu", 0))},
                     "taints": [str(t) for t in node.taints], "agent": node.labels.get(AGENT_LABEL) == AGENT_VALUE})
    if output_format is not OutputFormat.table:
        output.data(rows, output_format)
        return
    output.table(["NAME", "READY", "SCHEDULABLE", "GPU (alloc/req)", "CPU (alloc/req)", "TAINTS", "AGENT"],
                 [[r["name"], "yes" if r["ready"] else "no", "yes" if r["schedulable"] else "no",
                   f"{r['gpu']['allocatable']}/{r['gpu']['requested']}",
                   f"{r['cpu']['allocatable']}/{r['cpu']['requested']}", ", ".join(r["taints"]) or "-",
                   "yes" if r["agent"] else "-"] for r in rows])


@app.command("map")
@with_global_options
def map_(
    snapshot_file: Annotated[Path | None, typer.Option(
        "--snapshot", metavar="FILE", show_default=False,
        help="Draw this snapshot (`kubectl get nodes,pods -A -o json`) instead of the live cluster.")] = None,
    selector: Annotated[str | None, typer.Option(
        "--selector", "-l", metavar="SELECTOR", show_default=False,
        help="Only nodes matching this label selector (e.g. node-pool=a100,!gpu.example/broken).")] = None,
    group_by: GroupByOpt = None,
    by: ByOpt = "holder",
    policy_file: QueuesFileOpt = None,
    summary: SummaryOpt = None,
    svg: SvgOpt = None,
    html: HtmlOpt = None,
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Who holds each GPU (or CPU slot) of each node: Determined, det-k8s, other pods, free, reserved."""
    from ..nodemap import MapRequest, queues_for_map, run_map

    request = MapRequest(selector, group_by, summary, svg, html)  # usage errors first, before anything is read
    queues = queues_for_map(by, snapshot_file, policy_file)
    run_map(snapshot_file, values, set_, set_string, replace(request, queues=queues), output_format)


@app.command("label")
@with_options(*CLUSTER_SCOPED)  # nodes belong to no namespace: no -n
def label(nodes: NodesArg, kubectl_binary: KubectlBinaryOpt = None, namespace: NoNamespaceOpt = None) -> None:
    """Add the agent label determined.ai/pedl-agent=present (kubectl label --overwrite)."""
    from ...labels import AGENT_LABEL, AGENT_VALUE
    from ...tools.kubectl import label_argv

    argv = label_argv(nodes, kube_flags(None))  # node names checked before anything else is read
    kubectl(kubectl_binary, cluster()).run(argv)
    output.success(f"Labelled {', '.join(nodes)} {AGENT_LABEL}={AGENT_VALUE}")


@app.command("unlabel")
@with_options(*CLUSTER_SCOPED)  # nodes belong to no namespace: no -n
def unlabel(nodes: NodesArg, kubectl_binary: KubectlBinaryOpt = None, namespace: NoNamespaceOpt = None) -> None:
    """Remove the agent label (kubectl label NODE determined.ai/pedl-agent-)."""
    from ...labels import AGENT_LABEL
    from ...tools.kubectl import unlabel_argv

    argv = unlabel_argv(nodes, kube_flags(None))  # node names checked before anything else is read
    kubectl(kubectl_binary, cluster()).run(argv)
    output.success(f"Removed {AGENT_LABEL} from {', '.join(nodes)}")


@app.command("taint")
@with_options(*CLUSTER_SCOPED)  # nodes belong to no namespace: no -n
def taint(
    args: Annotated[list[str], typer.Argument(metavar="NODE... KEY=VALUE:EFFECT", show_default=False,
                                              help=f"Nodes, then the taint (e.g. {DEFAULT_TAINT}).")],
    remove: Annotated[bool, typer.Option("--remove", help="Remove the taint instead (like KEY:EFFECT-, or KEY- for "
                                         "every effect).")] = False,
    kubectl_binary: KubectlBinaryOpt = None,
    namespace: NoNamespaceOpt = None,
) -> None:
    """Taint nodes so only pods that tolerate it (Determined's) run there; effect NoSchedule|PreferNoSchedule|NoExecute."""
    from ...tools.kubectl import parse_taint, taint_argv

    if len(args) < 2 or (":" not in args[-1] and not args[-1].endswith("-") and not remove):  # `KEY-`: kubectl's
        raise UsageError("nodes taint: give the nodes, then the taint",
                         hint=f"e.g. det-k8s nodes taint gpu-0 gpu-1 {DEFAULT_TAINT}")
    spec = parse_taint(args[-1], remove=remove)
    argv = taint_argv(args[:-1], spec, kube_flags(None))  # node names checked before anything else is read
    kubectl(kubectl_binary, cluster()).run(argv)
    every = " (every effect)" if not spec.effect else ""
    output.success(f"{'Removed' if spec.remove else 'Set'} taint {spec.argument().rstrip('-')}{every} on "
                   f"{', '.join(args[:-1])}")


@app.command("check-gpu")
@with_global_options
def check_gpu(
    node: Annotated[str | None, typer.Argument(metavar="[NODE]", help="Run on this node (default: any GPU node).",
                                               show_default=False)] = None,
    timeout: Annotated[str, typer.Option("--timeout", metavar="DURATION",
                                         help=f"How long to wait: {DURATION_HELP}.")] = "5m",
    image: Annotated[str, typer.Option("--image", metavar="IMAGE", help="A CUDA image with nvidia-smi.")] = IMAGE,
) -> None:
    """Run a pod that requests one nvidia.com/gpu and runs nvidia-smi; show its output; always delete it."""
    from ...errors import NotFound
    from ...kube.kinds import EVENTS, NODES, PODS
    from ...names import check_node_name, shown
    from ...release.gpu_check import container_waiting, gpu_check_pod, scheduling_problem

    seconds = parse_duration(timeout)
    if not image.strip() or not image.isprintable() or any(c.isspace() for c in image):
        raise UsageError(f"--image {shown(image)}: not an image reference", hint=f"e.g. --image {IMAGE}")
    if node is not None:
        check_node_name(node)
    api = current().connect()
    namespace = api.namespace
    if node is not None:
        try:
            api.get(NODES, node)
        except NotFound:  # a pod pinned there would wait out the whole --timeout, Pending
            raise UsageError(f"NODE {node}: no such node in the cluster", hint="see `det-k8s nodes list`") from None
    created = api.create(PODS, gpu_check_pod(node, image), namespace)
    name = created["metadata"]["name"]
    output.message(f"Created pod {namespace}/{name} (1 nvidia.com/gpu{', on node ' + node if node else ''})")
    phase, problem, pod = "Pending", None, created
    try:
        deadline = time.monotonic() + seconds
        with output.spinner(f"waiting for {name} (up to {go_duration(timeout)})"):
            while time.monotonic() < deadline:
                pod = api.get(PODS, name, namespace)
                phase = (pod.get("status") or {}).get("phase") or "Pending"
                if phase in ("Succeeded", "Failed"):
                    break
                if phase == "Pending":
                    problem = container_waiting(pod) or scheduling_problem(
                        api.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}"))
                time.sleep(POLL_SECONDS)
        if phase in ("Succeeded", "Failed"):
            text = api.logs(name, namespace, tail_lines=200)
            output.text(text.rstrip("\n") + "\n")
    finally:
        api.delete(PODS, name, namespace, grace_seconds=0, missing_ok=True)
        output.message(f"Deleted pod {namespace}/{name}")
    where = (pod.get("spec") or {}).get("nodeName") or node or "a node"
    if phase == "Succeeded":
        output.success(f"GPU check passed on {where}")
        return
    if phase == "Failed":
        raise DetK8sError(f"nvidia-smi failed on {where}", hint="check the NVIDIA driver and device plugin there")
    raise DetK8sError(f"the GPU check pod did not finish within {go_duration(timeout)}: " + (problem or f"still {phase}"))
