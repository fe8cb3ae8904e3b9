"""The kit's OpenEnv servers speak the official schemas: recorded official frames, and the real clients.

Why: TRL's OpenEnv examples and OpenEnv's typed clients were written against OpenEnv's official
servers (``textarena_env`` for Wordle and Sudoku, ``openspiel_env`` for Catch, the pre-MCP
``echo_env``), and ``kit/serve`` promises each game as a superset of its official schema, so that
those clients play the kit's games unchanged (issue 9). Two kinds of evidence, both over a real
WebSocket to servers started with ``kit.serve.resolve_env``:

* Always (CI: no network, no official code). Frames recorded from the official servers
  (``tests/fixtures/openenv_wire/``, see its README) are sent again to the kit's server, with the
  task the recording happened to draw (Wordle's secret ``laugh``, Catch's ball in column 0). Every
  key of every official frame must be in ours with the same JSON type and, where the task fixes
  it, the same value (a value the recording cut is compared by prefix and length). Our
  ``/schema`` must hold every official field. A Catch game is played by OpenSpiel action ids,
  reading the board from ``info_state`` alone.
* For developers with checkouts of github:meta-pytorch/OpenEnv and github:huggingface/trl
  (``KIT_OPENENV_REPO``, ``KIT_TRL_REPO``: a work tree or a bare git dir; skipped otherwise, with
  the reason). ``scripts/official_clients.py`` loads OpenEnv's typed clients and TRL's example env
  classes unchanged; they play whole games against the kit's servers, steered by the kit's solvers
  from what the classes show, and every call must parse and return the server's values.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import urllib.request
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("openenv", reason="the OpenEnv servers need `pip install 'kit[serve]'`")
websockets_client = pytest.importorskip("websockets.sync.client")

import kit.serve  # noqa: E402
from kit.builtin.sudoku.engine import solutions  # noqa: E402
from kit.games import make  # noqa: E402
from kit.solvers import solver  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WIRE = Path(__file__).parent / "fixtures" / "openenv_wire"
GAMES = ("wordle", "sudoku", "catch", "echo")

SECTION = {
    "wordle": "off-wordle",
    "sudoku": "off-sudoku",
    "catch": "off-catch",
    "echo": "off-echo-legacy",  # off-echo-mcp is the MCP-only echo_env, which the kit does not serve
}
SCHEMA_PORT = {"wordle": 8203, "sudoku": 8203, "catch": 8205, "echo": 8202}
"""The recorded schema of each game's official server (Sudoku's server uses Wordle's models)."""


def _sudoku_seed() -> int:
    """A Sudoku task whose cell (1, 1) is a clue, as on the recorded board.

    Why this is the recorded board's case: after ``[1 1 5]`` the official transcript grew by 222
    characters with ``turn`` still 0, the length of TextArena's "attempted to overwrite a pre-filled
    cell (1, 1)" warning; the "violates Sudoku rules" one is longer, and a valid move counts a turn.
    """
    for seed in range(100):
        game = make("sudoku")
        game.reset(seed=seed)
        if game.puzzle[0] != ".":
            return seed
    raise AssertionError("no Sudoku seed below 100 has a clue in cell (1, 1)")


TASKS: dict[str, dict[str, Any]] = {
    "wordle": {"secret": "laugh"},
    "sudoku": {"seed": _sudoku_seed()},
    "catch": {"ball_col": 0},
    "echo": {},
}
"""The task each recording drew, sent with our resets so that the same values are due."""

EXTENSIONS = {("catch", 2): "the kit also takes Catch moves as {'message': 'STAY'}"}
"""Recorded frames the official server refuses and the kit deliberately plays (kit/builtin/catch/serve.py):
sent on a session of their own (``test_catch_takes_the_kits_message_action``), so that the
recorded session's later frames (the state's ``step_count``) still compare."""

UNFIXED_KEYS = {"episode_id", "url"}
"""Values no task fixes (a fresh id; pydantic's docs URL, which names its version): type only."""

UNFIXED_PATHS = {
    # The official echo reports metadata step_count 0 on every step (recorded); the kit's metadata
    # step_count is the steps played, the bookkeeping kit.remote checks. No client reads either.
    "echo": {"data.observation.metadata.step_count", "data.metadata.step_count"},
}

ERROR_RULES = {
    # An error frame's wording and pydantic's extra detail: OpenEnv's client reads only the
    # ``message`` (shown to the user) and the ``code``; ``input`` echoes the sender's own data,
    # ``ctx`` and ``url`` are pydantic's. The code and each error's type, loc and msg must match.
    "unfixed": {"data.message"},
    "optional": {"data.errors[].input", "data.errors[].ctx", "data.errors[].url"},
}

OPAQUE_KEYS = {"raw_state"}
"""Official values that are a Python object's dump, not a schema (TextArena's state): the typed
client keeps it as a plain dict, so only its presence and JSON type count."""

_CUT_STRING = re.compile(r"(?s)(.*)\.\.\.<(\d+) chars>")
_CUT_LIST = re.compile(r"\.\.\.<(\d+) items>")


# -- the recordings ---------------------------------------------------------------------------


def recordings() -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """Each recorded section's (frame sent, reply) pairs, by section name."""
    sections: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    name, sent = None, None
    for line in (WIRE / "official_frames.txt").read_text().splitlines():
        if match := re.fullmatch(r"===== (\S+) \d+", line):
            name, sent = match[1], None
            sections[name] = []
        elif line.startswith(">> "):
            sent = json.loads(line[3:])
        elif line.startswith("<< ") and name is not None and sent is not None:
            sections[name].append((sent, json.loads(line[3:])))
            sent = None
        elif line.strip():
            raise ValueError(f"unexpected line in official_frames.txt: {line[:80]!r}")
    return sections


def official_schemas() -> dict[int, dict[str, dict[str, list[str]]]]:
    """Each recorded server's action and observation ``required`` and ``properties``, by port."""
    schemas: dict[int, dict[str, dict[str, list[str]]]] = {}
    port = None
    for line in (WIRE / "schemas.txt").read_text().splitlines():
        if match := re.fullmatch(r"== (\d+)", line):
            port = int(match[1])
            schemas[port] = {}
        elif match := re.fullmatch(r"\s+(\w+) required= (.*) properties= (.*)", line):
            assert port is not None
            required, properties = ast.literal_eval(match[2]), ast.literal_eval(match[3])
            schemas[port][match[1]] = {"required": required or [], "properties": properties}
        elif line.strip():
            raise ValueError(f"unexpected line in schemas.txt: {line[:80]!r}")
    return schemas


RECORDED = recordings()
FRAMES = [
    pytest.param(game, index, id=f"{game}-{index}-{sent['type']}")
    for game in GAMES
    for index, (sent, _) in enumerate(RECORDED[SECTION[game]])
]


# -- comparing a reply with the official one --------------------------------------------------


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {value!r}")


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 90 else f"{text[:87]}..."


def _pattern(path: str) -> str:
    """A path with its list indices dropped: ``data.errors[0].url`` -> ``data.errors[].url``."""
    return re.sub(r"\[\d+\]", "[]", path)


def differences(
    official: Any,
    ours: Any,
    path: str = "",
    *,
    values: bool = True,
    unfixed: Collection[str] = (),
    optional: Collection[str] = (),
) -> list[str]:
    """Where ``ours`` is not a superset of ``official``: missing keys, other types, other values.

    ``values``: whether values must match too; below a key of ``UNFIXED_KEYS`` or a path of
    ``unfixed`` only types do, and a path of ``optional`` may be missing (paths as ``_pattern``).
    A cut string matches by its prefix and whole length, a cut list by its first items and length.
    """
    rules = {"unfixed": unfixed, "optional": optional}
    if isinstance(official, str) and (cut := _CUT_STRING.fullmatch(official)):
        if not isinstance(ours, str):
            return [f"{path}: official string, ours {json_type(ours)} {_short(ours)}"]
        prefix, length = cut[1], int(cut[2])
        if values and not (ours.startswith(prefix) and len(ours) == length):
            return [
                f"{path}: official {length} chars starting {prefix[:50]!r}, "
                f"ours {len(ours)} chars starting {ours[:50]!r}"
            ]
        return []
    if json_type(official) != json_type(ours):
        return [f"{path}: official {json_type(official)} {_short(official)}, ours {_short(ours)}"]
    if isinstance(official, dict):
        problems = []
        for key, value in official.items():
            where = f"{path}.{key}" if path else key
            if key not in ours:
                if _pattern(where) not in optional:
                    problems.append(f"{where}: missing (official: {_short(value)})")
            elif key in OPAQUE_KEYS:
                if json_type(value) != json_type(ours[key]):
                    problems.append(
                        f"{where}: official {json_type(value)}, ours {_short(ours[key])}"
                    )
            else:
                fixed = values and key not in UNFIXED_KEYS and _pattern(where) not in unfixed
                problems += differences(value, ours[key], where, values=fixed, **rules)
        return problems
    if isinstance(official, list):
        known, length = official, len(official)
        if (
            official
            and isinstance(official[-1], str)
            and (cut := _CUT_LIST.fullmatch(official[-1]))
        ):
            known, length = official[:-1], int(cut[1])
        problems = []
        if values and len(ours) != length:
            problems.append(f"{path}: official {length} items, ours {len(ours)}")
        for index, theirs in enumerate(known):
            where = f"{path}[{index}]"
            if index >= len(ours):
                problems.append(f"{where}: missing (official: {_short(theirs)})")
            else:
                problems += differences(theirs, ours[index], where, values=values, **rules)
        return problems
    if values and official != ours:
        return [f"{path}: official {_short(official)}, ours {_short(ours)}"]
    return []


def test_differences_finds_what_breaks_a_superset() -> None:
    """The comparison itself: each kind of break is found, and a superset passes."""
    official = {
        "a": "abcdef...<12 chars>",
        "b": [1.0, 0.0, "...<4 items>"],
        "c": {"d": None, "episode_id": "x"},
        "raw_state": {"deep": 1},
    }
    good = {"a": "abcdefghijkl", "b": [1.0, 0.0, 0.0, 0.0], "c": {"d": None, "episode_id": "y"}}
    good |= {"raw_state": {"other": 2}, "extra": True}
    assert differences(official, good) == []
    assert differences(official, {**good, "a": "abcdefghijk"})  # cut string: other length
    assert differences(official, {**good, "a": "zbcdefghijkl"})  # cut string: other prefix
    assert differences(official, {**good, "b": [1.0, 0.0, 0.0]})  # cut list: other length
    assert differences(official, {**good, "b": [0.0, 1.0, 0.0, 0.0]})  # cut list: other items
    assert differences(official, {**good, "c": {"d": 0, "episode_id": "y"}})  # null is not 0
    assert differences(official, {**good, "c": {"episode_id": "y"}})  # missing nested key
    assert differences(official, {**good, "raw_state": []})  # opaque, but still an object
    assert differences({"n": 1}, {"n": 2}) and not differences({"n": 1}, {"n": 2}, values=False)
    assert not differences({"e": [{"n": 1, "x": 2}]}, {"e": [{"n": 1}]}, optional={"e[].x"})
    assert differences({"e": [{"n": 1, "x": 2}]}, {"e": [{"n": 3}]}, optional={"e[].x"})
    assert not differences({"e": [{"n": 1}]}, {"e": [{"n": 3}]}, unfixed={"e[].n"})
    assert differences({"n": 1}, {"n": "1"}, values=False)  # a number is not a string


def test_the_recordings_hold_what_the_tests_compare() -> None:
    """The fixtures parse into the frames the tests replay, so no comparison is vacuous."""
    kinds = {game: [sent["type"] for sent, _ in RECORDED[SECTION[game]]] for game in GAMES}
    assert kinds == {
        "wordle": ["reset", "step", "state"],
        "sudoku": ["reset", "step"],
        "catch": ["reset", "step", "step", "state"],
        "echo": ["step", "reset", "step", "step"],
    }
    # The recorded tasks: Wordle's secret and Catch's ball column, which TASKS sends again.
    state = RECORDED["off-wordle"][2][1]["data"]
    assert state["raw_state"]["game_state"]["secret_word"] == TASKS["wordle"]["secret"]
    info_state = RECORDED["off-catch"][0][1]["data"]["observation"]["info_state"]
    assert info_state.index(1.0) == TASKS["catch"]["ball_col"]
    assert {8202, 8203, 8205} <= set(official_schemas())


# -- our servers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    """One kit server per game for the module (seeded: the tasks bare resets draw repeat)."""
    started = {}
    try:
        for game in GAMES:
            started[game] = kit.serve.resolve_env(game, seed=0)
        yield {game: url for game, (url, _) in started.items()}
    finally:
        for _, server in started.values():
            server.close()


def _ws(url: str) -> str:
    return url.replace("http", "ws", 1) + "/ws"


def _send(ws: Any, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(frame))
    return json.loads(ws.recv(timeout=60))


def _with_task(game: str, frame: dict[str, Any]) -> dict[str, Any]:
    if frame["type"] != "reset":
        return frame
    return {**frame, "data": {**frame.get("data", {}), **TASKS[game]}}


@pytest.fixture(scope="module")
def replies(servers: dict[str, str]) -> dict[str, list[dict[str, Any] | None]]:
    """Our reply to each recorded frame, sent in order on one session per game (None: skipped)."""
    answers: dict[str, list[dict[str, Any] | None]] = {}
    for game in GAMES:
        answers[game] = []
        with websockets_client.connect(_ws(servers[game])) as ws:
            for index, (sent, _) in enumerate(RECORDED[SECTION[game]]):
                skip = (game, index) in EXTENSIONS
                answers[game].append(None if skip else _send(ws, _with_task(game, sent)))
    return answers


@pytest.mark.parametrize(("game", "index"), FRAMES)
def test_official_frame(game: str, index: int, replies: dict[str, list[Any]]) -> None:
    """Our reply holds every key of the official one, with its JSON type and its value.

    Values: all that the task fixes (Wordle's transcript, prompt, turn and reward signals after
    ``[crane]``; Catch's ``info_state``, ``legal_actions``, ``game_phase`` and ``null`` reset
    reward; Echo's ``echoed_message``, ``message_length``, reward 0.5 and the empty message's
    VALIDATION_ERROR; Sudoku's transcript length and rules, prompt and an invalid move's turn).
    """
    sent, official = RECORDED[SECTION[game]][index]
    ours = replies[game][index]
    if ours is None:
        pytest.skip(
            f"recorded frame {sent} is answered by a kit extension: {EXTENSIONS[game, index]}"
        )
    rules = ERROR_RULES if official["type"] == "error" else {}
    unfixed = UNFIXED_PATHS.get(game, set()) | rules.get("unfixed", set())
    problems = differences(official, ours, unfixed=unfixed, optional=rules.get("optional", ()))
    assert not problems, (
        f"{game}: our reply to {json.dumps(sent)} is not a superset:\n" + "\n".join(problems)
    )


def test_catch_takes_the_kits_message_action(servers: dict[str, str]) -> None:
    """The one recorded frame the official Catch refuses (no ``action_id``) plays STAY here."""
    (sent, official), *_ = [RECORDED["off-catch"][i] for (g, i) in EXTENSIONS if g == "catch"]
    assert official["data"]["code"] == "VALIDATION_ERROR"  # the recorded official answer
    with websockets_client.connect(_ws(servers["catch"])) as ws:
        _send(ws, _with_task("catch", {"type": "reset", "data": {}}))
        reply = _send(ws, sent)
    assert reply["type"] == "observation", reply
    assert reply["data"]["observation"]["metadata"]["game"]["paddle_col"] == 2  # stayed


@pytest.mark.parametrize("game", GAMES)
def test_schema_holds_the_official_fields(game: str, servers: dict[str, str]) -> None:
    """Our ``/schema`` has every official action and observation field, and requires no other.

    Why both ways for ``required``: an official client sends only the official fields, so a
    field only we require would refuse its frames.
    """
    with urllib.request.urlopen(f"{servers[game]}/schema", timeout=30) as response:
        ours = json.load(response)
    problems = []
    for part, official in official_schemas()[SCHEMA_PORT[game]].items():
        properties = set(ours[part].get("properties", {}))
        required = set(ours[part].get("required", []))
        for field in sorted(set(official["properties"]) | set(official["required"])):
            if field not in properties:
                problems.append(f"{part}.{field}: an official field missing from ours")
        for field in sorted(required - set(official["required"])):
            problems.append(f"{part}.{field}: required by ours, not by the official server")
    assert not problems, f"{game}'s /schema:\n" + "\n".join(problems)


def _cells(info_state: list[float], columns: int = 5) -> tuple[int, int, int]:
    """(ball row, ball column, paddle column) from OpenSpiel's one-hot board, row by row.

    Only while the ball is above the bottom row: there, a missed ball and the paddle look alike.
    """
    rows = len(info_state) // columns
    marked = [divmod(i, columns) for i, value in enumerate(info_state) if value == 1.0]
    ball = [(r, c) for r, c in marked if r < rows - 1]
    paddle = [c for r, c in marked if r == rows - 1]
    assert len(ball) == 1 and len(paddle) == 1, f"not one ball and one paddle: {marked}"
    return ball[0][0], ball[0][1], paddle[0]


@pytest.mark.parametrize("ball_col", range(5))
def test_catch_whole_game_from_info_state(ball_col: int, servers: dict[str, str]) -> None:
    """A whole game by OpenSpiel's action frames, steered by ``info_state`` alone, is won."""
    with websockets_client.connect(_ws(servers["catch"])) as ws:
        reply = _send(ws, {"type": "reset", "data": {"ball_col": ball_col}})["data"]
        assert (reply["reward"], reply["done"]) == (None, False)  # OpenSpiel: no reward at reset
        steps = 0
        while not reply["done"]:
            observation = reply["observation"]
            assert observation["legal_actions"] == [0, 1, 2]
            row, ball, paddle = _cells(observation["info_state"])
            assert row == steps and ball == ball_col  # the ball falls straight down
            action = 0 if ball < paddle else 2 if ball > paddle else 1
            frame = {"action_id": action, "game_name": "catch", "game_params": {}}
            reply = _send(ws, {"type": "step", "data": frame})
            assert reply["type"] == "observation", reply
            reply = reply["data"]
            steps += 1
            assert steps <= 9 and reply["reward"] == (1.0 if reply["done"] else 0.0)
        observation = reply["observation"]
    assert steps == 9
    assert observation["game_phase"] == "terminal" and observation["legal_actions"] == []
    assert observation["current_player_id"] == -4  # pyspiel.PlayerId.TERMINAL
    marked = [i for i, value in enumerate(observation["info_state"]) if value == 1.0]
    assert marked == [45 + ball_col]  # ball and paddle share the bottom cell: caught


@pytest.mark.oracle
def test_catch_frames_match_rl_environment(servers: dict[str, str]) -> None:
    """Every Catch frame equals what openspiel_env makes of OpenSpiel's rl_environment.

    The mapping (game_phase from first/last, reward None until the first step, the agent's
    info_state, legal_actions and current player) restates openspiel_env's
    ``_make_observation``; the time steps are OpenSpiel's own, with the ball column forced.
    """
    pytest.importorskip("pyspiel")
    from open_spiel.python import rl_environment

    def official(time_step: Any) -> dict[str, Any]:
        phase = "terminal" if time_step.last() else "initial" if time_step.first() else "playing"
        rewards = time_step.rewards
        return {
            "info_state": list(time_step.observations["info_state"][0]),
            "legal_actions": list(time_step.observations["legal_actions"][0]),
            "game_phase": phase,
            "current_player_id": time_step.observations["current_player"],
            "reward": None if rewards is None else float(rewards[0]),
            "done": time_step.last(),
        }

    moves = [0, 0, 1, 2, 2, 2, 1, 0, 2]  # every action, at the walls too
    for ball_col in range(5):
        env = rl_environment.Environment("catch", chance_event_sampler=lambda _, col=ball_col: col)
        expected = [official(env.reset())] + [official(env.step([m])) for m in moves]
        with websockets_client.connect(_ws(servers["catch"])) as ws:
            got = [_send(ws, {"type": "reset", "data": {"ball_col": ball_col}})]
            for move in moves:
                frame = {"action_id": move, "game_name": "catch", "game_params": {}}
                got.append(_send(ws, {"type": "step", "data": frame}))
        for step, (want, reply) in enumerate(zip(expected, got, strict=True)):
            data = reply["data"]
            mine = {key: data["observation"][key] for key in want if key not in ("reward", "done")}
            mine |= {"reward": data["reward"], "done": data["done"]}
            assert mine == want, f"ball column {ball_col}, step {step}"


# -- the official clients (dev only) ----------------------------------------------------------


def _helper() -> ModuleType:
    """scripts/official_clients.py, which is not a package module."""
    spec = importlib.util.spec_from_file_location(
        "official_clients", ROOT / "scripts" / "official_clients.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """OpenEnv's typed clients and a loader of TRL's classes; skips where the checkouts are not."""
    helper = _helper()
    try:
        openenv, trl = helper.checkout(helper.OPENENV_VAR), helper.checkout(helper.TRL_VAR)
        clients = helper.load_openenv_clients(openenv, tmp_path_factory.mktemp("openenv"))
    except helper.Unavailable as why:
        pytest.skip(f"the official client code is not available: {why}")

    def trl_class(script: str, name: str, **closure: Any) -> type:
        return helper.trl_class(trl, script, name, **closure)

    return SimpleNamespace(**vars(clients), trl_class=trl_class)


def _spy(client: Any) -> list[dict[str, Any]]:
    """The raw payloads a typed client parses, in order (its own parsing runs unchanged)."""
    payloads: list[dict[str, Any]] = []
    for name in ("_parse_result", "_parse_state"):
        parse = getattr(client, name)

        def spy(payload: dict[str, Any], parse: Callable[..., Any] = parse) -> Any:
            payloads.append(payload)
            return parse(payload)

        setattr(client, name, spy)  # an instance attribute: shadows the method for this client
    return payloads


def _close(*clients: Any) -> None:
    for client in clients:
        if client is not None:
            client.close()


def _defaulted(parsed: dict[str, Any], sent: dict[str, Any], source: str) -> list[str]:
    """Fields of a parsed model that the server did not send, or sent with another value."""
    problems = []
    for key, value in parsed.items():
        if key not in sent:
            problems.append(f"{source}.{key}: not sent; the client filled in {_short(value)}")
        elif value != sent[key]:
            problems.append(f"{source}.{key}: parsed {_short(value)}, sent {_short(sent[key])}")
    return problems


def _result_problems(result: Any, payload: dict[str, Any]) -> list[str]:
    """Where a typed client's StepResult is not what our server sent."""
    observation = result.observation.model_dump()
    top = {key: observation.pop(key) for key in ("reward", "done")}
    problems = _defaulted(observation, payload["observation"], "observation")
    problems += _defaulted(top, payload, "frame")
    if (result.reward, result.done) != (payload["reward"], payload["done"]):
        problems.append(f"StepResult reward/done {result.reward}/{result.done}, sent {payload}")
    return problems


TYPED = {
    # game: (typed client, its action class, the task to reset with, the action to step)
    "wordle": ("TextArenaEnv", "TextArenaAction", TASKS["wordle"], {"message": "[crane]"}),
    "sudoku": ("TextArenaEnv", "TextArenaAction", TASKS["sudoku"], {"message": "[1 1 5]"}),
    "catch": ("OpenSpielEnv", "OpenSpielAction", TASKS["catch"], {"action_id": 1}),
    "echo": ("EchoEnv", "EchoAction", {}, {"message": "Hello"}),
}
CALLS = ("reset", "step", "state")


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("game", GAMES)
def test_typed_client(
    game: str, call: str, official: SimpleNamespace, servers: dict[str, str]
) -> None:
    """OpenEnv's typed client: ``call`` parses, and every field it returns is one our server sent.

    A field the server leaves out is filled in by the client's default (``env_id="unknown"``,
    ``game_name="unknown"``...): it parses, but it is not the server's value, so it counts here.
    """
    client_name, action_name, task, action = TYPED[game]
    client = getattr(official, client_name)(base_url=servers[game])
    payloads = _spy(client)
    try:
        result = client.reset(**task)
        if call == "reset":
            problems = _result_problems(result, payloads[-1])
        else:
            result = client.step(getattr(official, action_name)(**action))
            problems = _result_problems(result, payloads[-1]) if call == "step" else []
        if call == "state":
            state = client.state()
            problems = _defaulted(state.model_dump(), payloads[-1], "state")
    finally:
        _close(client)
    assert not problems, f"{client_name}.{call}() on {game}:\n" + "\n".join(problems)


def _state_payload(client: Any) -> dict[str, Any]:
    """Our server's whole state for the session of a TRL class's client (the kit's fields too)."""
    payloads = _spy(client)
    client.state()
    return payloads[-1]


def _play_wordle(guess: Callable[[str], str], is_done: Callable[[], bool], text: str) -> list[str]:
    """Guess with the kit's solver, fed exactly the text the TRL class returns; the guesses."""
    player, guesses = solver("wordle"), []
    while not is_done():
        assert len(guesses) < 6, f"not done after {guesses}"
        guesses.append(player.act(text))
        text = guess(guesses[-1])
    return guesses


def _play_catch(
    move: Callable[[str], str], stay: Callable[[], str], is_done: Callable[[], bool], text: str
) -> int:
    """Steer by the TRL class's text alone (its ball and paddle columns); the moves made."""
    moves = 0
    while not is_done():
        ball = re.search(r"Ball: row \d+/10, column (\d)/5", text)
        paddle = re.search(r"Paddle: column (\d)/5", text)
        assert ball and paddle, f"no ball or paddle in the class's text {text!r}"
        ball_col, paddle_col = int(ball[1]), int(paddle[1])
        if ball_col < paddle_col:
            text = move("left")
        elif ball_col > paddle_col:
            text = move("right")
        else:
            text = stay()
        moves += 1
        assert moves <= 9, "Catch lasts 9 moves"
    return moves


def test_trl_echo(official: SimpleNamespace, servers: dict[str, str]) -> None:
    """TRL's echo class (it never resets: the server plays on a drawn board) echoes and rewards."""
    EchoToolEnv = official.trl_class(
        "echo", "EchoToolEnv", args=SimpleNamespace(env_host=servers["echo"])
    )
    env = EchoToolEnv()
    try:
        assert env.reset() is None
        for message in ["Hello", "Hello World!", "héllo ✓ [GAME]"]:
            assert env.echo(message) == message
            assert env.reward == len(message) * 0.1
    finally:
        _close(env.env)


def test_trl_wordle(official: SimpleNamespace, servers: dict[str, str]) -> None:
    """TRL's Wordle class plays whole games (one instance, reset between, as GRPO does): a first
    invalid guess scores 0 and the game goes on; the kit's solver, fed the class's text, wins."""
    WordleEnv = official.trl_class("wordle", "WordleEnv", env_url=servers["wordle"])
    env = WordleEnv()
    try:
        for game in range(3):
            text = env.reset()
            assert "You are Playing Wordle" in text and env.reward == 0.0 and not env.done
            if game == 0:
                feedback = env.guess("[qzxjv]")  # not a word: TextArena's one warning
                assert "You attempted an invalid move" in feedback
                assert env.reward == 0.0 and not env.done
            guesses = _play_wordle(env.guess, lambda: env.done, text)
            state = _state_payload(env.client)
            assert env.reward == 1.0 == state["reward"] and state["won"]
            assert state["data"]["secret"] == guesses[-1].strip("[]")
            with pytest.raises(ValueError, match="Game over"):
                env.guess("[crane]")
    finally:
        _close(env.client)


def test_trl_catch(official: SimpleNamespace, servers: dict[str, str]) -> None:
    """TRL's Catch class, steered by its own text, wins every game of 9 moves."""
    CatchEnv = official.trl_class("catch", "CatchEnv", env_url=servers["catch"])
    env = CatchEnv()
    columns = set()
    try:
        for _ in range(12):
            text = env.reset()
            columns.add(int(re.search(r"column (\d)/5", text)[1]))
            assert _play_catch(env.move, env.stay, lambda: env.done, text) == 9
            assert env.reward == 1.0
            with pytest.raises(ValueError, match="Episode is done"):
                env.stay()
    finally:
        _close(env.client)
    assert len(columns) > 1  # bare resets drew different boards


def _rows(text: str) -> list[str]:
    """The nine rows of the board TRL's Sudoku class shows (its hints may follow on the last)."""
    rows = re.findall(r"^R\d(?:\s+(?:[\d.]|\|)){11}", text, re.M)
    assert len(rows) == 9, f"no board in the class's text {text!r}"
    return rows


def _board(text: str) -> str:
    """That board as the game prints one, for the kit's solver (which looks for the marker)."""
    return "[GAME] Game Board:\n" + "\n".join(_rows(text))


def _grid(text: str) -> str:
    """That board as an 81-character puzzle (``.`` empty)."""
    return "".join(cell for row in _rows(text) for cell in row.split()[1:] if cell != "|")


def _sudoku_env(official: SimpleNamespace, servers: dict[str, str]) -> Any:
    SudokuEnv = official.trl_class(
        "sudoku",
        "SudokuEnv",
        env_url=servers["sudoku"],
        difficulty="easy",
        max_turns=100,
        api_delay=0.0,
    )
    return SudokuEnv()


def test_trl_sudoku(official: SimpleNamespace, servers: dict[str, str]) -> None:
    """TRL's Sudoku class: the kit's solver, fed the board the class shows, solves the puzzle
    with every move scored valid, and the class's rewards say so."""
    env = _sudoku_env(official, servers)
    try:
        text = env.reset()
        player, moves = solver("sudoku"), 0
        while not env._done:
            row, col, number = (int(x) for x in player.act(_board(text)).strip("[]").split())
            text = env.place(row, col, number)
            moves += 1
            assert text.startswith(f"Move [{row} {col} {number}]: valid"), text
        assert "Game over" in text
        state = _state_payload(env.client)
        assert state["won"] and moves == state["num_steps"] == len(env._successful_moves)
        assert env.correct_reward == 1.0 and env.progress_reward == 1.0
        assert env.valid_move_reward == 1.0 and env.empty_cell_reward == 1.0
    finally:
        _close(env.client)


def test_trl_sudoku_invalid_moves(official: SimpleNamespace, servers: dict[str, str]) -> None:
    """TRL's Sudoku class scores the server's invalid moves invalid (the issue: it scored two
    invalid moves valid), and the game goes on to be solved.

    A valid move comes between the two: two invalid moves in a row end the game, and then
    TextArena adds nothing but the echoed move (the official server's transcript too), so the class
    can judge the second one only by its own board, and scores a wrong digit in an empty cell
    valid. No server that keeps TextArena's transcript can change that.
    """
    env = _sudoku_env(official, servers)
    try:
        text = env.reset()
        player = solver("sudoku")
        for _ in range(2):
            puzzle = _grid(text)
            (solution,) = solutions(puzzle, 2)
            cell = puzzle.index(".")  # a wrong digit in an empty cell: only the server can tell
            row, col, wrong = cell // 9 + 1, cell % 9 + 1, int(solution[cell]) % 9 + 1
            text = env.place(row, col, wrong)
            assert text.startswith(f"Move [{row} {col} {wrong}]: invalid"), text
            assert not env._done  # the first invalid move in a row is TextArena's warning
            # A valid move in between: TextArena forgives the warning after one.
            row, col, number = (int(x) for x in player.act(_board(text)).strip("[]").split())
            text = env.place(row, col, number)
            assert text.startswith(f"Move [{row} {col} {number}]: valid"), text
        assert len(env._failed_moves) == 2
        while not env._done:
            row, col, number = (int(x) for x in player.act(_board(text)).strip("[]").split())
            text = env.place(row, col, number)
            assert text.startswith(f"Move [{row} {col} {number}]: valid"), text
        assert env.correct_reward == 1.0 and env.progress_reward == 1.0
        assert env.valid_move_reward < 1.0  # the two warnings count against it
    finally:
        _close(env.client)


def test_trl_multi_env(official: SimpleNamespace, servers: dict[str, str]) -> None:
    """TRL's multi-env class: Wordle and Catch rows on one instance, each game won."""
    MultiEnv = official.trl_class("multi_env", "MultiEnv")
    MultiEnv.wordle_url, MultiEnv.catch_url = servers["wordle"], servers["catch"]  # as its main()
    env = MultiEnv()
    try:
        for row in ["wordle", "catch", "wordle", "catch"]:
            text = env.reset(env=row)
            if row == "wordle":
                _play_wordle(env.guess, lambda: env.done, text)
            else:
                assert _play_catch(env.move, env.stay, lambda: env.done, text) == 9
            assert env.done and env.reward == 1.0, row
    finally:
        _close(env._wordle_client, env._catch_client)
