"""The cluster as data: nodes, pods, resources, taints and selectors (pure, no API calls)."""
