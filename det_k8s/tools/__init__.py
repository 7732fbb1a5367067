"""The external tools det-k8s drives: one subprocess helper, and the helm and kubectl runners on top of it."""
