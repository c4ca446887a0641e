"""Test support: external systems (ZooKeeper, S3) run locally, and the pytest fixtures that own them."""
