"""The live scheduler's runtime: the loop, the Lease, the pass and the writes it makes.

A live pass is a reconcile kernel: observe -> decide -> act -> result.

    observe   reads only: the queue, the cluster (one `ClusterState`), det-k8s's pods by group, the master's
              groups (master_pods.MasterPods.observe), the pods interrupted creations left
    decide    pure: `decide.recover` (what interrupted creations left), `master_actions.collect` (the master's
              repairs, ready and bound groups), `decide.decide` (the ordered intents and the plan; its fast form
              for the loop's fast pass)
    act       every intent by the actor its kind names (`act.ACTORS`: settle, leftovers, evict, create, wait;
              `master_pods._ACTORS` for the master's), through `effects.Effects`, never the driver
    result    the `PassReport`, and for the loop a `PassResult` (done, or a full pass wanted at once)

`scheduler.LiveScheduler` drives one pass; `experiment create`, `scheduler run --once` and the loop (`loop.py`) all
run it. `kube/` below it is only the API client.
"""
