"""What a served game costs: steps per second in-process, in OpenEnv's wrapper, and over a socket.

Why: the served games trade speed for deployability, and the trade should be a number, not a
guess. ``python -m envs.bench wordle`` replays solver games (the same moves every way) through

* the engine (``kit.games``) and the tool env (``kit.envs``), in-process;
* the OpenEnv environment class in-process (the server's wrapper, no network);
* a local server started here (``uvicorn envs.<game>.server:app`` on loopback), through the raw
  client (``KitClient``) and through the tool env (``kit.remote.env``);

and prints steps/s and resets/s for each. ``--url`` measures a server already running instead.
"""

from __future__ import annotations

import argparse
import importlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from kit.envs import ENVS
from kit.games import make
from kit.remote import KitAction, KitClient, env
from kit.solvers import play

ROOT = Path(__file__).resolve().parents[1]


def _tasks(game: str, count: int) -> list[tuple[dict[str, Any], list[str]]]:
    if game == "echo":
        return [({}, [f"message number {i}" for i in range(10)]) for _ in range(count)]
    key = "ball_col" if game == "catch" else "seed"
    tasks = [{key: i % 5} if game == "catch" else {key: i} for i in range(count)]
    return [(task, play(game, **task)) for task in tasks]


def _tool_call(game: str) -> Callable[[Any, str], Any]:
    def call(tool_env: Any, action: str) -> Any:
        if game == "wordle":
            return tool_env.guess(action.strip("[]"))
        if game == "catch":
            return tool_env.stay() if action == "STAY" else tool_env.move(action)
        if game == "sudoku":
            row, col, number = action.strip("[]").split()
            return tool_env.place(int(row), int(col), int(number))
        return tool_env.echo(action)

    return call


def _time(
    reset: Callable[[dict[str, Any]], Any],
    step: Callable[[str], Any],
    tasks: list[tuple[dict[str, Any], list[str]]],
) -> tuple[float, float]:
    """Steps/s and resets/s over the tasks (each timed on its own, so the sums are clean)."""
    reset_s = step_s = 0.0
    steps = 0
    for task, actions in tasks:
        start = time.perf_counter()
        reset(task)
        middle = time.perf_counter()
        for action in actions:
            step(action)
        reset_s += middle - start
        step_s += time.perf_counter() - middle
        steps += len(actions)
    return steps / step_s, len(tasks) / reset_s


@contextmanager
def _server(game: str) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "uvicorn", f"envs.{game}.server:app", "--port", str(port)]
    command += ["--host", "127.0.0.1", "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if json.load(response).get("status") == "healthy":
                        break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the {game} server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def bench(game: str, games: int, url: str | None = None) -> dict[str, tuple[float, float]]:
    """Steps/s and resets/s of each way to play ``game``, over ``games`` solver games."""
    tasks = _tasks(game, games)
    call = _tool_call(game)
    results: dict[str, tuple[float, float]] = {}

    engine = make(game)
    results["engine (kit.games)"] = _time(lambda t: engine.reset(**t), engine.step, tasks)
    tool_env = ENVS[game]()
    results["tool env (kit.envs)"] = _time(
        lambda t: tool_env.reset(**t), lambda a: call(tool_env, a), tasks
    )
    server = importlib.import_module(f"envs.{game}.server")
    wrapper_cls = getattr(server, f"{game.title()}Environment")
    wrapper = wrapper_cls()
    results["OpenEnv Environment, in-process"] = _time(
        lambda t: wrapper.reset(**t), lambda a: wrapper.step(KitAction(message=a)), tasks
    )

    with _server(game) if url is None else nullcontext(url) as served:
        with KitClient(served).sync() as client:
            results["server, KitClient"] = _time(
                lambda t: client.reset(**t), lambda a: client.step(KitAction(message=a)), tasks
            )
        with env(game, served)() as remote:
            results["server, kit.remote tool env"] = _time(
                lambda t: remote.reset(**t), lambda a: call(remote, a), tasks
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("game", choices=sorted(ENVS))
    parser.add_argument("--games", type=int, default=200, help="solver games per measurement")
    parser.add_argument("--url", help="a running server to measure instead of starting one")
    args = parser.parse_args()
    print(f"{args.game}: {args.games} solver games per row")
    for way, (steps, resets) in bench(args.game, args.games, args.url).items():
        print(f"  {way:34s} {steps:>10,.0f} steps/s {resets:>10,.0f} resets/s")


if __name__ == "__main__":
    main()
