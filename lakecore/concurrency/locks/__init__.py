"""Table locks: the protocol (`protocol.py`), one provider per module (`in_process.py`, `storage.py`,
`zookeeper.py`: kazoo's recipe, imported only when a table's lock is on ZooKeeper) and the choice of
one from options or from the provider a table records in table.json (`choice.py`, with `TableLock`).

Mutual exclusion only: what a lock protects is the write protocol's (`concurrency/transaction.py`);
the kazoo clients are `concurrency/zookeeper`'s. The public names are re-exported by
`lakecore.concurrency`.
"""
