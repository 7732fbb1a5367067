"""`python -m det_k8s`."""

from .cli import main

raise SystemExit(main())
