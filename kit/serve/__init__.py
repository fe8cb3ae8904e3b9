"""Serve a kit game over OpenEnv, in a background thread or from the command line.

Why: a game behind an OpenEnv server can be shared by many trainers, run on other machines and
reached by URL, and the clients the ecosystem already has (TRL's OpenEnv examples, OpenEnv's
typed clients) play it unchanged, because each game speaks its official server's schema
(``kit/builtin/<game>/serve.py``). In a notebook the server is one line::

    url, server = kit.serve.resolve_env("wordle")        # served on a free loopback port
    RemoteWordle = kit.remote.spec_to_factory("wordle")  # a zero-argument environment_factory
    server.close()

and on a machine of its own: ``python -m kit.serve wordle --host 0.0.0.0 --port 8000``.
"""

from __future__ import annotations

import functools
import importlib
import os
import random
import socket
import threading
import time
from collections.abc import Iterator, Mapping

try:
    import uvicorn
    from fastapi import FastAPI
    from openenv.core.env_server.http_server import create_app
except ImportError as error:  # the serve extra is optional; the rest of the kit does not need it
    raise ImportError("kit.serve needs OpenEnv: pip install 'kit[serve]'") from error

from kit import registry
from kit.serve import websocket
from kit.serve import workers as workers_
from kit.serve.base import KitEnvironment


class _Served(Mapping[str, type[KitEnvironment]]):
    """The served environment of every game that has one (its ``GameSpec.server``, a
    ``"module:Class"`` imported on first use), by name; read from the registry at each access,
    so a game registered later is in it too."""

    def __getitem__(self, name: str) -> type[KitEnvironment]:
        server = registry.game(name).server if name in registry.names() else None
        if server is None:
            raise KeyError(name)
        return _entrypoint(server)

    def __iter__(self) -> Iterator[str]:
        return iter([name for name in registry.names() if registry.game(name).server])

    def __len__(self) -> int:
        return sum(1 for _ in self)


ENVIRONMENTS: Mapping[str, type[KitEnvironment]] = _Served()
"""The served game of each name; ``resolve_env`` and ``python -m kit.serve`` take these names."""

DEFAULT_MAX_CONCURRENT_ENVS = 64
"""Sessions one server process holds at once; ``MAX_CONCURRENT_ENVS`` overrides."""

_SCHEMES = ("http://", "https://", "ws://", "wss://")


def build_app(
    environment: type[KitEnvironment],
    max_concurrent_envs: int | None = None,
    seed: int | None = None,
    *,
    idle_timeout_s: float | None = None,
    max_frame_bytes: int | None = None,
    workers: int | None = None,
    cpu_budget_s: float | None = None,
) -> FastAPI:
    """The OpenEnv FastAPI app serving ``environment``: WebSocket ``/ws``, ``/health``, ``/schema``...

    ``max_concurrent_envs`` (default: the ``MAX_CONCURRENT_ENVS`` variable, else 64) bounds the
    sessions; a TRL run opens one per pooled env instance (batch size x steps per generation).
    ``seed`` seeds the tasks a bare ``reset()`` draws (default: the ``TASK_SEED`` variable, else
    fresh entropy); a client that names its task is unaffected. ``idle_timeout_s`` (default: the
    ``SESSION_IDLE_TIMEOUT_S`` variable, else 300) closes a session that long without a message;
    ``max_frame_bytes`` (default: ``MAX_FRAME_BYTES``, else 1 MiB) bounds a frame or HTTP body,
    and every reply. A reset that must check a client's own task (Sudoku's ``puzzle``) runs in
    one of ``workers`` processes (default: ``ENGINE_WORKERS``, else one core fewer than the
    machine's) within ``cpu_budget_s`` of CPU (default: ``ENGINE_CPU_BUDGET_S``, else 2 s).
    ``/ws`` and HTTP ``/reset``/``/step`` are the kit's own (``kit/serve/websocket.py``).
    """
    if not (isinstance(environment, type) and issubclass(environment, KitEnvironment)):
        raise TypeError(f"build_app serves a KitEnvironment subclass, not {environment!r}")
    if max_concurrent_envs is None:
        max_concurrent_envs = int(
            os.environ.get("MAX_CONCURRENT_ENVS", DEFAULT_MAX_CONCURRENT_ENVS)
        )
    if seed is None and os.environ.get("TASK_SEED"):
        seed = int(os.environ["TASK_SEED"])
    if idle_timeout_s is None:
        idle_timeout_s = float(
            os.environ.get("SESSION_IDLE_TIMEOUT_S", websocket.DEFAULT_IDLE_TIMEOUT_S)
        )
    if max_frame_bytes is None:
        max_frame_bytes = int(os.environ.get("MAX_FRAME_BYTES", websocket.DEFAULT_MAX_FRAME_BYTES))
    if cpu_budget_s is None:
        cpu_budget_s = float(os.environ.get("ENGINE_CPU_BUDGET_S", workers_.DEFAULT_CPU_BUDGET_S))
    pool = workers_.Workers(
        workers if workers is not None else workers_.default_workers(),
        cpu_budget_s,
        max_pending=max_concurrent_envs,
    )
    factory = functools.partial(environment, task_rng=random.Random(seed))
    app = create_app(
        factory,
        environment.action_cls,
        environment.observation_cls,
        env_name=environment.game_name,
        max_concurrent_envs=max_concurrent_envs,
        state_cls=environment.state_cls,
    )
    sessions = websocket.SessionServer(
        environment,
        factory,
        max_sessions=max_concurrent_envs,
        idle_timeout_s=idle_timeout_s,
        max_frame_bytes=max_frame_bytes,
        workers=pool,
    )
    websocket.install(app, sessions)
    return app


class Server:
    """A server running in a background thread; ``close()`` (or ``with``) stops it cleanly."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.url = f"http://{host}:{self._socket.getsockname()[1]}"
        # No permessage-deflate: game frames are small, and compressing them cost a third of the
        # server's CPU per step (envs/bench.py --sessions 512).
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, ws_per_message_deflate=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the server at {self.url} did not start")
            time.sleep(0.01)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._socket.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Server({self.url!r}, running={self._thread.is_alive()})"


def environment_class(spec: str) -> type[KitEnvironment]:
    """The ``KitEnvironment`` class a game name (``"wordle"``) or a ``"module:Class"``
    entrypoint names; ``ValueError`` for anything else (a URL is no class)."""
    if spec in ENVIRONMENTS:
        return ENVIRONMENTS[spec]
    if ":" not in spec:
        raise ValueError(
            f"unknown environment {spec!r}: give a URL, a game name ({sorted(ENVIRONMENTS)}) "
            "or a 'module:Class' entrypoint"
        )
    return _entrypoint(spec)


def _entrypoint(spec: str) -> type[KitEnvironment]:
    """The ``KitEnvironment`` subclass a ``"module:Class"`` entrypoint names."""
    module_name, _, name = spec.partition(":")
    environment = getattr(importlib.import_module(module_name), name, None)
    if not (isinstance(environment, type) and issubclass(environment, KitEnvironment)):
        raise ValueError(f"{spec!r} is not a kit.serve.KitEnvironment subclass")
    return environment


def resolve_env(
    spec: str,
    *,
    max_concurrent_envs: int | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    seed: int | None = None,
) -> tuple[str, Server | None]:
    """Where to reach the environment ``spec`` names: ``(url, server)``.

    A URL is returned as is, with ``server`` None. A game name (``"wordle"``) or a
    ``"module:Class"`` entrypoint (a ``KitEnvironment`` subclass, e.g. a variant) is served here,
    in a background thread on ``host:port`` (``port=0``: a free port), and ``server.close()``
    stops it. ``max_concurrent_envs`` as in ``build_app`` (default: ``MAX_CONCURRENT_ENVS``, else
    64).
    """
    if not isinstance(spec, str):
        raise ValueError(f"spec must be a URL, a game name or 'module:Class', not {spec!r}")
    if spec.startswith(_SCHEMES):
        return spec, None
    environment = environment_class(spec)
    server = Server(build_app(environment, max_concurrent_envs, seed=seed), host, port)
    return server.url, server


__all__ = [
    "ENVIRONMENTS",
    "KitEnvironment",
    "Server",
    "build_app",
    "resolve_env",
]
