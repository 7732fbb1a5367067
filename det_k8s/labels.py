"""Every label and annotation key det-k8s writes or reads, in one place: its own `det-k8s.io/*` keys, Kubernetes'
recommended `app.kubernetes.io/*` labels, and the keys of helm and of the Determined master it reads.

`kubectl get pods -l det-k8s.io/group` lists det-k8s's task pods; `-l app.kubernetes.io/managed-by=det-k8s` every
object det-k8s created. Values are built elsewhere (`scheduling/labels.py` writes and reads a group's labels back).
"""

from __future__ import annotations

# -- Kubernetes' recommended labels ------------------------------------------------------------------------------
APP_NAME = "app.kubernetes.io/name"
APP_INSTANCE = "app.kubernetes.io/instance"  # the helm release
APP_VERSION = "app.kubernetes.io/version"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "det-k8s"  # MANAGED_BY's value on every object det-k8s creates

# -- det-k8s's task pods (and their Service): who, what priority, which rank of how many ------------------------
GROUP = "det-k8s.io/group"
EXPERIMENT = "det-k8s.io/experiment"
USER = "det-k8s.io/user"
PRIORITY = "det-k8s.io/priority"
RANK = "det-k8s.io/rank"
SIZE = "det-k8s.io/size"
ATTEMPT = "det-k8s.io/attempt"  # the creation attempt the pod belongs to (live/creation_records.py)
SUBMITTED_AT = "det-k8s.io/submitted-at"  # annotation, RFC 3339
PREEMPTED_AT = "det-k8s.io/preempted-at"  # annotation on a victim's pods, RFC 3339: when det-k8s marked them
PLANNED_NODE = "det-k8s.io/planned-node"  # a det-k8s pod kube-scheduler places (native gang): counted there until bound
# label of the preemption notice of a Job-based master (live/binder.py), whose value is the victim's allocation
PREEMPTION_NOTICE = "det-k8s.io/preemption-notice"
PURPOSE = "det-k8s.io/purpose"  # annotation: what an object det-k8s created is for, in words

# -- nodes ----------------------------------------------------------------------------------------------------------
BINDING_FENCE = "det-k8s.io/binding"  # taint: live/fence.py fences a node while the master's pods are bound to it

# -- the queue (ConfigMaps, live/queue.py) ------------------------------------------------------------------------
QUEUE_ENTRY = "det-k8s.io/queue-entry"
QUEUE_STATE = "det-k8s.io/state"

# -- the scheduling Lease's annotations (live/lease.py) -------------------------------------------------------------
PODS_VERSION = "det-k8s.io/pods-version"  # the newest pod revision the last holder's writes are within
SERVING = "det-k8s.io/serving"  # "<scheduler name> until <RFC 3339>": a loop binds the master's pods
SERVED_BY = "det-k8s.io/served-by"  # the holder identity of the loop that last wrote SERVING
HOLDER_PROCESS = "det-k8s.io/holder-process"  # "<boot id>/<pid namespace>/<pid>" of the holder's process
LAST_PASS = "det-k8s.io/last-pass"  # when the last pass under this Lease ended

# -- releases -------------------------------------------------------------------------------------------------------
SEEN_READY = "det-k8s.io/seen-ready"  # on helm's release records: the revision seen ready (release/record.py)
CHECK = "det-k8s.determined.ai/check"  # the pods of det-k8s's GPU check (release/gpu_check.py)
KEEP_POLICY = "helm.sh/resource-policy"  # helm's annotation: `keep` leaves the object behind on uninstall

# -- the Determined master's ----------------------------------------------------------------------------------------
DETERMINED = "determined"  # the master's task label (value: the allocation id); never on det-k8s pods
MASTER_LABELS = (DETERMINED, "determined-system", "determined-preemption")  # never on det-k8s pods
AGENT_LABEL = "determined.ai/pedl-agent"  # the node label the Determined agent pods select
AGENT_VALUE = "present"
