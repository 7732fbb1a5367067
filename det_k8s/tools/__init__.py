"""The external tools det-k8s drives: one subprocess helper, and the helm and kubectl runners on top of it."""

# The node label the Determined agent pods select and det-k8s's default taint: here, not in kubectl.py, so that
# `det-k8s nodes --help` (which names the taint) need not import the kubectl runner, helm's and yaml with it.
from ..labels import AGENT_LABEL, AGENT_VALUE

DEFAULT_TAINT = f"{AGENT_LABEL}={AGENT_VALUE}:NoSchedule"
