"""A live scheduling pass as a reconcile: observe -> decide -> record -> act -> confirm.

    observe   the queue (after `create.recover` swept what an interrupted creation left), the cluster (one
              `ClusterState`), det-k8s's pods by group, the master's groups (`master_pods.MasterPods.collect`,
              which also repairs partly bound and orphaned gangs and sweeps a binding fence left behind)
    decide    `decide.decide`: pure, the ordered intents of the pass and its plan
    record    a `Create` records its intent in the queue entry before its first pod (kube/doomed.py)
    act       `act.act`: each intent by the module of its kind (settle, leftovers, evict, create, wait)
    confirm   the PassReport: what was done, and whether the pass left anything waiting (the loop's backlog)

`LiveScheduler._pass` (kube/scheduler.py) is the one driver; `experiment create`, `scheduler run --once` and the
loop all run it, so what any of them finds left by an interrupted pass is repaired the same way.
"""
