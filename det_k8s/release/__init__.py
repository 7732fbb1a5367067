"""The release lifecycle's logic: pure functions over data the adapters fetched.

The CLI (`det_k8s/cli/commands/release.py`, `pods.py`, `nodes.py`) fetches with the Kubernetes adapter and
the helm/kubectl runners, and calls these to decide: preflight problems, the master's address,
the status diagnosis, what an uninstall loses, which task pods belong to which experiment.
"""
