"""The controller's work queue: a key is never handed to two workers at once, a key notified while it
is being reconciled runs once more afterwards, a burst of notifications is one pass, and a delayed
requeue is replaced by an earlier one, never doubled."""

from __future__ import annotations

import asyncio

from lakeoperator.controller import WorkQueue

A = ("LakeWriter", "default", "a")
B = ("LakeWriter", "default", "b")


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_a_burst_of_notifications_is_one_pass() -> None:
    async def go() -> list[tuple[str, str, str]]:
        q = WorkQueue()
        for _ in range(5):
            q.add(A)
        q.add(B)
        got = [await q.get(), await q.get()]
        assert len(q) == 2   # both active, nothing queued
        return got

    assert run(go()) == [A, B]


def test_a_key_notified_while_active_runs_again_after_done_and_never_concurrently() -> None:
    async def go() -> None:
        q = WorkQueue()
        q.add(A)
        first = await q.get()
        q.add(A)   # notified while active: not handed out now
        q.add(A)
        waiting = asyncio.create_task(q.get())
        await asyncio.sleep(0.05)
        assert not waiting.done(), "a key must not be handed to a second worker while it is active"
        q.done(first)
        assert await asyncio.wait_for(waiting, 1) == A
        q.done(A)
        assert len(q) == 0   # the two notifications while active were one more pass, not two

    run(go())


def test_a_delayed_requeue_fires_once_and_an_earlier_one_replaces_it() -> None:
    async def go() -> None:
        q = WorkQueue()
        loop = asyncio.get_running_loop()
        start = loop.time()
        q.add_after(A, 5.0)
        q.add_after(A, 0.05)    # earlier: replaces
        q.add_after(A, 3.0)     # later than the pending one: ignored
        assert await asyncio.wait_for(q.get(), 1) == A
        assert loop.time() - start < 1.0
        q.done(A)
        await asyncio.sleep(0.1)
        assert len(q) == 0
        q.add_after(B, 10.0)
        q.add(B)                # an immediate notification cancels the timer
        assert await asyncio.wait_for(q.get(), 1) == B
        q.done(B)
        assert not q._timers
        q.close()

    run(go())


def test_a_forgotten_key_does_not_come_back() -> None:
    async def go() -> None:
        q = WorkQueue()
        q.add_after(A, 0.05)
        q.forget(A)
        await asyncio.sleep(0.1)
        assert len(q) == 0

    run(go())
