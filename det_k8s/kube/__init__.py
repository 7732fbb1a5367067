"""The only package that talks to the Kubernetes API (and the only one importing `kubernetes`)."""
