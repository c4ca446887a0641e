"""Liveness: who is alive at a table, and how a live process learns that it was declared dead.

`heartbeat.py` (a writer's heartbeat file and its proof of death, the expiry rule), `runs.py` (the run
claims under which one process at a time runs a table service), `writers.py` (the registry of live
writers a supervisor watches), `aborts.py` (abort flags on ZooKeeper and the writer's abort watch).
Above the locks (a run is claimed under the table lock) and the ZooKeeper plumbing; below rollback and
the conflict checks, which judge liveness with these modules. Decides nothing about what to do with a
dead writer: rolling it back is `concurrency/rollback.py`'s.
"""
