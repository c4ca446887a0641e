"""ZooKeeper digest ACLs keep tenants apart: the nodes of tenant A's table (lock, writer registry, abort
flags) carry A's ACL, so a process with tenant B's credentials, or with none, is refused at once with
ZooKeeperAccessDenied when it takes A's lock, registers or lists A's writers, or deletes A's lock node,
while A (and B on its own table, under the same shared bases) works as before."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry, writer_info
from lakecore.concurrency.locks.zookeeper import ZooKeeperLock, ZooKeeperLockConfig
from lakecore.concurrency.zookeeper import (
    PASSWORD_ENV,
    SHARED_ACL,
    USERNAME_ENV,
    Auth,
    Credentials,
    Endpoint,
    acl_for,
    close_shared_clients,
    ensure_table_paths,
    process_credentials,
    shared_clients,
)
from lakecore.errors import InvalidTableConfig, ZooKeeperAccessDenied

pytestmark = pytest.mark.zookeeper

A = Credentials("tenant-a", "a-secret")
B = Credentials("tenant-b", "b-secret")
TABLE_A, TABLE_B = "s3://lake-a/orders", "s3://lake-b/orders"
T1 = "20261122101500123"


class Tenancy:
    """Weir's node layout under a fresh root of the session's ZooKeeper, seen with chosen credentials."""

    def __init__(self, connect: str) -> None:
        self.connect = connect
        root = f"/acl-tests/{uuid.uuid4().hex[:8]}"
        self.locks_base, self.writers_base = f"{root}/locks", f"{root}/writers"
        self.aborts_base = f"{root}/aborts"

    def ensure(self, table: str, credentials: Auth) -> list[str]:
        return ensure_table_paths(self.connect, table, credentials=credentials, connection_timeout_s=5.0,
                                  locks_base=self.locks_base, writers_base=self.writers_base,
                                  aborts_base=self.aborts_base)

    def lock(self, table: str, credentials: Credentials | None) -> ZooKeeperLock:
        return ZooKeeperLock(ZooKeeperLockConfig.for_table(
            self.connect, table, base_path=self.locks_base, credentials=credentials,
            acquire_timeout_s=30.0, connection_timeout_s=5.0))

    def registry(self, credentials: Credentials | None) -> ZooKeeperWriterRegistry:
        return ZooKeeperWriterRegistry(self.connect, base_path=self.writers_base,
                                       connection_timeout_s=5.0, credentials=credentials)

    def client(self, credentials: Credentials | None) -> Any:
        endpoint = Endpoint(self.connect, connection_timeout_s=5.0, credentials=credentials)
        return shared_clients.client(endpoint)


@pytest.fixture
def zk(zookeeper_server: Any) -> Iterator[Tenancy]:
    yield Tenancy(zookeeper_server.connect_string)
    close_shared_clients()


def test_another_tenant_is_refused_on_every_node_of_a_table(zk: Tenancy) -> None:
    from kazoo.exceptions import NoAuthError

    lock_path, writers_path, aborts_path = zk.ensure(TABLE_A, A)
    a_lock = zk.lock(TABLE_A, A)
    assert a_lock.path == lock_path
    a_registry = zk.registry(A)
    with a_lock, a_registry.register(TABLE_A, T1, writer_info("upsert")):
        holder = zk.client(A).get_children(lock_path)[0]
        for who in (B, None):
            with pytest.raises(ZooKeeperAccessDenied, match=lock_path) as refused:
                zk.lock(TABLE_A, who).acquire()
            assert refused.value.user == (who.username if who else None)
            assert not refused.value.retryable
            registry = zk.registry(who)
            with pytest.raises(ZooKeeperAccessDenied, match=writers_path):
                registry.register(TABLE_A, "20261122101500999", writer_info("insert"))
            with pytest.raises(ZooKeeperAccessDenied, match=writers_path):
                registry.live_writers(TABLE_A)
            with pytest.raises(ZooKeeperAccessDenied, match=writers_path):
                registry.watch(TABLE_A, lambda live: None)
            with pytest.raises(NoAuthError):
                zk.client(who).delete(f"{lock_path}/{holder}")
            with pytest.raises(NoAuthError):
                zk.client(who).create(f"{aborts_path}/{T1}", b"")
        assert a_lock.is_held()  # untouched by all of that
        assert set(a_registry.live_writers(TABLE_A)) == {T1}

    # A's own nodes carry A's ACL only, down to the lock's contender nodes
    assert zk.client(A).get_acls(writers_path)[0] == acl_for(zk.client(A))
    with zk.lock(TABLE_A, A):
        contender = zk.client(A).get_children(lock_path)[0]
        assert zk.client(A).get_acls(f"{lock_path}/{contender}")[0] == acl_for(zk.client(A))

    # B works on its own table under the same shared bases, without anyone preparing its paths
    with zk.lock(TABLE_B, B), zk.registry(B).register(TABLE_B, T1, writer_info("upsert")):
        assert set(zk.registry(B).live_writers(TABLE_B)) == {T1}
    with pytest.raises(ZooKeeperAccessDenied):
        zk.lock(TABLE_B, A).acquire()


def test_the_process_credentials_come_from_the_environment(zk: Tenancy,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    zk.ensure(TABLE_A, A)
    monkeypatch.setenv(USERNAME_ENV, B.username)
    monkeypatch.setenv(PASSWORD_ENV, B.password)
    config = ZooKeeperLockConfig.for_table(zk.connect, TABLE_A, base_path=zk.locks_base)
    assert config.credentials == B and B.password not in repr(config)
    with pytest.raises(ZooKeeperAccessDenied, match=f"user 'tenant-b'.*{USERNAME_ENV}/{PASSWORD_ENV}.*"
                       "lock.zookeeper.credentialsSecret"):
        ZooKeeperLock(config).acquire()
    monkeypatch.setenv(PASSWORD_ENV, A.password)
    monkeypatch.setenv(USERNAME_ENV, A.username)
    with ZooKeeperLock(ZooKeeperLockConfig.for_table(zk.connect, TABLE_A, base_path=zk.locks_base)):
        pass
    assert zk.ensure(TABLE_A, "environment") == zk.ensure(TABLE_A, A)  # idempotent

    monkeypatch.delenv(PASSWORD_ENV)
    with pytest.raises(InvalidTableConfig, match=f"{USERNAME_ENV} is set but {PASSWORD_ENV} is not"):
        process_credentials()
    monkeypatch.delenv(USERNAME_ENV)
    assert process_credentials() is None


def test_preparing_a_table_refuses_nodes_of_another_tenant_and_claims_open_ones(zk: Tenancy) -> None:
    paths = zk.ensure(TABLE_A, A)
    with pytest.raises(ZooKeeperAccessDenied, match=paths[0]) as refused:
        zk.ensure(TABLE_A, B)
    assert isinstance(refused.value, InvalidTableConfig)  # a bad configuration: jobs exit 2
    again = pickle.loads(pickle.dumps(refused.value))     # and it travels from executors intact
    assert (again.path, again.user, str(again)) == (paths[0], "tenant-b", str(refused.value))

    with pytest.raises(InvalidTableConfig, match="shared"):  # a lock path above the bases would own them
        ensure_table_paths(zk.connect, TABLE_A, credentials=A, lock_path=zk.locks_base.rsplit("/", 1)[0],
                           locks_base=zk.locks_base, writers_base=zk.writers_base, aborts_base=zk.aborts_base)

    # a table used without credentials so far: its open nodes now carry the tenant's ACL
    open_paths = zk.ensure(TABLE_B, None)
    with zk.lock(TABLE_B, None):
        pass
    assert zk.ensure(TABLE_B, B) == open_paths
    with pytest.raises(ZooKeeperAccessDenied):
        zk.lock(TABLE_B, None).acquire()
    with zk.lock(TABLE_B, B):
        pass


def test_bases_left_open_by_clients_without_credentials_become_shared(zk: Tenancy) -> None:
    from kazoo.exceptions import NoAuthError

    zk.ensure(TABLE_B, None)  # an earlier, open deployment made the bases open
    lock_path, _, _ = zk.ensure(TABLE_A, A)
    assert zk.client(None).get_acls(zk.locks_base)[0] == SHARED_ACL
    with pytest.raises(NoAuthError):  # A's idle lock parent can no longer be deleted and taken over
        zk.client(B).delete(lock_path)
    with zk.lock(TABLE_B, None):  # while open tables keep working under the shared bases
        pass
