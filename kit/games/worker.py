"""A worker process for engine calls that may be costly: ``kit.serve.workers`` runs these.

Why a module of its own, outside ``kit.serve``: a worker imports only the engine's side of the
kit (0.1 s to start), where importing the server's side (OpenEnv) takes 5 s. One request is a
pickled ``(module, game, options, task, cpu_budget_s)`` on stdin: the worker imports ``module``
(which registers the game: a user's too), resets a new engine to ``task`` within the budget, and
pickles back ``(True, (engine, text))`` or ``(False, exception)`` on stdout.

The budget is CPU time, enforced by a ``SIGPROF`` timer, which interrupts the engine wherever it
is and refuses the request with ``BudgetExceeded``; the worker then serves the next request.
"""

from __future__ import annotations

import contextlib
import importlib
import pickle
import signal
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from kit.games import Game, make


class BudgetExceeded(ValueError):
    """A request spent its CPU budget in a worker and was refused; nothing changed."""


def _reset(
    module: str, game_name: str, options: dict[str, Any], task: dict[str, Any], budget_s: float
) -> tuple[Game, str]:
    """In a worker: import the served environment's module (it registers its game, which a new
    process has not seen), then reset a new engine within the CPU budget."""
    importlib.import_module(module)
    with _cpu_budget(budget_s):
        game = make(game_name, **options)
        return game, game.reset(**task)


@contextlib.contextmanager
def _cpu_budget(seconds: float) -> Iterator[None]:
    if not hasattr(signal, "setitimer"):  # Windows: no CPU timers; the engines' own limits hold
        yield
        return

    def refuse(signum: int, frame: Any) -> None:
        raise BudgetExceeded(
            f"the request used over {seconds:g} s of CPU, this server's budget for one request "
            "(ENGINE_CPU_BUDGET_S), and was refused; nothing changed"
        )

    previous = signal.signal(signal.SIGPROF, refuse)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """A worker's loop: one pickled request in, one ``(ok, value)`` out, until the pipe closes."""
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        try:
            reply: tuple[bool, Any] = (True, _reset(*request))
        except Exception as error:  # the engine's refusal, or the budget's: the caller's error
            reply = (False, error if _picklable(error) else RuntimeError(repr(error)))
        pickle.dump(reply, replies)
        replies.flush()


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


def main() -> None:
    """A worker process: serve requests on stdin; anything a game prints goes to stderr, since
    stdout is the reply pipe."""
    channel, sys.stdout = sys.stdout.buffer, sys.stderr
    _serve(sys.stdin.buffer, channel)
