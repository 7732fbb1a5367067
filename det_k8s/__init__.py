"""det-k8s: run the Determined deep-learning platform on Kubernetes, safely."""

__version__ = "0.1.0"
