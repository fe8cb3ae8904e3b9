"""``kit.serve``: serving a game from a name, an entrypoint or a URL, and ``kit.remote`` on
servers that speak only the official schemas.

The official servers themselves (OpenEnv's ``textarena_env``, ``openspiel_env``, ``echo_env``)
are not on PyPI; here they are stood in for by the kit's own environments with every kit field
removed and the task ignored, which is what ``kit.remote`` sees of them (the recorded official
frames in ``tests/fixtures/openenv_wire`` hold the kit's fields to the official ones:
``tests/test_official_clients.py``).
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv", reason="kit.serve needs `pip install 'kit[serve]'`")

import kit.remote  # noqa: E402
import kit.serve  # noqa: E402
from kit.envs import ENVS  # noqa: E402
from kit.remote import spec_to_factory  # noqa: E402
from kit.serve import ENVIRONMENTS, Server, resolve_env  # noqa: E402
from kit.serve.base import BOOKKEEPING, KitEnvironment  # noqa: E402
from kit.solvers import play  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class LongWordleEnvironment(ENVIRONMENTS["wordle"]):
    """A variant, served by entrypoint: ``tests.test_serve:LongWordleEnvironment``."""

    options = {"word_length": 7, "num_guesses": 9}


def test_resolve_env_serves_names_and_entrypoints_and_passes_urls_through() -> None:
    assert resolve_env("https://example.org/space") == ("https://example.org/space", None)
    url, server = resolve_env("catch")
    with server:
        assert url.startswith("http://127.0.0.1:") and server.url == url
        with kit.remote.env("catch", url)() as env:
            env.reset(ball_col=4)
            assert [env.move("RIGHT"), env.move("RIGHT")] and env.game.paddle_col == 4
    with pytest.raises(OSError):  # closed: the port no longer answers
        urllib.request.urlopen(f"{url}/health", timeout=2)

    url, server = resolve_env("tests.test_serve:LongWordleEnvironment")
    with server, kit.remote.env("wordle", url)() as env:
        assert "7-letter word" in env.reset(seed=1) and env.game.word_length == 7


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("chess", "unknown environment 'chess'"),
        ("kit.envs:WordleEnv", "not a kit.serve.KitEnvironment subclass"),
        ("kit.serve:nothing", "not a kit.serve.KitEnvironment subclass"),
    ],
)
def test_resolve_env_refuses_what_it_cannot_serve(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_env(spec)


def test_spec_to_factory_gives_an_environment_factory_for_each_kind_of_spec() -> None:
    factory = spec_to_factory("sudoku")
    try:
        assert issubclass(factory, ENVS["sudoku"]) and factory.server is not None
        with factory() as env:  # what TRL does: one instance per rollout, no arguments
            env.reset(seed=2)
            row, col, number = (int(x) for x in play("sudoku", seed=2)[0].strip("[]").split())
            before = env.game.correct_cells
            env.place(row, col, number)
            assert env.game.correct_cells == before + 1
        # A URL: the game is the one the server's /metadata names.
        by_url = spec_to_factory(factory.server.url)
        assert by_url.server is None and issubclass(by_url, ENVS["sudoku"])
    finally:
        factory.server.close()


def test_a_bare_reset_draws_a_task_from_the_servers_seed() -> None:
    """Two servers with one seed deal the same boards; the state names each, for a replay."""
    drawn = []
    for _ in range(2):
        url, server = resolve_env("wordle", seed=11)
        with server, kit.remote.KitClient(url).sync() as client:
            tasks = []
            for _ in range(3):
                client.reset()
                tasks.append(client.state().task)
            secret = client.state().data["secret"]
            client.reset(**tasks[-1])
            assert client.state().data["secret"] == secret  # the drawn task replays its board
        drawn.append(tasks)
    assert drawn[0] == drawn[1] and len({task["seed"] for task in drawn[0]}) == 3


@pytest.mark.slow
def test_the_command_line_serves_a_game(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port: bind, read, release
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "kit.serve", "echo", "--port", str(port), "--seed", "0"],
        cwd=tmp_path,  # not the checkout: the server comes from the installed package
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metadata", timeout=2) as r:
                    assert json.load(r)["name"] == "kit-echo"
                break
            except OSError:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline
                time.sleep(0.2)
        with kit.remote.env("echo", f"http://127.0.0.1:{port}")() as env:
            env.reset()
            assert env.echo("served") == "served"
    finally:
        process.terminate()
        process.wait(timeout=30)
    bad = subprocess.run(
        [sys.executable, "-m", "kit.serve", "chess"], capture_output=True, text=True, cwd=tmp_path
    )
    assert bad.returncode == 2 and "unknown environment 'chess'" in bad.stderr


# -- kit.remote on servers that speak only the official schema ---------------------------------


class _Official:
    """Mixin: a kit environment stripped to its official schema, ignoring the task it is given."""

    def reset(self, seed: Any = None, episode_id: Any = None, **task: Any) -> Any:
        return self._strip(super().reset())  # the official servers draw their own board

    def step(self, action: Any, timeout_s: Any = None, **kwargs: Any) -> Any:
        return self._strip(super().step(action))

    @staticmethod
    def _strip(observation: Any) -> Any:
        metadata = {k: v for k, v in observation.metadata.items() if k not in BOOKKEEPING}
        for key in ("valid", "reason", "message_length"):
            metadata.pop(key, None)
        return observation.model_copy(update={"text": "", "metadata": metadata})


def _official_server(game: str) -> Server:
    from openenv.core.env_server.http_server import create_app

    from kit.serve.base import KitState

    base: type[KitEnvironment] = ENVIRONMENTS[game]
    official = type(f"Official{base.__name__}", (_Official, base), {})
    app = create_app(
        functools.partial(official),
        base.action_cls,
        base.observation_cls,
        max_concurrent_envs=4,
        state_cls=KitState,
    )
    return Server(app, "127.0.0.1", 0)


@pytest.mark.parametrize("game", ["wordle", "sudoku", "catch", "echo"])
def test_kit_remote_plays_an_official_server_and_warns_that_it_ignores_the_task(
    game: str,
) -> None:
    with _official_server(game) as server, kit.remote.env(game, server.url)() as env:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = env.reset(**({"seed": 5} if game != "echo" else {}))
        if game != "echo":
            assert any("ignores the task" in str(w.message) for w in caught)
        secret = env.game.state().data  # the stand-in keeps the kit's state: the oracle here
        local = ENVS[game]()
        # The same board, played locally: every text must match the one rebuilt from the
        # official fields alone.
        task = {"echo": {}, "catch": {"ball_col": secret.get("ball_col")}}.get(game)
        if task is None:
            task = (
                {"secret": secret["secret"]} if game == "wordle" else {"puzzle": secret["puzzle"]}
            )
        assert local.reset(**task) == first
        moves = ["hello", "x"] if game == "echo" else play(game, **task)
        for move in moves:
            if game == "wordle":
                texts = env.guess(move.strip("[]")), local.guess(move.strip("[]"))
            elif game == "catch":
                texts = (
                    env.move(move) if move != "STAY" else env.stay(),
                    (local.move(move) if move != "STAY" else local.stay()),
                )
            elif game == "sudoku":
                r, c, n = (int(x) for x in move.strip("[]").split())
                texts = env.place(r, c, n), local.place(r, c, n)
            else:
                texts = env.echo(move), local.echo(move)
            assert texts[0] == texts[1]
        assert (env.done, env.won, env.reward) == (local.done, local.won, local.reward)
        assert env.game.num_steps == local.game.num_steps
        if game != "echo":
            with pytest.raises(ValueError, match="over"):
                env.game.step(moves[-1])


@pytest.mark.slow
def test_the_wheel_serves_a_game_without_the_checkout(tmp_path: Path) -> None:
    """``kit.serve`` ships in the wheel: installed alone, away from the repository, it serves."""
    pytest.importorskip("hatchling", reason="building the wheel needs hatchling (the dev extra)")
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run([*build, "-q", "-w", str(wheels), str(ROOT)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("kit-*.whl")
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    subprocess.run([*install, str(wheel)], check=True, cwd=tmp_path)
    assert (target / "kit" / "builtin" / "wordle" / "serve.py").is_file()
    code = (
        f"import kit, kit.serve; assert kit.__file__.startswith({str(target)!r}), kit.__file__; "
        "url, server = kit.serve.resolve_env('wordle'); "
        "env = kit.remote.env('wordle', url)(); env.reset(secret='sheep'); "
        "print(env.guess('sheep').splitlines()[-1], env.won); server.close()"
    )
    result = subprocess.run(
        [sys.executable, "-c", "import kit.remote; " + code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] == "True"


def test_echo_replies_do_not_grow_over_an_episode() -> None:
    """Each reply is as long as its message: the history stays in the state, not in every reply."""
    from websockets.sync.client import connect

    url, server = resolve_env("echo")
    with server, connect(url.replace("http://", "ws://") + "/ws", proxy=None) as socket_:
        sizes = []
        socket_.send(json.dumps({"type": "reset", "data": {}}))
        socket_.recv(timeout=10)
        for number in range(300):
            socket_.send(json.dumps({"type": "step", "data": {"message": f"{number:04}" * 256}}))
            sizes.append(len(socket_.recv(timeout=10)))
    # The 1 KB message appears a few times (text, echoed_message, original_message); only the
    # step counter's digits may change the length.
    assert max(sizes) - min(sizes) < 64 and max(sizes) < 6 * 1024


def test_remote_envs_dropped_without_closing_free_their_sessions() -> None:
    """A rollout makes an env per episode and never closes one; the server must not fill up."""
    from kit.rollout import rollout
    from tests.test_rollout import tiny_model_unscripted

    url, server = resolve_env("catch", max_concurrent_envs=4)
    with server:
        for seed in range(12):  # three times the capacity
            kit.remote.env("catch", url)().reset(seed=seed)
        model, tokenizer = tiny_model_unscripted()  # real generation, random weights
        episodes = rollout(
            model,
            kit.remote.env("catch", url),
            tokenizer,
            tasks=range(12),
            batch_size=4,
            max_completion_length=16,
            progress=False,
        )
        assert len(episodes) == 12


@pytest.fixture(scope="module")
def official_servers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The real official servers' apps, from an OpenEnv checkout (dev only: KIT_OPENENV_REPO)."""
    from openenv.core.env_server.http_server import create_app

    from tests.test_official_clients import _helper

    helper = _helper()
    try:
        repo = helper.checkout(helper.OPENENV_VAR)
        found = helper.load_openenv_servers(repo, tmp_path_factory.mktemp("openenv_servers"))
    except helper.Unavailable as why:
        pytest.skip(f"the official server code is not available: {why}")
    pytest.importorskip("textarena")
    pytest.importorskip("pyspiel")

    def textarena(env_id: str) -> Any:
        # download_nltk=False: the data is on disk (tests/conftest.py), the network is not.
        factory = functools.partial(found.TextArenaEnvironment, env_id, download_nltk=False)
        action, observation, state = found.textarena_models
        return create_app(factory, action, observation, max_concurrent_envs=2, state_cls=state)

    action, observation, state = found.openspiel_models
    return {
        "wordle": lambda: textarena("Wordle-v0"),
        "sudoku": lambda: textarena("Sudoku-v0"),
        "catch": lambda: create_app(
            found.OpenSpielEnvironment, action, observation, max_concurrent_envs=2, state_cls=state
        ),
        # The pre-MCP echo env declares no concurrent sessions: one at a time.
        "echo": lambda: create_app(found.EchoEnvironment, *found.echo_models),
    }


@pytest.mark.parametrize("game", ["wordle", "sudoku", "catch", "echo"])
def test_kit_remote_plays_the_real_official_server(
    game: str, official_servers: dict[str, Any], nltk_data: None
) -> None:
    """Dev only: the official servers' own code, played through ``kit.remote``'s readers."""
    with Server(official_servers[game](), "127.0.0.1", 0) as server:
        with kit.remote.env(game, server.url)() as env, warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            first = env.reset(seed=1) if game != "echo" else env.reset()
            state = env.game.state()  # the official server's own state model
            if game == "wordle":
                assert first.startswith("\n[GAME] You are Playing Wordle.")
                secret = state.raw_state["game_state"]["secret_word"]
                local = ENVS["wordle"]()
                local.reset(secret=secret)
                for word in [move.strip("[]") for move in play("wordle", secret=secret)]:
                    assert env.guess(word) == local.guess(word)
                assert env.won and env.reward == 1.0 and env.game.num_steps == local.game.num_steps
            elif game == "sudoku":
                assert "R1" in first and "R9" in first
                with pytest.raises(ValueError, match="invalid move"):
                    env.place(1, 1, 10)  # out of range: TextArena's warning, counted
                assert env.game.invalid_moves == 1 and not env.done
            elif game == "catch":
                column = first.splitlines()[0].index("o")
                for _ in range(9):
                    paddle = env.transcript.splitlines()[-1].index("x")
                    if column == paddle:
                        env.stay()
                    else:
                        env.move("LEFT" if column < paddle else "RIGHT")
                assert env.done and env.won and env.reward == 1.0
            else:
                assert first == "Echo environment ready!"
                assert env.echo("Hello") == "Hello" and env.reward == pytest.approx(0.5)
                with pytest.raises(ValueError, match="must not be empty"):
                    env.echo("")  # refused before it is sent, as the server would refuse it
