"""Conflicts: do two writes of a table conflict, and who finds out when.

`occ.py` decides at commit (optimistic and non-blocking concurrency; pure), `schema.py` decides which
schema concurrent writers commit (pure), `early.py` lets a writer find an older live writer on its file
groups before it writes a file, `outside.py` lets a supervisor find the conflicts among every live
write at once and stop the loser. Above rollback and liveness (a conflict's loser is rolled back; a
dead writer conflicts with nobody); below the write protocol (`concurrency/transaction.py`), which
calls the commit-time decisions under the table lock.
"""
