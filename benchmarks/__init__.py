"""det-k8s benchmarks: one command (`python -m benchmarks`) measures, `RESULTS.md` records.

Five benchmarks, each a module with `run(config) -> dict` (JSON data, no judgement):
`scheduling` (one pass and the whole `det-k8s plan` against json.load), `quality` (GPUs placed
against an exact optimum), `contention` (the gang scheduler against per-pod placement in a
simulation), `submission` (pods created per second through the real client) and `startup`.
`report` turns the data into RESULTS.md, goals and verdicts included. Timings are never asserted
anywhere: tests/benchmarks/test_harness.py only checks that a quick run produces well-formed data.
"""
