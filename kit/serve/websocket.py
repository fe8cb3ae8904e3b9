"""The kit's own ``/ws`` endpoint and HTTP ``/reset``/``/step``, installed in place of OpenEnv's.

Why not OpenEnv's handler: it was written for environments that block (browsers, sandboxes), so
it trusts every frame, gives every session a thread, and keeps a session for as long as its
socket stays open. Served to strangers, each of those is a way to break a server:

* malformed frames (binary, JSON that is not an object, a 5,000-digit integer, deep nesting, an
  action whose validator raises) end the session with a Python message;
* a lone surrogate (``"\\ud800"``) is played, and only the reply fails to encode: the client gets
  an error for a move that changed the state;
* an idle socket holds its slot until a restart, so 63 idle sockets fill 64 slots;
* anyone who knows a session id attaches to it with ``/ws?session_id=...``, and ``/mcp``'s
  ``openenv/session/create`` makes sessions that never expire (the kit's envs are not MCP envs);
* HTTP ``/reset`` and ``/step`` answer a bad task or a hostile body with a 500 and a traceback.

And the thread hop per call is where the latency under load went: the kit's engines answer in
microseconds, so here ``reset``/``step``/``state`` run inline on the event loop, which is also
what keeps one process's answers prompt at hundreds of sessions (``python -m envs.bench catch
--sessions 512`` measures both handlers). That holds because every inline call is bounded by
construction: a move is at most its game's ``max_action_chars`` (``kit.games.check_action``), so
no reply echoes more, Echo's history is a window, and a reply or state over the frame limit is
refused rather than sent. The one call that is not bounded, a reset that must check a task the
client chose (``KitEnvironment.costly_tasks``: Sudoku's ``puzzle``), runs in a worker process
under a CPU budget (``kit/serve/workers.py``), so it delays only its own session (``python -m
envs.bench sudoku --hostile 3`` measures a witness session beside hostile ones). An engine call
that raises answers that one frame with an error; no other session sees it.

Reset data is typed on arrival as OpenEnv's ``ResetRequest`` declares it, strictly (``seed`` a
non-negative int, ``episode_id`` a string of at most 255 characters): the server stores both
and quotes the id in every reply, so anything else is a ``VALIDATION_ERROR`` and the episode
stays as it was. The game's own task keys go to its engine, which checks them.

The wire protocol is OpenEnv's, so its clients (``EnvClient``, ``GenericEnvClient``) and
``kit.remote`` need no change: frames ``{"type": "reset"|"step"|"state"|"close", "data": {...}}``;
replies ``{"type": "observation", "data": serialize_observation(obs)}``, ``{"type": "state",
"data": state}`` and ``{"type": "error", "data": {"message", "code"}}`` with OpenEnv's codes
(``INVALID_JSON``, ``VALIDATION_ERROR`` with ``errors``, ``EXECUTION_ERROR``, ``UNKNOWN_TYPE``,
``CAPACITY_REACHED``, ``SESSION_ERROR``) plus ``SESSION_EXPIRED``. Every refused frame leaves the
session and its episode as they were.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, Response
from openenv.core.env_server.types import ResetRequest, ResetResponse, StepRequest, StepResponse
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from pydantic_core import to_json
from starlette.routing import BaseRoute
from starlette.websockets import WebSocketDisconnect

from kit.serve.base import KitEnvironment
from kit.serve.workers import Busy, Workers

logger = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT_S = 300.0
"""Seconds a session may go without a message before it is closed; ``SESSION_IDLE_TIMEOUT_S``."""

DEFAULT_MAX_FRAME_BYTES = 1 << 20
"""The largest frame (and HTTP body) read, in bytes; ``MAX_FRAME_BYTES`` overrides. uvicorn drops
a connection whose frame exceeds its own ``ws_max_size`` (16 MiB) before the app sees it."""

MAX_DEPTH = 32
"""Nesting the parser takes; no kit frame needs more than 3 levels, and deeper structures break
Python code further on (pydantic, ``repr`` and ``json`` all recurse) long after the frame
looked fine."""

_QUOTE_CHARS = 300  # how much of what a client sent an error quotes back: no reply amplifies
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # the only way a surrogate enters a frame
_TYPES = ("reset", "step", "state", "close")
_KEYS = {"reset": {"type", "data"}, "step": {"type", "data"}, "state": {"type"}, "close": {"type"}}
_HTTP_STATUS = {
    "INVALID_JSON": 400,
    "VALIDATION_ERROR": 422,
    "EXECUTION_ERROR": 400,
    "CAPACITY_REACHED": 503,
}


class ResetData(BaseModel):
    """The reset fields the server itself keeps, typed strictly (OpenEnv's ``ResetRequest``
    coerces ``true`` to seed 1); every other key is the game's task, for its engine to check."""

    model_config = ConfigDict(extra="allow")
    seed: StrictInt | None = Field(default=None, ge=0)
    episode_id: StrictStr | None = Field(default=None, max_length=255)


class Refusal(Exception):
    """A frame or request refused before it reached the environment; ``code`` is OpenEnv's."""

    def __init__(
        self, code: str, message: str, errors: list[dict[str, Any]] | None = None, status: int = 0
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.errors = code, message, errors
        self.status = status or _HTTP_STATUS.get(code, 400)

    def frame(self) -> str:
        extra = {"errors": self.errors} if self.errors is not None else {}
        return _error_frame(self.code, self.message, **extra)

    def response(self) -> JSONResponse:
        detail = self.errors if self.errors is not None else _clip(self.message)
        return JSONResponse({"detail": detail, "code": self.code}, status_code=self.status)


def _clip(text: str) -> str:
    return text if len(text) <= _QUOTE_CHARS else f"{text[:_QUOTE_CHARS]}... ({len(text)} chars)"


def _error_frame(code: str, message: str, **extra: Any) -> str:
    # json.dumps escapes any non-ASCII (a surrogate included), so an error always encodes.
    return json.dumps({"type": "error", "data": {"message": _clip(message), "code": code, **extra}})


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (send a finite number)")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400 parses to inf, which no JSON reply can carry
        raise ValueError(f"{_clip(text)} is too large for a float")
    return number


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)


def parse(text: str) -> Any:
    """``text`` as JSON, or a ``Refusal`` for anything an engine should never see.

    Refused: malformed JSON, NaN and infinities, integers beyond Python's 4,300-digit limit,
    nesting deeper than ``MAX_DEPTH``, and lone surrogates (``"\\ud800"`` is valid JSON but not
    Unicode: a reply that quotes it cannot be encoded, so it must not reach the environment).
    """
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as error:
        raise Refusal("INVALID_JSON", f"invalid JSON: {error}") from None
    except RecursionError:
        raise Refusal("INVALID_JSON", f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # an over-long integer, NaN, an infinite float
        raise Refusal("INVALID_JSON", f"invalid JSON: {error}") from None
    # Walking a frame costs more than parsing it; most frames provably need no walk.
    if _SURROGATE_ESCAPE.search(text) or text.count("[") + text.count("{") > MAX_DEPTH:
        _inspect(value)
    return value


def _inspect(value: Any) -> None:
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
            continue
        if isinstance(item, dict):
            children = list(item.items())
            for key, _ in children:
                _check_text(key, (*path, key))
        elif isinstance(item, list):
            children = list(enumerate(item))
        else:
            continue
        if len(path) >= MAX_DEPTH:
            raise Refusal("INVALID_JSON", f"JSON nested deeper than {MAX_DEPTH} levels")
        stack.extend((child, (*path, key)) for key, child in children)


def _check_text(text: str, path: tuple[Any, ...]) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        point = f"U+{ord(text[error.start]):04X}"
        where = [
            part
            if isinstance(part, int)
            else _clip(part.encode(errors="backslashreplace").decode())
            for part in path
        ]
        message = (
            f"the frame holds a lone surrogate {point} (at {where}), which is not Unicode text; "
            "send UTF-8, or escape a character beyond U+FFFF as a surrogate pair"
        )
        errors = [{"type": "lone_surrogate", "loc": where, "msg": message}]
        raise Refusal("VALIDATION_ERROR", message, errors) from None


def _validation_errors(error: ValidationError) -> list[dict[str, Any]]:
    # Without the input, the context objects (a ValueError is not JSON) or pydantic's URL: an
    # error reply neither echoes what was sent nor fails to encode.
    return [
        {
            "type": item["type"],
            "loc": [part if isinstance(part, int) else _clip(str(part)) for part in item["loc"]],
            "msg": _clip(item["msg"]),
        }
        for item in error.errors(include_url=False, include_context=False, include_input=False)
    ]


def _validate(model: type[BaseModel], data: Any, what: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        errors = _validation_errors(error)
        raise Refusal("VALIDATION_ERROR", f"invalid {what}: {errors[0]['msg']}", errors) from None


def _execution_error(error: Exception, call: str) -> Refusal:
    if not isinstance(error, ValueError | TypeError):  # the engine's refusals; the rest is a bug
        logger.warning("%s raised %s", call, type(error).__name__, exc_info=error)
        return Refusal("EXECUTION_ERROR", f"{call} failed: {type(error).__name__}: {error}")
    return Refusal("EXECUTION_ERROR", str(error))


def observation_json(observation: Any) -> str:
    """``serialize_observation(observation)`` as JSON, in one pass of pydantic's serializer."""
    extra = {"metadata": observation.metadata} if observation.metadata else {}
    tail = to_json({"reward": observation.reward, "done": observation.done, **extra}).decode()
    body = observation.model_dump_json(exclude={"reward", "done"})
    return f'{{"observation":{body},{tail[1:]}'


class _Session:
    __slots__ = ("env", "websocket", "last_message", "expired")

    def __init__(self, env: KitEnvironment, websocket: WebSocket, now: float) -> None:
        self.env, self.websocket, self.last_message, self.expired = env, websocket, now, False


class SessionServer:
    """The ``/ws`` sessions of one app: at most ``max_sessions``, each closed when idle."""

    def __init__(
        self,
        environment: type[KitEnvironment],
        factory: Callable[[], KitEnvironment],
        *,
        max_sessions: int,
        idle_timeout_s: float,
        max_frame_bytes: int,
        workers: Workers,
    ) -> None:
        for name, value in (
            ("max_sessions", max_sessions),
            ("idle_timeout_s", idle_timeout_s),
            ("max_frame_bytes", max_frame_bytes),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be positive, not {value!r}")
        self.game = environment.game_name
        self.action_cls = environment.action_cls
        self.factory = factory
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.max_frame_bytes = max_frame_bytes
        self.workers = workers
        self.sessions: set[_Session] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()  # expiry closes in flight, kept referenced

    # The WebSocket endpoint.

    async def websocket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        if "session_id" in websocket.query_params:
            # Attaching to a session by id would let anyone who learns one read its secrets.
            message = (
                "this server does not attach to sessions by id: open /ws, one socket per session"
            )
            await _refuse(websocket, "SESSION_ERROR", message, 1008)
            return
        if len(self.sessions) >= self.max_sessions:
            message = (
                f"the server holds its maximum of {self.max_sessions} sessions "
                "(max_concurrent_envs, MAX_CONCURRENT_ENVS); close one or retry later"
            )
            extra = {"active_sessions": len(self.sessions), "max_sessions": self.max_sessions}
            await _refuse(websocket, "CAPACITY_REACHED", message, 1013, **extra)
            return
        try:
            env = self.factory()
        except Exception as error:
            logger.warning("the %s factory raised", self.game, exc_info=error)
            await _refuse(websocket, "FACTORY_ERROR", f"the {self.game} environment failed", 1011)
            return
        loop = asyncio.get_running_loop()
        session = _Session(env, websocket, loop.time())
        self.sessions.add(session)
        if self._reaper is None or self._reaper.get_loop() is not loop:  # an app served anew
            self._reaper = loop.create_task(self._reap())
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect" or session.expired:
                    break
                session.last_message = loop.time()
                reply = await self.answer(env, message)
                if reply is None:  # the client's "close"
                    break
                await websocket.send({"type": "websocket.send", "text": reply})
        except WebSocketDisconnect:
            pass
        finally:
            # Freed before the close handshake: a client that saw its socket close may reconnect.
            self.sessions.discard(session)
            if not session.expired:
                await _close(websocket, 1000)

    async def answer(self, env: KitEnvironment, message: dict[str, Any]) -> str | None:
        """The reply to one received ASGI message (None: the client asked to close)."""
        try:
            text = message.get("text")
            if text is None:
                raise Refusal("INVALID_JSON", "binary frames are not read: send JSON as text")
            if len(text) > self.max_frame_bytes or (
                4 * len(text) > self.max_frame_bytes and len(text.encode()) > self.max_frame_bytes
            ):
                raise Refusal("VALIDATION_ERROR", self._too_large(len(text.encode())))
            return await self._dispatch(env, parse(text))
        except Refusal as refusal:
            return refusal.frame()

    def _too_large(self, size: int) -> str:
        return (
            f"the frame is {size:,} bytes, over this server's limit of {self.max_frame_bytes:,} "
            "(MAX_FRAME_BYTES)"
        )

    async def _dispatch(self, env: KitEnvironment, frame: Any) -> str | None:
        if not isinstance(frame, dict):
            kind = "null" if frame is None else type(frame).__name__
            message = f'a frame is a JSON object {{"type": ..., "data": {{...}}}}, not {kind}'
            errors = [{"type": "dict_type", "loc": [], "msg": message}]
            raise Refusal("VALIDATION_ERROR", message, errors)
        kind = frame.get("type")
        if not isinstance(kind, str) or kind not in _TYPES:
            quoted = _clip(json.dumps(kind))
            raise Refusal(
                "UNKNOWN_TYPE", f"unknown message type {quoted}: send one of {', '.join(_TYPES)}"
            )
        extra = frame.keys() - _KEYS[kind]
        if extra:
            errors = [
                {
                    "type": "extra_forbidden",
                    "loc": [_clip(key)],
                    "msg": "Extra inputs are not permitted",
                }
                for key in sorted(extra)
            ]
            raise Refusal("VALIDATION_ERROR", f"a {kind} frame takes {sorted(_KEYS[kind])}", errors)
        if kind == "close":
            return None
        if kind != "state":
            data = self._data(kind, frame)
            if kind == "step":
                action = _validate(self.action_cls, data, f"{self.game} action")
            else:
                _validate(ResetData, data, "reset data")
        try:
            if kind == "state":
                return self._bounded(f'{{"type":"state","data":{env.state.model_dump_json()}}}')
            if kind == "step":
                observation = env.step(action)
            else:
                observation = await self._reset(env, data)
            return self._bounded(
                f'{{"type":"observation","data":{observation_json(observation)}}}', kind
            )
        except Refusal:
            raise
        except Exception as error:  # one session's failure is its own frame's error, no more
            raise _execution_error(error, kind) from None

    async def _reset(self, env: KitEnvironment, data: dict[str, Any]) -> Any:
        """``env.reset(**data)``: inline, or in a worker process if the task may be costly."""
        task = dict(data)
        episode_id = task.pop("episode_id", None)
        if not env.costly(task):
            return env.reset(episode_id=episode_id, **task)
        try:
            return await self.workers.reset(env, task, episode_id)
        except Busy as busy:
            raise Refusal("CAPACITY_REACHED", str(busy), status=503) from None

    def _bounded(self, reply: str, kind: str = "state") -> str:
        """``reply``, or a refusal if it is over the frame limit: no client is sent a frame it
        could not send itself (OpenEnv's client reads at most 1 MiB, as this server does)."""
        if 4 * len(reply) <= self.max_frame_bytes:  # UTF-8 spends at most 4 bytes a character
            return reply
        size = len(reply.encode())
        if size <= self.max_frame_bytes:
            return reply
        what = "nothing changed" if kind == "state" else f"the {kind} was made"
        raise Refusal(
            "EXECUTION_ERROR",
            f"the {self.game} {kind} reply is {size:,} bytes, over this server's frame limit of "
            f"{self.max_frame_bytes:,} (MAX_FRAME_BYTES), and was not sent ({what}); the "
            "environment must bound its text",
        )

    @staticmethod
    def _data(kind: str, frame: dict[str, Any]) -> dict[str, Any]:
        if kind == "step" and "data" not in frame:
            errors = [{"type": "missing", "loc": ["data"], "msg": "Field required"}]
            raise Refusal("VALIDATION_ERROR", "a step frame needs data: the action", errors)
        data = frame.get("data", {})
        if not isinstance(data, dict):
            message = f"a {kind} frame's data is a JSON object, not {type(data).__name__}"
            errors = [{"type": "dict_type", "loc": ["data"], "msg": message}]
            raise Refusal("VALIDATION_ERROR", message, errors)
        return data

    # Idle sessions.

    async def _reap(self) -> None:
        """Close sessions idle for ``idle_timeout_s``; one task, asleep until the next deadline."""
        loop = asyncio.get_running_loop()
        try:
            while self.sessions:
                now = loop.time()
                oldest = min(session.last_message for session in self.sessions)
                if oldest + self.idle_timeout_s > now:
                    await asyncio.sleep(oldest + self.idle_timeout_s - now)
                    continue
                for session in [
                    s for s in self.sessions if s.last_message + self.idle_timeout_s <= now
                ]:
                    self._expire(session)
        finally:
            if self._reaper is asyncio.current_task():
                self._reaper = None

    def _expire(self, session: _Session) -> None:
        session.expired = True
        self.sessions.discard(session)  # the slot is free now, whatever the client does
        message = (
            f"session closed after {self.idle_timeout_s:g} s without a message; reconnect and reset"
        )
        task = asyncio.get_running_loop().create_task(
            _refuse(session.websocket, "SESSION_EXPIRED", message, 1000)
        )
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    # HTTP: OpenEnv's stateless /reset and /step, one fresh environment per request.

    async def http_reset(self, request: Request) -> Response:
        try:
            body = await self._read_body(request)
            body = {} if body is None else body
            _validate(ResetData, body, "reset request")
            try:
                observation = await self._reset(self.factory(), body)
                reply = self._bounded(observation_json(observation), "reset")
            except Refusal:
                raise
            except Exception as error:
                raise _execution_error(error, "reset") from None
        except Refusal as refusal:
            return refusal.response()
        return Response(reply, media_type="application/json")

    async def http_step(self, request: Request) -> Response:
        try:
            step = _validate(StepRequest, await self._read_body(request), "step request")
            action = _validate(self.action_cls, step.action, f"{self.game} action")
            try:
                reply = self._bounded(observation_json(self.factory().step(action)), "step")
            except Refusal:
                raise
            except Exception as error:
                raise _execution_error(error, "step") from None
        except Refusal as refusal:
            return refusal.response()
        return Response(reply, media_type="application/json")

    async def _read_body(self, request: Request) -> Any:
        declared = request.headers.get("content-length", "")
        if len(declared) > 18 or (declared.isdigit() and int(declared) > self.max_frame_bytes):
            raise Refusal("VALIDATION_ERROR", self._too_large_body(declared), status=413)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_frame_bytes:
                raise Refusal(
                    "VALIDATION_ERROR", self._too_large_body(f"over {len(body)}"), status=413
                )
        if not body:
            return None
        try:
            text = body.decode()
        except UnicodeDecodeError as error:
            raise Refusal("INVALID_JSON", f"the body is not UTF-8: {error}") from None
        return parse(text)

    def _too_large_body(self, size: str) -> str:
        return (
            f"the body is {size} bytes, over this server's limit of {self.max_frame_bytes:,} "
            "(MAX_FRAME_BYTES)"
        )


async def _refuse(websocket: WebSocket, code: str, message: str, close: int, **extra: Any) -> None:
    """Send one error frame, then close; a client that is gone or never reads costs nothing."""
    try:
        await asyncio.wait_for(websocket.send_text(_error_frame(code, message, **extra)), 10)
    except (TimeoutError, WebSocketDisconnect, RuntimeError, OSError):
        pass
    await _close(websocket, close)


async def _close(websocket: WebSocket, code: int) -> None:
    try:
        await websocket.close(code)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass  # already closed by the client, or by an expiry


def _mcp_refusal() -> dict[str, Any]:
    # `openenv validate` wants POST /mcp to answer JSON-RPC; it answers, and serves nothing.
    message = "this server plays a kit game over /ws; it has no MCP tools or sessions"
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": message}}


def install(app: FastAPI, server: SessionServer) -> None:
    """Replace OpenEnv's ``/ws``, ``/mcp`` and HTTP ``/reset``/``/step`` on ``app`` with ``server``'s.

    ``/health``, ``/schema``, ``/metadata`` and ``/state`` stay OpenEnv's, so ``openenv validate``
    passes; ``POST /mcp`` answers every call with a JSON-RPC error, so no session is made there.
    """
    replaced = {
        ("/ws", None),
        ("/mcp", None),
        ("/mcp", "POST"),
        ("/reset", "POST"),
        ("/step", "POST"),
    }

    def is_replaced(route: BaseRoute) -> bool:
        methods = getattr(route, "methods", None) or {None}
        return any((getattr(route, "path", None), method) in replaced for method in methods)

    app.router.routes[:] = [route for route in app.router.routes if not is_replaced(route)]
    app.add_api_websocket_route("/ws", server.websocket)
    app.add_api_route(
        "/reset",
        server.http_reset,
        methods=["POST"],
        response_model=ResetResponse,
        tags=["Environment Control"],
        summary="Reset a fresh environment (one per request; play a game over /ws)",
        openapi_extra=_body(ResetRequest),
    )
    app.add_api_route(
        "/step",
        server.http_step,
        methods=["POST"],
        response_model=StepResponse,
        tags=["Environment Control"],
        summary="Step a fresh environment (one per request; play a game over /ws)",
        openapi_extra=_body(StepRequest),
    )
    app.add_api_route("/mcp", _mcp_refusal, methods=["POST"], include_in_schema=False)
    app.router.on_shutdown.append(server.workers.close)  # the worker processes end with the app


def _body(model: type[BaseModel]) -> dict[str, Any]:
    return {"requestBody": {"content": {"application/json": {"schema": model.model_json_schema()}}}}
