"""SFT warm-up sets: each game played by its solver, in the exact conversation TRL renders.

Why: a small model learns nothing from RL until it makes valid tool calls, and the fastest way
there is SFT on conversations in *exactly* the format GRPO will show it. So
``sft_dataset(game, num_games, seed)`` plays the solver's games through the ``kit.envs`` tools,
as TRL renders a GRPO rollout: system + user prompt with the reset observation, assistant turns
with a short reasoning text and one tool call, tool results as TRL formats them (errors as
``str({'error': msg})``), and a closing assistant message once the game is over. A ``tools``
column holds the tools' JSON schemas so ``SFTTrainer`` renders the same tool prompt. Every
example is replayed in a fresh env before it is returned (``validate_example``).

The games come from the train split only (``kit.tasks``), and a game with a word pool (Wordle)
guesses only the split's own words, so an SFT set never shows an eval task, not even as a
probe; ``kit.tasks.leaks`` checks it. The sets shipped in ``data/sft/`` are made, and checked
byte for byte, by ``python -m kit.data`` (``kit.data``); ``load_sft(game)`` reads them.

``policy=`` plays the games with another player (any ``kit.solvers.policies`` factory): a
demonstrator weaker than the solver, to ask what RL adds to imperfect demonstrations
(``examples/flawed_demonstrator.py``), or a model, for data of its own play.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from kit import registry
from kit.envs import ENVS
from kit.episode import assistant_message, replay, run_episode, tool_schemas
from kit.paths import data_dir
from kit.solvers.policies import PolicyFactory, noisy_policy
from kit.tasks import TaskProvider, check_count, leaks


def ending(env: Any, won: str, lost: str) -> str:
    """A closing message (``GameSpec.closing``) of a game that ends: ``won`` or ``lost``, or
    that two invalid moves in a row ended it, as the last call's error shows."""
    if env.won:
        return won
    if env.calls and env.calls[-1].error is not None:
        return "The game ended after two invalid moves in a row."
    return lost


def _features() -> Any:
    from datasets import Features, Json, List, Value

    # Json keeps each message exactly as written: with plain structs, Arrow would merge the
    # argument dicts of different tools (stay() would render as {"direction": null}).
    return Features(
        {
            "messages": List(Json()),
            "tools": List(Json()),
            "environment": Value("string"),
            "task": Json(),
        }
    )


def sft_examples(
    game: str,
    num_games: int = 100,
    seed: int = 0,
    noise: float = 0.0,
    reasoning: bool | None = None,
    split: str = "train",
    difficulty: str | None = None,
    policy: PolicyFactory | None = None,
    habit: bool | str = False,
) -> list[dict[str, Any]]:
    """The rows of ``sft_dataset`` as plain dicts (what the JSONL files hold), each validated.

    Game ``i`` plays task ``i`` of ``TaskProvider(game, split, seed=seed)`` with a player seeded
    from ``(seed, i)``, so the first ``k`` games do not depend on ``num_games``. Wordle's solver
    and its blunders guess only the split's secrets, so no other split's word is ever shown.
    ``policy`` plays the games instead of the solver (see ``sft_dataset``). Every train set,
    the solver's too, is checked with ``kit.tasks.leaks`` and refused if it shows an eval task.
    """
    spec = registry.game(game)
    check_count("num_games", num_games)
    env_cls = spec.env
    if policy is None:
        # A game with a word pool (Wordle) plays only the split's own words: a train game must
        # not show an eval secret even as a probe or a blunder (data/splits/README.md).
        words = None if spec.words is None else spec.words(split)
        policy = noisy_policy(noise, reasoning is not False, words, habit)
    elif noise or reasoning is not None or habit:
        raise ValueError(
            "noise=, reasoning= and habit= configure the solver; a policy= plays as it is made "
            f"(got noise={noise!r}, reasoning={reasoning!r}, habit={habit!r}): pass e.g. "
            "noisy_policy(0.3)"
        )
    tools = tool_schemas(env_cls)
    rows = []
    for i, task in enumerate(TaskProvider(game, split, num_games, seed, difficulty)):
        env = env_cls()
        episode = run_episode(
            env, task.row(), policy(env_cls, seed * 1_000_003 + i), spec.turn_limit
        )
        completion = episode.completion
        if episode.truncated:
            if spec.ends:
                raise ValueError(f"{game} game {i} did not end within {spec.turn_limit} tool calls")
            completion = completion[:-1]  # the call past the limit was never made
        messages = episode.prompt + completion + [assistant_message(spec.closing(env))]
        row = {"messages": messages, "tools": tools, "environment": game, "task": task.task}
        validate_example(row)
        rows.append(row)
    shown = leaks(game, rows) if split == "train" else []
    if shown:
        raise ValueError(f"these {game} train games show eval tasks: {shown[:3]}")
    return rows


def sft_dataset(
    game: str,
    num_games: int = 100,
    seed: int = 0,
    noise: float = 0.0,
    reasoning: bool | None = None,
    split: str = "train",
    difficulty: str | None = None,
    policy: PolicyFactory | None = None,
    habit: bool | str = False,
) -> Any:
    """Solver-played SFT conversations for ``game``: columns ``messages``, ``tools``,
    ``environment`` and ``task``.

    ``noise`` is the noisy solver's blunder rate: blunders add states a perfect player never
    reaches (a wasted guess, an invalid move and its error) and the recovery from them, at the
    cost of training on the blunders too; ``habit`` makes each blunder the game's habit move of
    that name instead (``True``: its first; ``noisy_policy``). ``reasoning=False`` leaves the
    assistant text empty (default: the solver states a reason for each move).
    Only ``split="train"`` tasks are used unless asked otherwise; Wordle's guesses, too, come
    from the split's secrets only, so a train set never shows an eval secret (``leaks``).
    ``policy`` (a ``kit.solvers.policies`` factory) plays the games instead: a demonstrator other
    than the solver, e.g. a flawed one that RL must outgrow (``examples/flawed_demonstrator.py``)
    or a model (``kit.rollout.model_policy``); ``noise`` and ``reasoning`` are then left unset.
    A train set that shows an eval task is refused, whoever played it.
    """
    from datasets import Dataset

    rows = sft_examples(game, num_games, seed, noise, reasoning, split, difficulty, policy, habit)
    return Dataset.from_list(rows, features=_features())


def validate_example(example: Mapping[str, Any]) -> Any:
    """Replay an SFT example in a fresh env; raise ``ValueError`` where it disagrees, else
    return the env as the replay left it.

    Checks that the one user message ends with the reset observation and that every tool
    message is what calling the assistant's tool calls (in order, as TRL does) returns, byte
    for byte, with nothing but assistant turns in between.
    """
    game = registry.game(example["environment"]).name
    messages = list(example["messages"])
    env = ENVS[game]()
    observation = env.reset(**example["task"])
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if len(users) != 1 or not messages[users[0]]["content"].endswith(observation):
        raise ValueError("the example's one user message must end with the env's reset observation")
    start = users[0] + 1
    recorded = messages[start:]
    turns = [message for message in recorded if message["role"] == "assistant"]
    expected = replay(env, turns)
    for i, (actual, wanted) in enumerate(itertools.zip_longest(recorded, expected), start):
        if wanted is not None and wanted["role"] == "tool":
            if actual is None or actual.get("role") != "tool":
                raise ValueError(f"message {i}: missing the tool result of {wanted['name']}")
            if (actual.get("name"), actual.get("content")) != (wanted["name"], wanted["content"]):
                raise ValueError(
                    f"message {i}: tool result {actual.get('content')!r} differs from the env's "
                    f"{wanted['content']!r}"
                )
        elif actual is not wanted:  # a turn is replayed as itself: anything else is extra
            raise ValueError(f"message {i}: expected an assistant turn, got {actual['role']!r}")
    return env


def load_sft(game: str) -> Any:
    """The SFT set of ``game`` as a ``Dataset``: the shipped file (``data/sft/<game>/train.jsonl``)
    or, for a game that ships none (a user's own), the same set played now by the game's solver
    (:func:`sft_dataset` with the options of its spec's ``sft``, as the shipped files were made).
    """
    from datasets import Dataset

    spec = registry.game(game)
    path = data_dir() / "sft" / spec.name / "train.jsonl"
    if not path.exists():
        return sft_dataset(spec.name, **spec.sft)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return Dataset.from_list(rows, features=_features())


def first_turns(data: Any, turns: int = 1) -> Any:
    """``data`` (an SFT set) with each conversation cut after its first ``turns`` assistant
    turns: each game's opening, for a warm-up that teaches the first decisions and leaves the
    rest of the game to GRPO. A conversation with fewer turns is kept whole.

    Why: on Catch the first move is the one only the board decides (the paddle starts in the
    centre), and later moves can be copied from earlier ones. Trained on whole games at 2e-4,
    SmolLM2-135M learned the format and the copying, not the board; on openings alone at 1e-3 it
    read the ball's column within 100 steps (docs/results.md, "SmolLM2-135M-Instruct on a CPU").
    """
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise ValueError(f"turns must be an int >= 1, got {turns!r}")

    def cut(row: Mapping[str, Any]) -> dict[str, Any]:
        ends = [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"]
        if len(ends) <= turns:
            return {"messages": row["messages"]}
        return {"messages": row["messages"][: ends[turns - 1] + 1]}

    return data.map(cut)
