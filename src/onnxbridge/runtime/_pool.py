"""A thread pool started on first use, for calls cut into parts that run side by side."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["LazyPool"]


class LazyPool:
    """A ``ThreadPoolExecutor`` of ``workers`` threads, started by the first :meth:`get`.

    Most sessions and accelerators never see a call large enough to split: they start no
    threads. The pool is kept once started and shared by every thread that calls :meth:`get`.
    """

    def __init__(self, workers: int, prefix: str) -> None:
        self.workers = workers
        self.prefix = prefix
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        """Whether a call has started the pool."""
        return self._executor is not None

    def get(self) -> ThreadPoolExecutor:
        """The pool, started on the first call (the lock is taken only until then)."""
        executor = self._executor
        if executor is not None:
            return executor
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.workers, thread_name_prefix=self.prefix
                )
            return self._executor
