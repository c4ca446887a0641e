"""A real ZooKeeper server for tests: the product's local launcher of one (lakeoperator.launch.zookeeper),
which the demo uses too."""

from lakeoperator.launch.zookeeper import (
    HOST,
    SLF4J_BINDING_JAR,
    ZOOKEEPER_JAR,
    ZooKeeperServer,
    free_port,
    java_executable,
    port_is_open,
    zookeeper_missing_reason,
)

__all__ = ["HOST", "SLF4J_BINDING_JAR", "ZOOKEEPER_JAR", "ZooKeeperServer", "free_port", "java_executable",
           "port_is_open", "zookeeper_missing_reason"]
