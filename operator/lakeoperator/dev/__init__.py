"""Developer tools the operator never runs: `weir demo` / `make demo` (demo.py, demo_progress.py), the
demo's and the tests' ZooKeeper server (zookeeper.py), and the CRD tools `make crds` and the CRD tests use
(crd_docs.py renders docs/crds.md, crd_schema.py applies and checks the CRDs' OpenAPI schemas).

Nothing in the operator imports this package (import-linter contract "operator layers": it sits above
the runtime, and only the `weir demo` command reaches into it, when run). It ships in the wheel so that
`weir demo` works from a checkout's virtualenv; the demo's scenarios are the checkout's examples/demo.
"""
