"""One hostile session cannot slow the others, and nothing a client sends makes a reply unbounded.

Why: a served game is reached by anyone, and cost is a way to break it that correctness tests do
not see: a costly reset on the one event loop stalled every session (3 clients checking hard
Sudoku puzzles pushed others' median step from 0.7 ms to about 2 s), replies echoed moves whole
and TextArena's transcript grew with them (a Sudoku move padded to 1 MB gave a 121 MB reply by
step 40), Echo kept every message, and a typed field of the reset went unchecked. Each test here
failed on the server before ``kit/serve/workers.py``, ``kit.games.check_action`` and the typed
reset; servers run in-process on loopback ports and are always closed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv", reason="the served games need `pip install 'kit[serve]'`")

from websockets.sync.client import ClientConnection, connect  # noqa: E402

import kit.remote  # noqa: E402
import kit.serve  # noqa: E402
from kit import registry  # noqa: E402
from kit.builtin.echo.engine import HISTORY_CHARS, Echo  # noqa: E402
from kit.envs import ENVS  # noqa: E402
from kit.serve import ENVIRONMENTS, Server, build_app  # noqa: E402
from kit.solvers import play  # noqa: E402

TIMEOUT_S = 30
# A 17-clue puzzle with no solution: 33.5 million search nodes to settle (tests/test_sudoku.py);
# the engine refuses it as too costly after 100,000, about 0.2-0.3 s of CPU.
COSTLY = "9..........1..7..3.....3.......6......3.1....2....56..........5.3...4.96...3....."
# Six bytes of JSON a character, the most any character costs in a reply (a control character).
WORST = "\x01"


def _open(url: str) -> ClientConnection:
    return connect(url.replace("http://", "ws://") + "/ws", proxy=None, open_timeout=TIMEOUT_S)


def _ask(ws: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(frame))
    return json.loads(ws.recv(timeout=TIMEOUT_S))


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    started = {game: Server(build_app(ENVIRONMENTS[game]), "127.0.0.1", 0) for game in ENVS}
    try:
        yield {game: server.url for game, server in started.items()}
    finally:
        for server in started.values():
            server.close()


# -- every move bounded, in-process and remote alike ------------------------------------------

_TOOL = {
    "wordle": lambda env, text: env.guess(text),
    "sudoku": lambda env, text: env.place(text, 1, 1),
    "catch": lambda env, text: env.move(text),
    "echo": lambda env, text: env.echo(text),
}
_TASK = {"wordle": {"secret": "sheep"}, "sudoku": {"seed": 3}, "catch": {"ball_col": 2}, "echo": {}}


@pytest.mark.parametrize("game", sorted(ENVS))
def test_an_over_long_move_is_refused_alike_in_process_and_remote(
    game: str, servers: dict[str, str]
) -> None:
    """Before: in-process a 10 MB guess counted as an invalid move; remotely its frame was refused
    and nothing was played, so the two paths counted different games."""
    limit = registry.game(game).max_action_chars
    errors, counts = [], []
    for env in (ENVS[game](), kit.remote.env(game, servers[game])()):
        env.reset(**_TASK[game])
        with pytest.raises(ValueError) as refused:
            _TOOL[game](env, "x" * 10_000_000)
        errors.append(str(refused.value))
        counts.append((env.game.num_steps, env.invalid_calls, env.calls[-1].error))
    assert errors[0] == errors[1], errors
    if game in ("wordle", "echo"):  # their tools pass text on; Catch's and Sudoku's parse it
        assert f"at most {limit:,} characters" in errors[0], errors
    assert counts[0] == counts[1] and counts[0][:2] == (0, 1), counts


@pytest.mark.parametrize("game", sorted(ENVS))
def test_a_padded_move_is_refused_at_the_first_move_and_changes_nothing(
    game: str, servers: dict[str, str]
) -> None:
    """A raw client's 1 MB move (valid, then padded) is refused by the engine's limit, not
    played and echoed: before, it made a 4 MB reply at Sudoku's first step."""
    move = {"wordle": "[crane]", "sudoku": "[1 1 1]", "catch": "LEFT", "echo": "hello"}[game]
    with _open(servers[game]) as ws:
        _ask(ws, {"type": "reset", "data": _TASK[game]})
        before = _ask(ws, {"type": "state"})
        reply = _ask(ws, {"type": "step", "data": {"message": move + " " * 1_000_000}})
        assert reply["type"] == "error" and reply["data"]["code"] == "EXECUTION_ERROR", reply
        assert "so it was not played" in reply["data"]["message"]
        assert len(json.dumps(reply)) < 1_000
        assert _ask(ws, {"type": "state"}) == before


def _worst_moves(game: str) -> Iterator[str]:
    """Moves of the game's longest length, made of the costliest characters, that keep a game
    going as long as it can go: each accepted move padded, and a warning between them."""
    limit = registry.game(game).max_action_chars
    if game == "echo":
        while True:
            yield WORST * limit
    for move in play(game, **_TASK[game]):
        yield WORST * (limit - len(move) - 1) + " " + move if game != "catch" else move
        yield WORST * limit  # an invalid move: a warning, and the game goes on


@pytest.mark.parametrize("game", sorted(ENVS))
def test_no_reply_or_state_exceeds_the_frame_limit_whatever_the_moves(
    game: str, servers: dict[str, str]
) -> None:
    """The longest episode a client can make, every move at the limit in 6-byte characters:
    every reply and the state stay under 1 MiB (before: Echo's state of 120 MB, Sudoku's 121 MB
    reply)."""
    largest = 0
    with _open(servers[game]) as ws:
        _ask(ws, {"type": "reset", "data": _TASK[game]})
        for number, move in enumerate(_worst_moves(game)):
            ws.send(json.dumps({"type": "step", "data": {"message": move}}))
            reply = ws.recv(timeout=TIMEOUT_S)
            state = _ask(ws, {"type": "state"})
            largest = max(largest, len(reply.encode()), len(json.dumps(state, ensure_ascii=False)))
            if json.loads(reply)["type"] == "error" or state["data"]["done"] or number > 400:
                break
        assert json.loads(reply)["type"] == "observation", reply[:300]
    assert largest < kit.serve.websocket.DEFAULT_MAX_FRAME_BYTES, largest


def test_echo_keeps_a_window_of_its_newest_messages() -> None:
    game = Echo()
    game.reset()
    for i in range(20):
        game.step(str(i) * 10_000)
    assert sum(map(len, game.messages)) <= HISTORY_CHARS + 10_000
    assert game.messages[-1] == "19" * 10_000 and game.num_steps == 20
    game.step("x" * (2 * HISTORY_CHARS))  # the newest is always kept, however long
    assert game.messages == ["x" * (2 * HISTORY_CHARS)]


def test_a_reply_over_the_frame_limit_is_refused_not_sent() -> None:
    """A game of one's own may not bound its text; the server refuses the reply instead of
    sending a frame its client cannot read."""
    app = build_app(ENVIRONMENTS["sudoku"], max_frame_bytes=4096)
    with Server(app, "127.0.0.1", 0) as server, _open(server.url) as ws:
        reply = _ask(ws, {"type": "reset", "data": {"seed": 1}})
        assert (
            reply["type"] == "error"
            and "over this server's frame limit of 4,096" in (reply["data"]["message"])
        )


# -- reset data typed on arrival --------------------------------------------------------------


@pytest.mark.parametrize("episode_id", [123, {"a": 1}, ["x"], True, "x" * 256])
def test_a_badly_typed_episode_id_is_refused_and_the_episode_goes_on(
    episode_id: Any, servers: dict[str, str]
) -> None:
    """Before: accepted, and every later ``state`` failed with EXECUTION_ERROR."""
    with _open(servers["wordle"]) as ws:
        _ask(ws, {"type": "reset", "data": {"secret": "sheep", "episode_id": "mine"}})
        before = _ask(ws, {"type": "state"})
        reply = _ask(ws, {"type": "reset", "data": {"secret": "sheep", "episode_id": episode_id}})
        assert reply["type"] == "error" and reply["data"]["code"] == "VALIDATION_ERROR", reply
        assert reply["data"]["errors"][0]["loc"] == ["episode_id"]
        assert _ask(ws, {"type": "state"}) == before
    body = json.dumps({"secret": "sheep", "episode_id": episode_id}).encode()
    request = urllib.request.Request(f"{servers['wordle']}/reset", body, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=TIMEOUT_S)
    assert refused.value.code == 422


def test_a_seed_is_an_int_not_a_boolean(servers: dict[str, str]) -> None:
    with _open(servers["catch"]) as ws:
        reply = _ask(ws, {"type": "reset", "data": {"seed": True}})
        assert reply["type"] == "error" and reply["data"]["code"] == "VALIDATION_ERROR"


# -- one costly session delays only itself ----------------------------------------------------


def test_a_costly_reset_delays_only_its_own_session() -> None:
    """Three clients reset the costly puzzle back to back; a witness's steps stay prompt,
    because the search runs in a worker process, not on the event loop (before: its median step
    went from 0.7 ms to about 2 s). A ratio of medians in one run, with a wide margin."""
    with Server(build_app(ENVIRONMENTS["sudoku"]), "127.0.0.1", 0) as server:
        stop = threading.Event()
        refusals: list[str] = []

        def hostile() -> None:
            with _open(server.url) as ws:
                while not stop.is_set():
                    reply = _ask(ws, {"type": "reset", "data": {"puzzle": COSTLY}})
                    refusals.append(reply["data"].get("message", ""))

        def witness_ms(ws: ClientConnection, count: int) -> float:
            times = []
            for _ in range(count):
                start = time.perf_counter()
                _ask(ws, {"type": "state"})
                times.append(time.perf_counter() - start)
            return sorted(times)[count // 2] * 1e3

        with _open(server.url) as ws:
            _ask(ws, {"type": "reset", "data": {"seed": 1}})
            alone = witness_ms(ws, 200)
            threads = [threading.Thread(target=hostile) for _ in range(3)]
            for thread in threads:
                thread.start()
            while len(refusals) < 2:  # the workers are up and searching
                time.sleep(0.05)
            beside = witness_ms(ws, 200)
            stop.set()
            for thread in threads:
                thread.join(timeout=TIMEOUT_S)
    assert refusals and all("too costly to check" in message for message in refusals), refusals
    assert beside < 20 * alone + 5, (alone, beside)


def test_a_request_over_its_cpu_budget_is_refused_and_the_session_plays_on() -> None:
    app = build_app(ENVIRONMENTS["sudoku"], cpu_budget_s=0.01)
    with Server(app, "127.0.0.1", 0) as server, _open(server.url) as ws:
        _ask(ws, {"type": "reset", "data": {"seed": 1}})
        before = _ask(ws, {"type": "state"})
        reply = _ask(ws, {"type": "reset", "data": {"puzzle": COSTLY}})
        assert reply["type"] == "error" and "over 0.01 s of CPU" in reply["data"]["message"]
        assert _ask(ws, {"type": "state"}) == before
        # The worker survives its refusal: a puzzle it can check is played.
        puzzle = before["data"]["data"]["puzzle"]
        assert _ask(ws, {"type": "reset", "data": {"puzzle": puzzle}})["type"] == "observation"


def test_a_costly_reset_plays_the_same_episode_as_in_process(servers: dict[str, str]) -> None:
    local = ENVS["sudoku"]()
    local.reset(seed=4)
    puzzle = local.game.puzzle
    with kit.remote.env("sudoku", servers["sudoku"])() as remote:
        assert remote.reset(puzzle=puzzle) == ENVS["sudoku"]().reset(puzzle=puzzle)
        row, col, number = play("sudoku", puzzle=puzzle)[0].strip("[]").split()
        assert remote.place(row, col, number) == local.place(row, col, number)


# -- the command line's capacity --------------------------------------------------------------


def test_python_m_kit_serve_honours_max_concurrent_envs(tmp_path: Any) -> None:
    """Before: the flag's default (64) overrode the variable envs/README.md documents."""
    help_text = subprocess.run(
        [sys.executable, "-m", "kit.serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "MAX_CONCURRENT_ENVS" in help_text
    with socket_port() as port:
        env = {**os.environ, "MAX_CONCURRENT_ENVS": "2"}
        process = subprocess.Popen(
            [sys.executable, "-m", "kit.serve", "echo", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stderr=subprocess.PIPE,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, process)
        sockets = [_open(url) for _ in range(3)]
        refused = json.loads(sockets[2].recv(timeout=TIMEOUT_S))["data"]
        assert refused["code"] == "CAPACITY_REACHED" and refused["max_sessions"] == 2
        for ws in sockets:
            ws.close()
    finally:
        process.terminate()
        process.wait(timeout=TIMEOUT_S)


class socket_port:
    """A free loopback port, released on exit so a server can bind it."""

    def __enter__(self) -> int:
        import socket

        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        return self._socket.getsockname()[1]

    def __exit__(self, *exc_info: object) -> None:
        self._socket.close()


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return
        except OSError:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.2)


# -- kit.remote names what it supports --------------------------------------------------------


def _mcp_echo_server() -> Server:
    """OpenEnv's current echo server: an MCP environment (OpenEnv's own MCPEnvironment, FastMCP
    tool ``echo_message``) behind OpenEnv's create_app, as ``envs/echo_env/server`` builds it."""
    fastmcp = pytest.importorskip("fastmcp")
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import Observation, State

    class McpEcho(MCPEnvironment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            mcp = fastmcp.FastMCP("echo_env")
            mcp.tool(lambda message: message, name="echo_message")
            super().__init__(mcp)
            self._state = State(step_count=0)

        def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> Observation:
            metadata = {"status": "ready", "message": "Echo environment ready!"}
            return Observation(done=False, reward=0.0, metadata=metadata)

        def _step_impl(self, action: Any, timeout_s: Any = None, **kwargs: Any) -> Observation:
            return Observation(done=False, reward=0.0, metadata={"error": "MCP actions only"})

        @property
        def state(self) -> State:
            return self._state

    app = create_app(McpEcho, CallToolAction, CallToolObservation, env_name="echo_env")
    return Server(app, "127.0.0.1", 0)


def test_kit_remote_names_the_servers_it_plays_when_it_meets_an_mcp_one() -> None:
    """Before: ``AttributeError: 'ServedObservation' object has no attribute 'echoed_message'``."""
    with _mcp_echo_server() as server:
        with _open(server.url) as ws:  # the stand-in answers as the recorded official server
            reply = _ask(ws, {"type": "reset", "data": {}})
        assert reply["data"]["observation"]["metadata"] == {
            "status": "ready",
            "message": "Echo environment ready!",
        }
        with kit.remote.env("echo", server.url)() as env:
            with pytest.raises(kit.remote.UnsupportedServerError) as refused:
                env.reset()
    message = str(refused.value)
    assert "without ['echoed_message']" in message and "metadata.status" in message
    for server_kind in ("textarena_env (wordle, sudoku)", "openspiel_env (catch)", "echo_env"):
        assert server_kind in message
    assert "MCP" in message
