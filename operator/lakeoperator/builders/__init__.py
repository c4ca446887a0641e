"""Pure builders: typed specs -> the job arguments and Kubernetes objects the operator applies.

Each builder returns plain values or dicts, decides nothing (the planners in `plan/` do) and talks
to nothing; golden tests (tests/lakeoperator/builders) pin their output. (Not named `build`: pytest's
default norecursedirs and common .gitignore files skip a folder of that name at any depth.)
"""
