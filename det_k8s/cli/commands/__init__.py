"""One module per command group of det-k8s (cli/app.py lists them and loads each only when its command runs)."""
