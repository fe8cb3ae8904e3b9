"""A served game survives hostile clients: malformed frames, lone surrogates, idle and prying sockets.

Why: a server reached by URL is reached by anyone. Each test here is a way OpenEnv's own ``/ws``
handler (what ``kit.serve.build_app`` installed before ``kit/serve/websocket.py``) could be made
to drop a session, play a move it then could not answer, hold slots forever, or hand one
client's session to another; each failed against that handler and passes against the kit's.
Servers run in-process (``kit.serve.Server``) on loopback ports and are always closed.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv", reason="the served games need `pip install 'kit[serve]'`")

from openenv.core.env_server.serialization import serialize_observation  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import ClientConnection, connect  # noqa: E402

import kit.serve  # noqa: E402
from kit.builtin.catch.serve import CatchEnvironment  # noqa: E402
from kit.builtin.echo.serve import EchoEnvironment  # noqa: E402
from kit.builtin.wordle.serve import WordleEnvironment  # noqa: E402
from kit.serve import ENVIRONMENTS  # noqa: E402
from kit.serve.websocket import observation_json  # noqa: E402

TIMEOUT_S = 10


class ProbeEcho(EchoEnvironment):
    """Echo that records whether it runs on the event loop, and fails on ``"boom"``."""

    calls: list[bool] = []

    def reset(self, seed=None, episode_id=None, **task):  # type: ignore[no-untyped-def]
        self.calls.append(_on_event_loop())
        return super().reset(seed, episode_id, **task)

    def step(self, action, timeout_s=None, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(_on_event_loop())
        if action.message == "boom":
            raise RuntimeError("the engine broke")
        return super().step(action)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _serve(environment: type, **options: Any) -> kit.serve.Server:
    # Looked up at call time, so the same tests can be pointed at another build_app.
    return kit.serve.Server(kit.serve.build_app(environment, **options), "127.0.0.1", 0)


@pytest.fixture(scope="module")
def catch() -> Iterator[str]:
    with _serve(CatchEnvironment, max_concurrent_envs=8, max_frame_bytes=8192) as server:
        yield server.url


@pytest.fixture(scope="module")
def wordle() -> Iterator[str]:
    with _serve(WordleEnvironment, max_concurrent_envs=8) as server:
        yield server.url


def _open(url: str, path: str = "/ws") -> ClientConnection:
    return connect(url.replace("http://", "ws://") + path, proxy=None, open_timeout=TIMEOUT_S)


def _ask(socket_: ClientConnection, frame: Any) -> dict[str, Any]:
    socket_.send(frame if isinstance(frame, str | bytes) else json.dumps(frame))
    return json.loads(socket_.recv(timeout=TIMEOUT_S))


def _error(socket_: ClientConnection, frame: Any) -> dict[str, Any]:
    reply = _ask(socket_, frame)
    assert reply["type"] == "error", reply
    return reply["data"]


def _refusal(socket_: ClientConnection) -> dict[str, Any]:
    """The error frame a socket refused at connection gets, unasked, before the server closes it."""
    reply = json.loads(socket_.recv(timeout=TIMEOUT_S))
    assert reply["type"] == "error", reply
    return reply["data"]


def _state(socket_: ClientConnection) -> dict[str, Any]:
    reply = _ask(socket_, {"type": "state"})
    assert reply["type"] == "state", reply
    return reply["data"]


def _closed(socket_: ClientConnection) -> bool:
    try:
        socket_.recv(timeout=TIMEOUT_S)
    except ConnectionClosed:
        return True
    return False


MALFORMED = {
    "binary frame": b'{"type": "state"}',
    "a list": "[]",
    "a number": "3",
    "a string": '"x"',
    "null": "null",
    "an integer of 5,000 digits": '{"type": "step", "data": {"action_id": ' + "1" * 5000 + "}}",
    "nesting past the parser's depth": "[" * 4000 + "]" * 4000,
    "nesting past the kit's depth": '{"type": "reset", "data": {"x": ' + "[" * 40 + "]" * 40 + "}}",
    "an action whose validator raises": {
        "type": "step",
        "data": {"action_id": 1, "message": "LEFT"},
    },
    "a key with a lone surrogate": '{"type": "state", "\\udc00": 1}',
}


@pytest.mark.parametrize("frame", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_frame_gets_an_error_and_the_episode_goes_on(catch: str, frame: Any) -> None:
    with _open(catch) as ws:
        episode = _ask(ws, {"type": "reset", "data": {"ball_col": 2}})["data"]
        first = _ask(ws, {"type": "step", "data": {"message": "LEFT"}})["data"]
        error = _error(ws, frame)
        assert error["code"] in ("INVALID_JSON", "VALIDATION_ERROR"), error
        assert "Traceback" not in error["message"] and len(error["message"]) < 1000
        second = _ask(ws, {"type": "step", "data": {"message": "RIGHT"}})["data"]
    metadata = second["observation"]["metadata"]
    assert metadata["episode_id"] == episode["observation"]["metadata"]["episode_id"]
    assert metadata["step_count"] == first["observation"]["metadata"]["step_count"] + 1 == 2


def test_refusals_keep_openenv_codes_and_never_echo_the_input(catch: str) -> None:
    # What OpenEnv's handler already answered, answered the same way (its clients read the codes).
    with _open(catch) as ws:
        huge = "x" * 2000
        assert _error(ws, {"type": huge})["code"] == "UNKNOWN_TYPE"
        assert huge not in json.dumps(_error(ws, {"type": huge}))
        assert _error(ws, "{not json")["code"] == "INVALID_JSON"
        assert _error(ws, '{"type": "reset", "data": {"seed": NaN}}')["code"] == "INVALID_JSON"
        assert _error(ws, '{"type": "reset", "data": {"seed": 1e400}}')["code"] == "INVALID_JSON"
        for frame in (
            {"type": "step"},
            {"type": "step", "data": []},
            {"type": "reset", "data": "x"},
            {"type": "state", "data": {}},
            {"type": "step", "data": {"action_id": 7, "extra": huge}},
        ):
            error = _error(ws, frame)
            assert error["code"] == "VALIDATION_ERROR" and error["errors"], (frame, error)
            assert huge not in json.dumps(error)
        assert _error(ws, {"type": "reset", "data": {"ball_col": 9}})["code"] == "EXECUTION_ERROR"
        assert _ask(ws, {"type": "reset", "data": {"ball_col": 0}})["type"] == "observation"


def test_a_frame_over_the_size_limit_is_refused_and_the_session_survives(catch: str) -> None:
    with _open(catch) as ws:
        _ask(ws, {"type": "reset", "data": {"ball_col": 1}})
        for text in ("x" * 9000, "é" * 4200):  # over 8,192 bytes: in characters, or only in UTF-8
            frame = json.dumps({"type": "step", "data": {"message": text}}, ensure_ascii=False)
            error = _error(ws, frame)
            assert error["code"] == "VALIDATION_ERROR" and "limit of 8,192" in error["message"]
        reply = _ask(ws, {"type": "step", "data": {"message": "LEFT"}})["data"]
        assert reply["observation"]["metadata"]["step_count"] == 1


SURROGATES = {
    "in a step": '{"type": "step", "data": {"message": "LE\\ud800FT"}}',
    "in a reset": '{"type": "reset", "data": {"ball_col": 1, "episode_id": "\\ud800"}}',
    "in a nested key": '{"type": "step", "data": {"action_id": 1, "game_params": {"\\ud800": 1}}}',
}


@pytest.mark.parametrize("frame", SURROGATES.values(), ids=SURROGATES.keys())
def test_a_lone_surrogate_is_refused_before_the_environment_sees_it(catch: str, frame: str) -> None:
    with _open(catch) as ws:
        _ask(ws, {"type": "reset", "data": {"ball_col": 3}})
        _ask(ws, {"type": "step", "data": {"message": "LEFT"}})
        before = _state(ws)
        error = _error(ws, frame)
        assert error["code"] == "VALIDATION_ERROR" and "U+D800" in error["message"], error
        assert _state(ws) == before


def test_a_surrogate_pair_is_text_and_is_played() -> None:
    with _serve(EchoEnvironment) as server, _open(server.url) as ws:
        _ask(ws, {"type": "reset"})
        reply = _ask(ws, '{"type": "step", "data": {"message": "smile \\ud83d\\ude00"}}')
        assert reply["data"]["observation"]["echoed_message"] == "smile \U0001f600"


def test_environment_calls_run_inline_and_a_failure_stays_in_its_frame() -> None:
    ProbeEcho.calls.clear()
    with _serve(ProbeEcho) as server, _open(server.url) as first, _open(server.url) as second:
        for ws in (first, second):
            _ask(ws, {"type": "reset"})
            _ask(ws, {"type": "step", "data": {"message": "hello"}})
        error = _error(first, {"type": "step", "data": {"message": "boom"}})
        assert error["code"] == "EXECUTION_ERROR" and "the engine broke" in error["message"]
        for ws in (first, second):
            reply = _ask(ws, {"type": "step", "data": {"message": "again"}})["data"]
            assert reply["observation"]["echoed_message"] == "again"
    assert len(ProbeEcho.calls) == 7 and all(ProbeEcho.calls), ProbeEcho.calls


@pytest.mark.slow
def test_idle_sessions_expire_and_free_their_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSION_IDLE_TIMEOUT_S", "0.6")  # build_app reads it; an argument wins
    with _serve(EchoEnvironment, max_concurrent_envs=3) as server:
        idle = [_open(server.url) for _ in range(2)]
        busy = _open(server.url)
        for ws in (*idle, busy):
            _ask(ws, {"type": "reset"})
        with _open(server.url) as extra:
            assert _refusal(extra)["code"] == "CAPACITY_REACHED"
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # a session that talks stays, however long it lives
            _ask(busy, {"type": "step", "data": {"message": "still here"}})
            time.sleep(0.1)
        for ws in idle:
            error = json.loads(ws.recv(timeout=TIMEOUT_S))["data"]
            assert error["code"] == "SESSION_EXPIRED"
            assert "after 0.6 s without a message" in error["message"]
            assert "reconnect and reset" in error["message"]
            assert _closed(ws)
        with _open(server.url) as first, _open(server.url) as second:
            for ws in (first, second):
                assert _ask(ws, {"type": "reset"})["type"] == "observation"
        busy.close()
    with _serve(EchoEnvironment, idle_timeout_s=0.3) as server, _open(server.url) as ws:
        error = json.loads(ws.recv(timeout=TIMEOUT_S))["data"]
        assert error["code"] == "SESSION_EXPIRED" and "after 0.3 s" in error["message"]


def test_no_one_attaches_to_a_session_and_mcp_makes_none(wordle: str) -> None:
    with _open(wordle) as owner:
        _ask(owner, {"type": "reset", "data": {"secret": "sheep"}})
        episode = _state(owner)["episode_id"]

        # OpenEnv's /mcp made sessions (that never expired) and handed out their ids.
        request = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
        created = _post(wordle, "/mcp", json.dumps(request).encode())[1]
        assert "error" in created and "result" not in created, created
        with pytest.raises(InvalidStatus):
            _open(wordle, "/mcp").close()

        # And /ws attached anyone who knew an id; here nothing attaches, whatever the id.
        for session_id in (episode, str(uuid.uuid4()), ""):
            with _open(wordle, f"/ws?session_id={session_id}") as intruder:
                error = _refusal(intruder)
                assert error["code"] == "SESSION_ERROR" and "does not attach" in error["message"]
                assert episode not in json.dumps(error) and _closed(intruder)

        # Nothing else says which sessions exist.
        for path in ("/state", "/metadata", "/schema", "/health", "/openapi.json"):
            with urllib.request.urlopen(wordle + path, timeout=TIMEOUT_S) as response:
                assert episode not in response.read().decode()
        assert _state(owner)["episode_id"] == episode


def test_a_full_server_says_so_and_a_dropped_socket_frees_its_slot_at_once() -> None:
    with _serve(EchoEnvironment, max_concurrent_envs=2) as server:
        first, second = _open(server.url), _open(server.url)
        for ws in (first, second):
            _ask(ws, {"type": "reset"})
        with _open(server.url) as extra:
            error = _refusal(extra)
            assert error["code"] == "CAPACITY_REACHED"
            assert (error["active_sessions"], error["max_sessions"]) == (2, 2)
            assert "MAX_CONCURRENT_ENVS" in error["message"]
            assert _closed(extra) and extra.close_code == 1013  # "try again later"
        first.socket.shutdown(socket.SHUT_RDWR)  # gone without a close frame, as a crash would
        first.socket.close()
        deadline = time.monotonic() + 2
        while True:
            with _open(server.url) as replacement:
                reply = _ask(replacement, {"type": "reset"})
            if reply["type"] == "observation" or time.monotonic() > deadline:
                break
        assert reply["type"] == "observation", reply
        assert _ask(second, {"type": "step", "data": {"message": "hi"}})["type"] == "observation"
        second.close()


def _post(url: str, path: str, body: bytes, **headers: str) -> tuple[int, Any]:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


HOSTILE_BODIES = {
    "a bad task": ("/reset", b'{"secret": "qqqqq"}', 400),
    "a lone surrogate in a task": ("/reset", b'{"secret": "\\ud800"}', 422),
    "a lone surrogate in an action": ("/step", b'{"action": {"message": "\\ud800"}}', 422),
    "an invalid action": ("/step", b'{"action": {"msg": "[crane]"}}', 422),
    "deep nesting": ("/reset", b"[" * 100_000 + b"]" * 100_000, 400),
    "an integer of 5,000 digits": ("/reset", b'{"seed": ' + b"1" * 5000 + b"}", 400),
    "not UTF-8": ("/reset", b'{"secret": "\xff"}', 400),
    "not an object": ("/step", b"[]", 422),
    "over the size limit": ("/reset", b'{"secret": "' + b"x" * 2_000_000 + b'"}', 413),
}


@pytest.mark.parametrize("case", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
def test_http_reset_and_step_answer_hostile_bodies_with_a_clean_4xx(
    wordle: str, case: tuple[str, bytes, int]
) -> None:
    path, body, status = case
    code, reply = _post(wordle, path, body)
    assert code == status, reply
    assert "detail" in reply and "Traceback" not in json.dumps(reply)


def test_http_bodies_are_bounded_even_without_a_length(wordle: str) -> None:
    host, port = wordle.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    chunks = (b'{"secret": "' if i == 0 else b"x" * 65536 for i in range(40))  # 2.5 MB, chunked
    connection.request("POST", "/reset", chunks, {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 413 and json.loads(response.read())["code"] == "VALIDATION_ERROR"
    connection.close()


def test_http_reset_and_step_still_play_one_fresh_environment(wordle: str) -> None:
    code, reply = _post(wordle, "/reset", b'{"secret": "sheep"}')
    assert code == 200 and reply["observation"]["metadata"]["game"]["guesses"] == []
    code, reply = _post(wordle, "/step", b'{"action": {"message": "[crane]"}}')
    assert code == 200 and reply["observation"]["metadata"]["step_count"] == 1


def test_openenv_clients_play_and_validate_unchanged(wordle: str) -> None:
    from openenv.cli._validation import validate_running_environment
    from openenv.core import GenericEnvClient

    report = validate_running_environment(wordle)
    assert report["passed"], report["criteria"]
    with GenericEnvClient(base_url=wordle).sync() as client:
        result = client.reset(secret="sheep")
        assert "Wordle" in result.observation["text"]
        result = client.step({"message": "[sheep]"})
        assert result.done and result.reward == 1.0
        assert client.state()["step_count"] == 1


@pytest.mark.parametrize("game", sorted(ENVIRONMENTS))
def test_observation_json_is_serialize_observation(game: str) -> None:
    env = ENVIRONMENTS[game]()
    observations = [env.reset(seed=4) if game != "echo" else env.reset()]
    observations.append(env.step(env.action_cls(message="LEFT" if game == "catch" else "[crane]")))
    for observation in observations:
        assert json.loads(observation_json(observation)) == serialize_observation(observation)
