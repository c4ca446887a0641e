"""What the developer tools' local servers (ZooKeeper, Kafka) share: one child process, known by its pid,
stopped by it (SIGTERM, then SIGKILL after a grace period), restarted, used as a context manager. A
subclass starts its process (`start`, which sets `_process`) and names its grace period.
"""

from __future__ import annotations

import signal
import subprocess
from types import TracebackType
from typing import Self


class ServerProcess:
    STOP_GRACE_S = 10.0

    _process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self, *, kill: bool = False, grace_s: float | None = None) -> None:
        """Stop by pid: SIGTERM, then SIGKILL after `grace_s` (STOP_GRACE_S; at once with `kill=True`)."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        grace = self.STOP_GRACE_S if grace_s is None else grace_s
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=grace)

    def restart(self, *, kill: bool = False) -> Self:
        self.stop(kill=kill)
        return self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
