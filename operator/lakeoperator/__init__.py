"""Weir's Kubernetes operator: kopf handlers, reconcile planning, Kubernetes object builders, supervision.

Lives under the plain folder `operator/` (no `__init__.py` there): a package named `operator` would shadow
the standard library's `operator` module.
"""
