"""Pure builders: typed specs -> the job arguments and Kubernetes objects the operator applies.

Each builder returns plain values or dicts, decides nothing (the planners in `plan/` do) and talks
to nothing; golden tests (tests/lakeoperator/builders: pytest skips folders named build) pin
their output.
"""
