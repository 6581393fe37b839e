"""Peak resident memory (RSS) of this process and its children, sampled while a job runs.

With psutil (installed with Dask) the whole process tree is sampled every 50 ms, so Dask
LocalCluster workers count; without it, the operating system's peak RSS of this process over its
whole life is used.
"""

from __future__ import annotations

import resource
import sys
import threading
from types import TracebackType

__all__ = ["PeakMemory"]


class PeakMemory:
    """Context manager: ``peak_bytes`` is the largest RSS of the process tree seen inside it.

    Args:
        interval: seconds between samples.
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _tree_rss(self) -> int:
        import psutil

        root = psutil.Process()
        total = root.memory_info().rss
        for child in root.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:  # the child exited between listing and reading
                continue
        return total

    def _sample(self) -> None:
        while True:
            try:
                self.peak_bytes = max(self.peak_bytes, self._tree_rss())
            except Exception:  # sampling must never break the job it measures
                return
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> PeakMemory:
        try:
            import psutil  # noqa: F401
        except ImportError:
            return self
        self._thread = threading.Thread(target=self._sample, name="peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            return
        # No psutil: the process's peak over its whole life (kilobytes on Linux, bytes on macOS).
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.peak_bytes = own if sys.platform == "darwin" else own * 1024
