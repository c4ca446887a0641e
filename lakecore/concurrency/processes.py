"""Whether a process recorded on storage (a lock holder, a service run) has surely ended.

A record names its host, its pid and its process space: this boot and PID namespace. Only a record
made in the same process space as ours can be judged, by asking the kernel for its pid; anything
else (another host, another container, another boot, a record without a process space) counts as
alive, and the caller falls back on leases and heartbeats. A reused pid reads as alive: the safe
direction.
"""

from __future__ import annotations

import os
import socket

_known: tuple[int, str] | None = None  # (pid, its process space): asked again after a fork


def process_space() -> str:
    """An id of this boot and PID namespace (Linux); "" where it cannot be told."""
    global _known
    known = _known
    if known is not None and known[0] == os.getpid():
        return known[1]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        space = f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        space = ""
    _known = (os.getpid(), space)
    return space


def process_gone(host: str, process: str, pid: int) -> bool:
    """The process `pid` that recorded `host` and `process` (its process_space()) surely ended: it
    ran in this machine's boot and PID namespace, and no process has its pid now."""
    if not process or pid <= 0 or process != process_space() or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError, ValueError):  # exists (owned by someone else), or no pid at all
        return False
    return False
