"""What a served game costs: steps per second in-process, in OpenEnv's wrapper, and over a socket.

Why: the served games trade speed for deployability, and the trade should be a number, not a
guess. ``python -m envs.bench wordle`` replays solver games (the same moves every way) through

* the engine (``kit.games``) and the tool env (``kit.envs``), in-process;
* the OpenEnv environment class in-process (the server's wrapper, no network);
* a local server started here (``uvicorn envs.<game>.server:app`` on loopback), through the raw
  client (``KitClient``) and through the tool env (``kit.remote.env``);

and prints steps/s and resets/s for each. ``--url`` measures a server already running instead.

``python -m envs.bench catch --sessions 512`` measures load instead: one server process (started
here, one per handler measured) holds 512 WebSocket sessions at once, each playing solver games
back to back with no pause, from a client in another process (so the client's CPU is not the
server's); it prints step latency p50/p90/p99, steps/s and the server's CPU time per step for
the kit's handler (``kit/serve/websocket.py``) and OpenEnv's own (``--handler both``, the
default, runs both in turn; ``--ws`` picks uvicorn's WebSocket implementation, ``--no-deflate``
turns compression off). Latencies are as the client sees them, round trip on loopback, so with
every session always waiting on an answer they are mostly queueing: about sessions / throughput.
On a machine other jobs share, CPU per step is the figure to compare; the clock is theirs too.

``python -m envs.bench sudoku --hostile 1,3,8`` measures isolation instead: one witness session
plays solver games on a Sudoku server (started here, the kit's handler) alone, then beside 1, 3
and 8 hostile clients that reset a puzzle too costly to check, back to back (each refused after
about 0.2-0.3 s of search in a worker process); it prints the witness's step round trip p50/p99
for each, and each as a ratio of the witness's alone, all in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import socket
import statistics
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
def _server(game: str, command: list[str] | None = None) -> Iterator[tuple[str, int]]:
    """``(url, pid)`` of a server on a free loopback port: ``uvicorn envs.<game>.server:app``, or
    ``command`` (given ``--port``)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    if command is None:
        command = [sys.executable, "-m", "uvicorn", f"envs.{game}.server:app"]
        command += ["--host", "127.0.0.1", "--log-level", "warning"]
    process = subprocess.Popen([*command, "--port", str(port)], cwd=ROOT)
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
        yield url, process.pid
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

    with _server(game) if url is None else nullcontext((url, None)) as (served, _):
        with KitClient(served).sync() as client:
            results["server, KitClient"] = _time(
                lambda t: client.reset(**t), lambda a: client.step(KitAction(message=a)), tasks
            )
        with env(game, served)() as remote:
            results["server, kit.remote tool env"] = _time(
                lambda t: remote.reset(**t), lambda a: call(remote, a), tasks
            )
    return results


HANDLERS = ("openenv", "kit")
"""``kit``: the kit's ``/ws`` (``kit.serve.build_app``); ``openenv``: OpenEnv's own, as before."""


def serve_for_load(
    game: str, handler: str, port: int, ws: str, sessions: int, deflate: bool
) -> None:
    """Serve ``game`` with ``handler``'s ``/ws`` until killed (the load benchmark's server)."""
    import uvicorn
    from openenv.core.env_server.http_server import create_app

    from kit.serve import ENVIRONMENTS, build_app
    from kit.serve.base import KitState

    environment = ENVIRONMENTS[game]
    if handler == "kit":
        app = build_app(environment, sessions)
    else:  # what build_app returned before kit/serve/websocket.py
        action_cls, observation_cls = environment.action_cls, environment.observation_cls
        app = create_app(
            environment,
            action_cls,
            observation_cls,
            max_concurrent_envs=sessions,
            state_cls=KitState,
        )
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        ws=ws,
        ws_per_message_deflate=deflate,
        log_level="warning",
        access_log=False,
    )


async def _play(
    url: str,
    tasks: list[tuple[dict[str, Any], list[str]]],
    start: int,
    connected: list[asyncio.Event],
    window: list[float],
    latencies: list[float],
) -> None:
    """One session: solver games back to back until the window closes; steps timed inside it."""
    from websockets.asyncio.client import connect

    async with connect(url, proxy=None, max_size=None, open_timeout=120) as ws:
        ready, go = connected
        ready.set()
        await go.wait()
        for index in range(start, sys.maxsize):
            task, actions = tasks[index % len(tasks)]
            await ws.send(json.dumps({"type": "reset", "data": task}))
            if json.loads(await ws.recv())["type"] != "observation":
                raise RuntimeError(f"reset {task} failed")
            for action in actions:
                sent = time.perf_counter()
                if sent > window[1]:
                    return
                await ws.send(json.dumps({"type": "step", "data": {"message": action}}))
                reply = await ws.recv()
                answered = time.perf_counter()
                if json.loads(reply)["type"] != "observation":
                    raise RuntimeError(f"step {action!r} failed: {reply[:300]}")
                if sent >= window[0]:
                    latencies.append(answered - sent)


def _cpu_s(pid: int) -> float:
    """CPU seconds process ``pid`` has used (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _load(
    url: str, pid: int, tasks: list[tuple[dict[str, Any], list[str]]], sessions: int, seconds: float
) -> tuple[list[float], float, float]:
    """Step latencies in the measured window, and the server's and client's CPU seconds in it."""
    ready = [asyncio.Event() for _ in range(sessions)]
    go = asyncio.Event()
    latencies: list[float] = []
    window = [float("inf"), float("inf")]  # set once every session is connected
    ws_url = url.replace("http://", "ws://") + "/ws"
    players = [
        asyncio.create_task(_play(ws_url, tasks, i, [ready[i], go], window, latencies))
        for i in range(sessions)
    ]
    for event in ready:
        await asyncio.wait_for(event.wait(), 300)
    go.set()
    warm = min(2.0, seconds / 4)  # sessions start in step; the first seconds are not measured
    window[0] = time.perf_counter() + warm
    window[1] = window[0] + seconds
    await asyncio.sleep(warm)
    cpu = _cpu_s(pid), time.process_time()
    await asyncio.sleep(seconds)
    cpu = _cpu_s(pid) - cpu[0], time.process_time() - cpu[1]
    await asyncio.gather(*players)
    return latencies, *cpu


def load(
    game: str, sessions: int, seconds: float, handler: str, ws: str, deflate: bool = True
) -> dict[str, float]:
    """Step latency quantiles (ms), steps/s and CPU per step of one server under ``sessions``."""
    tasks = _tasks(game, 50)
    command = [sys.executable, "-m", "envs.bench", game, "--serve", handler, "--ws", ws]
    command += ["--sessions", str(sessions), *([] if deflate else ["--no-deflate"])]
    try:  # the client's own overhead, kept small: it shares the machine with the server
        from uvloop import run
    except ImportError:
        run = asyncio.run
    with _server(game, command) as (url, pid):
        latencies, server_cpu, client_cpu = run(_load(url, pid, tasks, sessions, seconds))
    quantiles = statistics.quantiles(latencies, n=100)
    return {
        "p50 ms": 1000 * quantiles[49],
        "p90 ms": 1000 * quantiles[89],
        "p99 ms": 1000 * quantiles[98],
        "max ms": 1000 * max(latencies),
        "steps/s": len(latencies) / seconds,
        # CPU per step is what a shared machine cannot blur: other jobs slow the clock, not this.
        "server CPU us/step": 1e6 * server_cpu / len(latencies),
        "server cores": server_cpu / seconds,
        "client cores": client_cpu / seconds,
    }


# 17 clues and no solution: 33.5 million search nodes to settle; refused after 100,000.
COSTLY_PUZZLE = "9..........1..7..3.....3.......6......3.1....2....56..........5.3...4.96...3....."


async def _hostile(url: str, stop: asyncio.Event, refused: list[int]) -> None:
    """A client resetting the costly puzzle back to back until ``stop``."""
    from websockets.asyncio.client import connect

    frame = json.dumps({"type": "reset", "data": {"puzzle": COSTLY_PUZZLE}})
    async with connect(url, proxy=None, open_timeout=120) as ws:
        while not stop.is_set():
            await ws.send(frame)
            reply = json.loads(await ws.recv())
            if reply["type"] != "error" or "too costly" not in reply["data"]["message"]:
                raise RuntimeError(f"the costly reset was not refused as too costly: {reply}")
            refused[0] += 1


async def _isolation(url: str, counts: list[int], seconds: float) -> dict[int, dict[str, float]]:
    ws_url = url.replace("http://", "ws://") + "/ws"
    tasks = _tasks("sudoku", 50)
    results = {}
    for count in counts:
        stop, refused = asyncio.Event(), [0]
        hostile = [asyncio.create_task(_hostile(ws_url, stop, refused)) for _ in range(count)]
        while count and refused[0] < count:  # every hostile client connected and refused once
            await asyncio.sleep(0.05)
        latencies: list[float] = []
        window = [time.perf_counter(), time.perf_counter() + seconds]
        connected = [asyncio.Event(), asyncio.Event()]
        connected[1].set()
        await _play(ws_url, tasks, 0, connected, window, latencies)
        stop.set()
        await asyncio.gather(*hostile)
        quantiles = statistics.quantiles(latencies, n=100)
        results[count] = {
            "p50 ms": 1000 * quantiles[49],
            "p99 ms": 1000 * quantiles[98],
            "steps": len(latencies),
            "refused resets/s": refused[0] / seconds,
        }
    return results


def isolation(counts: list[int], seconds: float) -> dict[int, dict[str, float]]:
    """The witness's step p50/p99 alone (count 0) and beside each count of hostile clients."""
    command = [sys.executable, "-m", "envs.bench", "sudoku", "--serve", "kit", "--sessions", "64"]
    with _server("sudoku", command) as (url, _pid):
        return asyncio.run(_isolation(url, [0, *counts], seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("game", choices=sorted(ENVS))
    parser.add_argument("--games", type=int, default=200, help="solver games per measurement")
    parser.add_argument("--url", help="a running server to measure instead of starting one")
    load_options = parser.add_argument_group("load (--sessions)")
    load_options.add_argument("--sessions", type=int, help="concurrent sessions: measure load")
    load_options.add_argument("--seconds", type=float, default=10, help="measured, per handler")
    load_options.add_argument("--handler", choices=[*HANDLERS, "both"], default="both")
    load_options.add_argument(
        "--ws", default="websockets", help="uvicorn's WebSocket implementation (--ws)"
    )
    load_options.add_argument(
        "--no-deflate",
        dest="deflate",
        action="store_false",
        help="serve without permessage-deflate (OpenEnv's clients ask for it; uvicorn grants it)",
    )
    parser.add_argument(
        "--hostile",
        help="counts of hostile clients, e.g. 1,3,8: measure a witness session beside them (sudoku)",
    )
    load_options.add_argument("--serve", choices=HANDLERS, help=argparse.SUPPRESS)
    load_options.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_for_load(args.game, args.serve, args.port, args.ws, args.sessions, args.deflate)
        return
    if args.hostile:
        if args.game != "sudoku":
            parser.error("--hostile resets costly Sudoku puzzles: run it as envs.bench sudoku")
        counts = [int(count) for count in args.hostile.split(",")]
        print(f"sudoku: a witness session, {args.seconds:g} s each, {os.cpu_count()} CPUs")
        results = isolation(counts, args.seconds)
        alone = results[0]
        for count, figures in results.items():
            ratios = f"p50 x{figures['p50 ms'] / alone['p50 ms']:.1f}, "
            ratios += f"p99 x{figures['p99 ms'] / alone['p99 ms']:.1f}"
            print(
                f"  {count} hostile: p50 {figures['p50 ms']:.2f} ms, p99 {figures['p99 ms']:.2f} "
                f"ms ({ratios} alone), {figures['steps']:,} steps, "
                f"{figures['refused resets/s']:.1f} costly resets refused/s"
            )
        return
    if args.sessions:
        handlers = HANDLERS if args.handler == "both" else (args.handler,)
        print(
            f"{args.game}: {args.sessions} sessions, {args.seconds:g} s measured per handler, "
            f"uvicorn --ws {args.ws}{'' if args.deflate else ' without deflate'}, "
            f"{os.cpu_count()} CPUs"
        )
        results = {}
        for handler in handlers:
            results[handler] = figures = load(
                args.game, args.sessions, args.seconds, handler, args.ws, args.deflate
            )
            print(f"  {handler:8s}", "  ".join(f"{k} {v:,.1f}" for k, v in figures.items()))
        if len(results) == 2:
            old, new = results["openenv"], results["kit"]
            print(
                f"  openenv/kit: p50 x{old['p50 ms'] / new['p50 ms']:.1f}, "
                f"p99 x{old['p99 ms'] / new['p99 ms']:.1f}, "
                f"server CPU per step x{old['server CPU us/step'] / new['server CPU us/step']:.1f}; "
                f"steps/s kit/openenv x{new['steps/s'] / old['steps/s']:.1f}"
            )
        return
    print(f"{args.game}: {args.games} solver games per row")
    for way, (steps, resets) in bench(args.game, args.games, args.url).items():
        print(f"  {way:34s} {steps:>10,.0f} steps/s {resets:>10,.0f} resets/s")


if __name__ == "__main__":
    main()
