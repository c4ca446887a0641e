"""Pure builders: typed specs -> the job arguments and Kubernetes objects the operator applies.

Each builder returns plain values or dicts, decides nothing (the planners in `plan/` do) and talks
to nothing; golden tests beside them (tests/lakeoperator/builders; a folder named build is skipped by pytest) pin their output.
"""
