"""The live scheduler's runtime: the loop, the Lease, the pass and the writes it makes.

A live pass is a reconcile: observe -> decide -> act.

    observe   the queue, the cluster (one `ClusterState`), det-k8s's pods by group and the master's groups
    decide    `decide.decide`: pure, the ordered intents of the pass and its plan
    act       `act.act`: each intent by the module of its kind (settle, leftovers, evict, create, wait, master)

`scheduler.LiveScheduler` drives one pass; `experiment create`, `scheduler run --once` and the loop all run it.
`kube/` below it is only the API client.
"""
