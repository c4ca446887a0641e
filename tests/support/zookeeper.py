"""A real ZooKeeper server for tests: the developer tools' launcher of one (lakeoperator.dev.zookeeper),
which the demo uses too."""

from lakeoperator.dev.zookeeper import (
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
