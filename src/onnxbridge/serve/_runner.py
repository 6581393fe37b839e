"""Run ONNX Runtime calls in worker threads, off the event loop, cheaply.

``loop.run_in_executor`` costs two thread wake-ups per call (the worker's, then the loop's), which
for a small model's single-row call is most of the CPU a request takes. Here each worker thread
takes every job waiting in the queue when it wakes, runs them one after the other, and hands all
their results back to the event loop in one ``call_soon_threadsafe``: under load one wake-up
serves many requests, so the wake-ups' cost is shared among them.
Jobs submitted with a merge key and a merge function (:meth:`InferenceRunner.submit_mergeable`)
that a wake-up finds together under the same key are handed to the merge function at once, which
runs them as one session call (dynamic batching, ``ServedModel.run_merged``); every other job
runs on its own.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["InferenceRunner"]

_STOP = object()


class InferenceRunner:
    """A pool of worker threads draining one job queue.

    Args:
        threads: worker threads (each runs one job at a time).
        name: thread name prefix.
    """

    def __init__(self, threads: int, name: str = "onnxbridge-ort") -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(*args)`` in a worker; await the returned future on the running loop."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((loop, future, fn, args, None))
        return future

    def submit_mergeable(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        merge: Callable[[list[tuple[Any, ...]]], list[Any]],
        key: Any,
    ) -> asyncio.Future[Any]:
        """Like :meth:`submit`, but jobs found waiting together with an equal ``key`` (and the
        same ``merge``) run as ``merge([args, ...])``, which returns one result (or exception)
        per job, in order."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((loop, future, fn, args, (merge, key)))
        return future

    def close(self) -> None:
        """Stop the workers after the jobs already queued."""
        for _ in self._threads:
            self._queue.put(_STOP)
        for thread in self._threads:
            thread.join(timeout=30)

    def _work(self) -> None:
        get, get_nowait = self._queue.get, self._queue.get_nowait
        while True:
            jobs = [get()]
            while True:
                try:
                    jobs.append(get_nowait())
                except queue.Empty:
                    break
            done: dict[asyncio.AbstractEventLoop, list[Any]] = {}
            stops = 0
            groups: dict[Any, list[Any]] = {}
            for job in jobs:
                if job is _STOP:
                    stops += 1
                    continue
                loop, future, fn, args, merge = job
                if merge is not None:
                    groups.setdefault(merge, []).append(job)
                    continue
                outcome: tuple[Any, Any, BaseException | None]
                try:
                    outcome = (future, fn(*args), None)
                except BaseException as exc:  # handed to the awaiting request, raised there
                    outcome = (future, None, exc)
                done.setdefault(loop, []).append(outcome)
            for (merge_fn, _), group in groups.items():
                _run_group(merge_fn, group, done)
            for loop, outcomes in done.items():
                try:
                    loop.call_soon_threadsafe(_deliver, outcomes)
                except RuntimeError:  # the loop closed while the job ran: nobody waits
                    pass
            if stops:
                for _ in range(stops - 1):  # one each for the other workers
                    self._queue.put(_STOP)
                return


def _run_group(
    merge: Callable[[list[tuple[Any, ...]]], list[Any]],
    group: list[Any],
    done: dict[asyncio.AbstractEventLoop, list[Any]],
) -> None:
    """Run jobs that share a merge key: together when there are several, else alone."""
    results: list[Any] | None = None
    if len(group) > 1:
        try:
            results = merge([job[3] for job in group])
        except Exception:  # a bug in merging must not lose requests: run them one by one
            results = None
    for index, (loop, future, fn, args, _) in enumerate(group):
        if results is not None:
            result = results[index]
            outcome = (
                (future, None, result)
                if isinstance(result, BaseException)
                else (future, result, None)
            )
        else:
            try:
                outcome = (future, fn(*args), None)
            except BaseException as exc:
                outcome = (future, None, exc)
        done.setdefault(loop, []).append(outcome)


def _deliver(outcomes: list[Any]) -> None:
    for future, result, exc in outcomes:
        if future.cancelled():  # the client went away
            continue
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)
