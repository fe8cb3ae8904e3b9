"""The games served over OpenEnv (``envs/``, ``kit.remote``) play exactly as in-process, and fail loudly.

A served game is only worth having if a trainer cannot tell it from the in-process env (the same
text, rewards and ``done``, byte for byte, through the same tools) and if what a network does to
it (malformed messages, concurrent sessions, a dropped WebSocket that OpenEnv's client silently
reopens to a fresh env) surfaces as a clear error instead of a corrupted episode. Each server runs
as ``envs/README.md`` says, ``python -m uvicorn envs.<game>.server:app``, in a subprocess on a
loopback port, and is always shut down.
"""

from __future__ import annotations

import inspect
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv", reason="the OpenEnv servers need `pip install 'kit[serve]'`")

import kit.remote  # noqa: E402
from kit.envs import ENVS, GAME_OVER  # noqa: E402
from kit.games import make  # noqa: E402
from kit.remote import (  # noqa: E402
    BOOKKEEPING,
    KitAction,
    KitClient,
    RemoteError,
    SessionLostError,
)
from kit.solvers import play  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GAMES = ("wordle", "catch", "sudoku", "echo")
STARTUP_S = 120  # importing OpenEnv (gradio) takes seconds; four servers share two cores

# Each game: tasks to play, and one move its engine rejects, slipped in after the first move.
TASKS: dict[str, list[dict[str, Any]]] = {
    "wordle": [{"seed": 3}, {"secret": "sheep"}],
    "catch": [{"ball_col": 0}, {"seed": 7}],
    "sudoku": [{"seed": 1}],
    "echo": [{}],
}
CAPACITY = {"echo": 3}  # sessions the echo server takes, to test the limit (the rest: 64)
# Echo has no move its rules reject (an empty message is refused before it is played).
INVALID = {"wordle": "[zzzzz]", "catch": "UP", "sudoku": "[1 1 0]"}
ECHO_MESSAGES = ["Hello, world!", "h", "héllo ✓ \n\t[GAME]", "x" * 1000]


def _actions(game: str, task: dict[str, Any]) -> list[str]:
    moves = ECHO_MESSAGES if game == "echo" else play(game, **task)
    return [moves[0], *([INVALID[game]] if game in INVALID else []), *moves[1:]]


def _tool(env: Any, game: str, action: str) -> str:
    """Play ``action`` through the env's tool, as a model's tool call would."""
    if game == "wordle":
        return env.guess(action.strip("[]"))
    if game == "catch":
        return env.stay() if action == "STAY" else env.move(action)
    if game == "sudoku":
        row, col, number = action.strip("[]").split()
        return env.place(int(row), int(col), int(number))
    return env.echo(action)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return json.load(response).get("status") == "healthy"
    except OSError:
        return False


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    """One server per game, started together (startup is mostly imports), stopped at the end."""
    started: list[tuple[subprocess.Popen, Any]] = []
    urls: dict[str, str] = {}
    try:
        for game in GAMES:
            port = _free_port()
            log = tempfile.TemporaryFile()
            command = [sys.executable, "-m", "uvicorn", f"envs.{game}.server:app"]
            command += ["--host", "127.0.0.1", "--port", str(port)]
            environment = {**os.environ, "MAX_CONCURRENT_ENVS": str(CAPACITY.get(game, 64))}
            process = subprocess.Popen(
                command, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT
            )
            started.append((process, log))
            urls[game] = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + STARTUP_S
        for (process, log), (game, url) in zip(started, urls.items(), strict=True):
            while not _healthy(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-3000:]
                    pytest.fail(f"the {game} server did not start:\n{tail}")
                time.sleep(0.2)
        yield urls
    finally:
        for process, log in started:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.slow
def test_served_game_matches_in_process_byte_for_byte(servers: dict[str, str], game: str) -> None:
    url = servers[game]
    for task in TASKS[game]:
        actions = _actions(game, task)

        # The protocol: every text, reward, done and info exactly as the engine returns them.
        engine = make(game)
        with KitClient(url).sync() as client:
            result = client.reset(**task)
            assert result.observation.text == engine.reset(**task)
            # OpenSpiel's server sends no reward at reset; the kit's summary still has it.
            reset_reward = None if game == "catch" else engine.reward
            assert (result.reward, result.done) == (reset_reward, engine.done)
            assert result.observation.metadata["game"]["reward"] == engine.reward
            for number, action in enumerate(actions, start=1):
                result = client.step(KitAction(message=action))
                step = engine.step(action)
                metadata = result.observation.metadata
                info = {k: v for k, v in metadata.items() if k not in BOOKKEEPING}
                assert result.observation.text == step.observation
                assert (result.reward, result.done, info) == (step.reward, step.done, step.info)
                assert type(result.reward) is type(step.reward)
                assert metadata["step_count"] == number
                assert metadata["game"]["num_steps"] == engine.num_steps
            assert engine.done or game == "echo", "the solver should finish its game"
            state = client.state()  # secrets included: wordle's secret, sudoku's solution
            assert (state.done, state.won, state.reward) == (engine.done, engine.won, engine.reward)
            assert state.data and all(getattr(engine, k) == v for k, v in state.data.items())

        # The tools: what the model sees and what the reward functions read, call for call.
        local = ENVS[game]()
        with kit.remote.env(game, url)() as remote:
            row = {**task, "prompt": [{"role": "user", "content": "Play."}]}
            assert remote.reset(**row) == local.reset(**row)
            for action in actions:
                outcomes = []
                for env in (local, remote):
                    try:
                        outcomes.append(("result", _tool(env, game, action)))
                    except ValueError as error:
                        outcomes.append(("error", str(error)))
                assert outcomes[0] == outcomes[1], action
            assert remote.transcript == local.transcript
            assert remote.calls == local.calls
            assert (remote.done, remote.won, remote.reward) == (local.done, local.won, local.reward)
            assert remote.invalid_calls == local.invalid_calls == (game != "echo")


@pytest.mark.slow
def test_concurrent_sessions_do_not_interfere(servers: dict[str, str]) -> None:
    remote_wordle = kit.remote.env("wordle", servers["wordle"])

    # Two sessions in lockstep, each on its own secret.
    secrets = ("sheep", "crane")
    plays = [play("wordle", secret=secret) for secret in secrets]
    with remote_wordle() as first, remote_wordle() as second:
        games = [(first, ENVS["wordle"]()), (second, ENVS["wordle"]())]
        for (remote, local), secret in zip(games, secrets, strict=True):
            assert remote.reset(secret=secret) == local.reset(secret=secret)
        for turn in range(max(map(len, plays))):
            for (remote, local), actions in zip(games, plays, strict=True):
                if turn < len(actions):
                    word = actions[turn].strip("[]")
                    assert remote.guess(word) == local.guess(word)
        for remote, local in games:
            assert remote.won and remote.transcript == local.transcript

    # Eight sessions at once, from eight threads.
    def full_game(seed: int) -> tuple[str, str]:
        local = ENVS["wordle"]()
        with remote_wordle() as remote:
            remote.reset(seed=seed)
            local.reset(seed=seed)
            for action in play("wordle", seed=seed):
                remote.guess(action.strip("[]"))
                local.guess(action.strip("[]"))
            return remote.transcript, local.transcript

    with ThreadPoolExecutor(max_workers=8) as pool:
        for remote_text, local_text in pool.map(full_game, range(8)):
            assert remote_text == local_text


def test_malformed_messages_get_clear_errors_and_the_session_survives(
    servers: dict[str, str],
) -> None:
    from websockets.sync.client import connect

    url = servers["wordle"].replace("http://", "ws://") + "/ws"
    with connect(url, proxy=None) as socket_:

        def ask(message: Any) -> dict[str, Any]:
            socket_.send(message if isinstance(message, str) else json.dumps(message))
            return json.loads(socket_.recv(timeout=10))

        def error(message: Any) -> tuple[str, str]:
            reply = ask(message)
            assert reply["type"] == "error", reply
            return reply["data"]["code"], reply["data"]["message"]

        assert error("{not json")[0] == "INVALID_JSON"
        assert error({"type": "dance"})[0] == "UNKNOWN_TYPE"
        assert error({"type": "step", "data": {"msg": "[crane]"}})[0] == "VALIDATION_ERROR"
        # As on the official servers (TRL's classes rely on it): a step before any reset plays
        # on a drawn board, and a bare reset draws one; the state names it, so it can be replayed.
        first = ask({"type": "step", "data": {"message": "[crane]"}})["data"]
        assert first["observation"]["metadata"]["step_count"] == 1
        drawn = ask({"type": "reset", "data": {}})["data"]["observation"]["text"]
        task = ask({"type": "state"})["data"]["task"]
        assert set(task) == {"seed"} and isinstance(task["seed"], int)
        replay = ask({"type": "reset", "data": task})["data"]["observation"]
        assert replay["text"] == drawn == replay["messages"][0]["content"]
        code, message = error({"type": "reset", "data": {"secret": "qqqqq"}})
        assert code == "EXECUTION_ERROR" and "secret must be a 5-letter word" in message

        # After all that, the session plays; a bad reset leaves the episode it interrupted intact.
        assert ask({"type": "reset", "data": {"secret": "sheep"}})["type"] == "observation"
        assert ask({"type": "step", "data": {"message": "[crane]"}})["type"] == "observation"
        # A seed is typed on arrival, as OpenEnv's ResetRequest declares it (a non-negative int).
        assert error({"type": "reset", "data": {"seed": -1}})[0] == "VALIDATION_ERROR"
        assert error({"type": "reset", "data": {"secret": "qqqqq"}})[0] == "EXECUTION_ERROR"
        reply = ask({"type": "step", "data": {"message": "[sheep]"}})["data"]
        assert reply["done"] and reply["reward"] == 1.0
        assert reply["observation"]["metadata"]["step_count"] == 2
        code, message = error({"type": "step", "data": {"message": "[sheep]"}})
        assert code == "EXECUTION_ERROR" and "the game is over" in message

    # Through the client, the engine's refusals are the ValueErrors the in-process env raises.
    local = ENVS["wordle"]()
    with kit.remote.env("wordle", servers["wordle"])() as remote:
        for env in (local, remote):
            env.reset(secret="sheep")
            env.guess("crane")
        with pytest.raises(ValueError) as remote_error:
            remote.reset(secret="qqqqq")
        with pytest.raises(ValueError) as local_error:
            local.reset(secret="qqqqq")
        assert str(remote_error.value) == str(local_error.value)
        assert remote.guess("sheep") == local.guess("sheep") and remote.won
        with pytest.raises(ValueError, match="call reset"):
            remote.game.step("[sheep]")
        stale = remote.game
        remote.reset(secret="crane")
        with pytest.raises(ValueError, match="replaced by a later reset"):
            stale.step("[crane]")


@pytest.mark.slow
def test_a_full_server_refuses_clearly_and_frees_closed_sessions(servers: dict[str, str]) -> None:
    remote_echo = kit.remote.env("echo", servers["echo"])
    with ExitStack() as stack:
        envs = [stack.enter_context(remote_echo()) for _ in range(CAPACITY["echo"])]
        for env in envs:
            assert env.reset() == "Echo environment ready!"
        with remote_echo() as extra, pytest.raises(RemoteError) as refused:
            extra.reset()
        assert refused.value.code == "CAPACITY_REACHED"
        assert "MAX_CONCURRENT_ENVS" in str(refused.value)
        # Closing waits for the server's close frame, sent after it destroyed the session.
        envs[0].__exit__(None, None, None)
        with remote_echo() as extra:
            assert extra.reset() == "Echo environment ready!"
        assert envs[1].echo("still here") == "still here"


class _Relay:
    """A loopback TCP relay the test can cut, as a network or a proxy's idle timeout would."""

    def __init__(self, upstream: str) -> None:
        self._upstream = ("127.0.0.1", int(upstream.rsplit(":", 1)[1]))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self._listener.accept()
            except OSError:
                return  # closed
            far = socket.create_connection(self._upstream)
            self._sockets += [near, far]
            for source, sink in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        for end in self._sockets:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()
        self._sockets.clear()

    def close(self) -> None:
        self._listener.close()
        self.cut()


@pytest.mark.slow
def test_a_dropped_socket_raises_instead_of_playing_a_fresh_board(servers: dict[str, str]) -> None:
    # Closed underneath the env through OpenEnv's own client: its next call reopens the socket,
    # and the server gives the new socket a fresh env. The env must notice, not play on.
    with kit.remote.env("wordle", servers["wordle"])() as env:
        env.reset(secret="sheep")
        env.guess("crane")
        ours = env._connection.episode_id
        env._connection.client.disconnect()
        with pytest.raises(SessionLostError, match="lost after 1 steps"):
            env.guess("sheep")
        # A fresh session indeed: it played the step on a board of its own drawing.
        assert env._connection.client.state().episode_id not in (None, ours)
        with pytest.raises(SessionLostError):
            env.guess("sheep")  # and it stays lost
        with pytest.raises(SessionLostError):
            env.game.state()
        assert not env.done and env.reward == 0.0
        env.reset(secret="sheep")  # a reset starts over on the new session
        env.guess("sheep")
        assert env.won

    # A socket answering for another live episode (as a misrouted reconnect would) is caught too.
    remote_wordle = kit.remote.env("wordle", servers["wordle"])
    with remote_wordle() as env, remote_wordle() as other:
        env.reset(secret="sheep")
        other.reset(secret="crane")
        mine, theirs = env._connection, other._connection
        mine._client, theirs._client = theirs.client, mine.client
        with pytest.raises(SessionLostError, match="answered with step 1 of episode"):
            env.guess("crane")

    # Cut in the network: the next call raises, whether the client saw the cut or not.
    relay = _Relay(servers["wordle"])
    try:
        with kit.remote.env("wordle", relay.url)() as env:
            for pause in (0.5, 0.0):
                env.reset(secret="sheep")
                env.guess("crane")
                relay.cut()
                time.sleep(pause)
                with pytest.raises(SessionLostError):
                    env.guess("sheep")
            for pause in (0.5, 0.0):  # a reset needs no history: after a cut it just reconnects
                relay.cut()
                time.sleep(pause)
                env.reset(secret="sheep")
                assert env.guess("sheep").endswith(f"[sheep]\n{GAME_OVER}") and env.won
    finally:
        relay.close()


@pytest.mark.slow
def test_grpo_trains_through_a_served_game(servers: dict[str, str], tmp_path: Path) -> None:
    """The class kit.remote.env builds is an environment_factory TRL takes, tools and all."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOTrainer

    from kit.models import tiny_model
    from kit.train import grpo_config
    from tests.scripted import ScriptedGeneration, tool_call

    calls = [
        ("guess", {"guess": "crane"}),
        ("guess", {"guess": "qzxjv"}),
        ("guess", {"guess": "sheep"}),
    ]
    model, tokenizer = tiny_model()
    script = [tool_call(name, **arguments) for name, arguments in calls]
    ScriptedGeneration(tokenizer, lambda text: script).install(model)

    def env_reward(environments: list[Any], **kwargs: Any) -> list[float]:
        return [env.reward for env in environments]

    prompt = [{"role": "user", "content": "Guess the secret word with the tools."}]
    trainer = GRPOTrainer(
        model=model,
        args=grpo_config(str(tmp_path), max_steps=1, max_completion_length=3000),
        reward_funcs=env_reward,
        train_dataset=Dataset.from_list([{"prompt": prompt, "secret": "sheep"}]),
        processing_class=tokenizer,
        environment_factory=kit.remote.env("wordle", servers["wordle"]),
    )
    trainer.train()

    local = ENVS["wordle"]()
    local.reset(secret="sheep")
    for name, arguments in calls:
        try:
            getattr(local, name)(**arguments)
        except ValueError:
            pass
    pool = trainer._environment_pool[None]
    assert len(pool) == 2
    for env in pool:
        with env:
            assert env.transcript == local.transcript and env.calls == local.calls and env.won
    (entry,) = [e for e in trainer.state.log_history if "tools/failure_frequency" in e]
    assert entry["tools/failure_frequency"] == pytest.approx(1 / 3)


@pytest.mark.slow
def test_servers_pass_openenv_runtime_validation(servers: dict[str, str]) -> None:
    from openenv.cli._validation import validate_running_environment

    for game, url in servers.items():
        report = validate_running_environment(url)
        assert report["passed"], (game, report["criteria"])
        with urllib.request.urlopen(f"{url}/metadata", timeout=5) as response:
            assert json.load(response)["name"] == f"kit-{game}"


@pytest.mark.parametrize("game", GAMES)
def test_manifest_and_dockerfile_serve_the_module_the_tests_run(game: str) -> None:
    from openenv.core.containers.runtime._server_config import (
        parse_dockerfile_cmd,
        parse_openenv_app_field,
    )
    from openenv.validation.parsers.openenv_yaml import OpenEnvYamlParser

    folder = ROOT / "envs" / game
    manifest = OpenEnvYamlParser().parse(folder)  # the reader behind `openenv validate`
    assert manifest.name == f"kit_{game}"
    app = parse_openenv_app_field((folder / "openenv.yaml").read_text())
    assert app == f"envs.{game}.server:app"
    command = parse_dockerfile_cmd((folder / "Dockerfile").read_text())
    assert command is not None and f" {app} " in command and "--port 8000" in command


@pytest.mark.parametrize("game", GAMES)
def test_each_dockerfile_is_the_templates_rendering(game: str) -> None:
    from envs.template import dockerfile

    assert (ROOT / "envs" / game / "Dockerfile").read_text() == dockerfile(game)


def test_the_template_writes_a_new_games_dockerfile_and_keeps_a_hand_edited_one(tmp_path) -> None:
    from envs.template import dockerfile, write

    with pytest.raises(ValueError, match="lowercase letters"):
        dockerfile("My Game")
    with pytest.raises(FileNotFoundError, match="server.py does not exist"):
        write("mastermind", root=tmp_path)
    (tmp_path / "mastermind").mkdir()
    (tmp_path / "mastermind" / "server.py").write_text("app = None\n")
    path = write("mastermind", root=tmp_path)
    assert '"envs.mastermind.server:app"' in path.read_text() and "{game}" not in path.read_text()
    path.write_text(path.read_text() + "RUN echo mine\n")
    with pytest.raises(FileExistsError, match="differs from the template"):
        write("mastermind", root=tmp_path)
    assert path.read_text().endswith("RUN echo mine\n")  # nothing of the user's was lost
    assert write("mastermind", root=tmp_path, force=True).read_text() == dockerfile("mastermind")


def test_env_factory_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown game"):
        kit.remote.env("chess", "http://127.0.0.1:1")
    with pytest.raises(ValueError, match="base_url must be a URL"):
        kit.remote.env("wordle", "127.0.0.1:8000")
    with pytest.raises(ValueError, match="unknown client options"):
        kit.remote.env("wordle", "http://127.0.0.1:1", timeout=3)
    remote = kit.remote.env("wordle", "http://127.0.0.1:1")
    assert remote.__name__ == "RemoteWordleEnv" and issubclass(remote, ENVS["wordle"])

    def tools(cls: type) -> set[str]:  # what TRL turns into tools: public functions of the class
        functions = inspect.getmembers(cls, predicate=inspect.isfunction)
        return {name for name, _ in functions if not name.startswith("_")} - {"reset"}

    assert tools(remote) == tools(ENVS["wordle"]) == {"guess"}
