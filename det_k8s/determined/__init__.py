"""What det-k8s knows about Determined itself, release by release (pure: no I/O)."""
