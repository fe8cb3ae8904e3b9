"""Engine work that may be costly runs in worker processes, each request under a CPU budget.

Why: one event loop answers every session of a server, and the kit's engines answer in
microseconds, so ordinary calls run inline on it (``kit/serve/websocket.py``). Some resets are
not bounded by construction: a client's own Sudoku puzzle must be searched for a unique
solution, up to 0.2-0.3 s of CPU, and three clients doing that back to back pushed every other
session's median step from 0.7 ms to about 2 s. Such a reset (a task naming one of the served
environment's ``costly_tasks``) runs here instead, in another process (a thread would still
share the interpreter's lock with the loop), so it delays only the session that asked.

Bounded three ways: at most ``workers`` processes (``ENGINE_WORKERS``; default: one core fewer
than the machine has, at least one), at most ``max_pending`` requests waiting for them (more are
refused with ``CAPACITY_REACHED``), and each request at most ``cpu_budget_s`` of CPU
(``ENGINE_CPU_BUDGET_S``, default 2 s), enforced by a ``SIGPROF`` timer in the worker, which
interrupts the engine wherever it is and refuses the request; the session keeps its episode.
The budget is a backstop far above what the built-in games spend (Sudoku's own search limit
refuses at 0.2-0.3 s), so the same task is accepted or refused alike in-process and served.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import queue
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kit import registry
from kit.serve.base import KitEnvironment, KitObservation

DEFAULT_CPU_BUDGET_S = 2.0
"""CPU seconds one request may spend in a worker; ``ENGINE_CPU_BUDGET_S`` overrides."""

# The workers import only the engine's side of the kit (0.1 s), not the server's (OpenEnv: 5 s).


def default_workers() -> int:
    """Worker processes by default: ``ENGINE_WORKERS``, else one core fewer than the machine's."""
    if os.environ.get("ENGINE_WORKERS"):
        return int(os.environ["ENGINE_WORKERS"])
    return max(1, (os.cpu_count() or 2) - 1)


class Busy(Exception):
    """Every worker is taken and ``max_pending`` requests already wait for one."""


class Workers:
    """A bounded pool of worker processes for the costly resets of one app's sessions.

    Each worker is a ``python`` running ``kit.games.worker.main``, fed pickled requests on its stdin, started on
    first use and then kept. Not ``multiprocessing``: its spawned children re-run the parent's
    main module (a script that serves without an ``if __name__ == "__main__"`` guard would serve
    again in every worker), and a forked child copies the server's threads' locks mid-use.
    """

    def __init__(self, workers: int, cpu_budget_s: float, max_pending: int) -> None:
        for name, value in (
            ("workers", workers),
            ("cpu_budget_s", cpu_budget_s),
            ("max_pending", max_pending),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be positive, not {value!r}")
        self.workers, self.cpu_budget_s, self.max_pending = workers, cpu_budget_s, max_pending
        self.pending = 0
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._started: list[_Worker] = []
        self._lock = threading.Lock()
        # One thread per worker, each blocked on its worker's pipe (not holding the GIL).
        self._threads = ThreadPoolExecutor(workers, thread_name_prefix="kit-serve-worker")

    async def reset(
        self, env: KitEnvironment, task: dict[str, Any], episode_id: str | None
    ) -> KitObservation:
        """``env.reset`` to ``task``, with the engine's reset run in a worker process."""
        task = env.task(**task)
        if self.pending >= self.max_pending:
            raise Busy(
                f"{self.pending} costly requests already wait for this server's {self.workers} "
                "worker process(es) (ENGINE_WORKERS); retry later"
            )
        module = registry.game(env.game_name).env.__module__  # it registers the game there
        request = (module, env.game_name, dict(env.options), task, self.cpu_budget_s)
        self.pending += 1
        try:
            loop = asyncio.get_running_loop()
            game, text = await loop.run_in_executor(self._threads, self._call, request)
        finally:
            self.pending -= 1
        return env.start(game, text, task, episode_id)

    def _call(self, request: tuple[Any, ...]) -> Any:
        try:
            worker = self._idle.get_nowait()
        except queue.Empty:  # this thread's worker is not started yet: at most one per thread
            worker = _Worker()
            with self._lock:
                self._started.append(worker)
        try:
            value = worker.call(request)
        except (EOFError, OSError, pickle.UnpicklingError) as error:
            worker.close()  # killed, out of memory: the next request starts a fresh one
            with self._lock:
                self._started.remove(worker)
            raise RuntimeError(f"the worker process running the request died ({error!r})") from None
        self._idle.put(worker)
        return value

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            started, self._started = self._started, []
        for worker in started:
            worker.close()


class _Worker:
    """One worker process and its pipes."""

    def __init__(self) -> None:
        # The parent's import path, so the game's module (a user's, a notebook's) imports there.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))}
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from kit.games.worker import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )

    def call(self, request: tuple[Any, ...]) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        pickle.dump(request, self.process.stdin)
        self.process.stdin.flush()
        ok, value = pickle.load(self.process.stdout)
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
