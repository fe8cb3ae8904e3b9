"""Datasets: GRPO task sets with fixed splits, and SFT warm-up sets played by the solvers.

Why: a small model learns nothing from RL until it makes valid tool calls, and the fastest way
there is SFT on conversations in *exactly* the format GRPO will show it. And a GRPO run is only
comparable to another if the tasks and the held-out set are fixed. So:

* ``task_dataset(game, split)``: rows with a chat ``prompt`` (ending in a separator: TRL glues
  the reset observation to it) and the task columns ``reset`` reads (``secret``, ``ball_col``,
  ``puzzle``). ``mixture_dataset`` adds the ``environment`` column of multi-env training.
  ``TaskProvider`` iterates the same tasks with their ground truth (like llenvs'
  ``DatasetProvider``) and has ``to_hf_dataset()``.
* ``sft_dataset(game, num_games, seed)``: the solver's games through the ``kit.envs`` tools, as
  TRL renders a GRPO rollout: system + user prompt with the reset observation, assistant turns
  with a short reasoning text and one tool call, tool results as TRL formats them (errors as
  ``str({'error': msg})``), and a closing assistant message once the game is over. A ``tools``
  column holds the tools' JSON schemas so ``SFTTrainer`` renders the same tool prompt. Every
  example is replayed in a fresh env before it is returned (``validate_example``).

Splits (``data/splits/README.md``): Wordle's 156 secrets are split once, with a fixed seed,
into train and a held-out eval list that no SFT or GRPO training set here ever uses. Sudoku's
eval puzzles are a fixed list; training puzzles come from other seeds and never equal one.
Catch holds out whole boards: its eval tasks are played on board heights no training task has
(OpenSpiel's default 10 rows among them), every starting column of each.
``HELD_OUT`` says in one line per game what is held out and how the training data differs;
``leaks(game, rows)`` lists whatever in a training set shows an eval task (Wordle's SFT solver
guesses only train secrets, so that not even a probe shows an eval secret), and
``python -m kit.data --write`` refuses to write an SFT set that leaks.

Nothing here knows a game by name: each game's prompt, tasks and splits, turn limit, closing
text, leak check and SFT options come from its ``GameSpec`` (``kit.registry``; the built-in
games' are in ``kit/builtin/``), so a registered game of your own gets all of the above.

The shipped files are rebuilt, byte for byte, with ``python -m kit.data --write data/``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import tempfile
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

from kit import registry
from kit.envs import ENVS
from kit.episode import Message, assistant_message, replay, run_episode, tool_schemas
from kit.paths import data_dir
from kit.solvers.policies import noisy_policy

SPLITS = ("train", "eval")
SPLIT_SEED = 0  # the seed of every split below: changing it changes the held-out set

SYSTEM_PROMPT = (
    "You are playing a game through tools. Make one tool call per turn and read its result "
    "before the next move. When the game is over, stop calling tools and answer in one short "
    "sentence."
)
# Each game's own values (its GameSpec, kit/builtin/<game>.py), by name; games registered later
# are in them too.
USER_PROMPTS = registry.View("prompt")
# Tool-calling rounds an episode may take (TRL's max_tool_calling_iterations).
TURN_LIMITS = registry.View("turn_limit")
# The shipped SFT sets: how ``python -m kit.data --write`` makes each (see the dataset cards).
SHIPPED_SFT = registry.View("sft")
# What each game's eval split holds out, and how its training data differs: one line per game,
# for tables and cards (a win rate means little until one knows what it was measured on).
HELD_OUT = registry.View("held_out")


def listing(values: Iterable[Any]) -> str:
    """``1, 2 and 3``: values as a sentence lists them."""
    items = [str(value) for value in values]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _check_game(game: str) -> str:
    registry.game(game)  # ValueError for an unknown game
    return game


def check_split(split: str) -> str:
    """``split`` if it is one of ``SPLITS``, else ``ValueError``."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    return split


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def prompt(game: str) -> list[Message]:
    """The chat prompt of ``game``'s tasks: a system message and a user message that ends in a
    blank line, to which TRL appends the reset observation."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": USER_PROMPTS[_check_game(game)]},
    ]


# -- splits ---------------------------------------------------------------------------------------
def make_splits() -> dict[str, Any]:
    """Compute the built-in games' splits from scratch (what ``data/splits`` holds), each with
    its ``GameSpec.splits``: e.g. Wordle's secrets shuffled with ``random.Random(SPLIT_SEED)``."""
    return {
        name: registry.game(name).splits()
        for name in registry.BUILTIN
        if registry.game(name).splits is not None
    }


@cache
def load_split(name: str) -> dict[str, Any]:
    """The shipped split file ``data/splits/<name>.json`` (read once)."""
    return json.loads((data_dir() / "splits" / f"{name}.json").read_text(encoding="utf-8"))


# -- held out means held out ----------------------------------------------------------------------
def leaks(game: str, rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """What in ``rows`` (SFT rows or task rows of ``game``) shows an eval task; [] if nothing.

    Why: a win rate on the eval split says something about learning only if the model never saw
    an eval task in any form, as a task, an answer or a guess. Each game checks its own way
    (``GameSpec.leaks``, ``HELD_OUT``); e.g.:

    * Wordle: no eval secret as a whole word, in any case, in any string of the row (messages,
      tool call arguments, the tools column, the task).
    * Catch: no task on an eval board height (a task without ``rows`` plays the default board,
      itself an eval height), and no board drawn in a user or tool message of that height.
    * Sudoku: no task puzzle, and no board in a user message, equal to an eval puzzle.
    * Echo: no task to leak, so a row carrying task columns is reported.

    A game without a check of its own gets ``eval_task_leaks``: no row's task is an eval task.
    """
    spec = registry.game(game)
    check = spec.leaks or partial(eval_task_leaks, game)
    return [f"row {i}: {leak}" for i, row in enumerate(rows) for leak in check(row)]


def eval_task_leaks(game: str, row: Mapping[str, Any]) -> Iterator[str]:
    """The default leak check: the row's task is one of ``game``'s eval tasks."""
    spec = registry.game(game)
    task = task_of(row, spec.env.task_keys + spec.env.setting_keys)
    if any(task == spec.task(value)[0] for value in spec.tasks("eval") or ()):
        yield f"task {task} is an eval task"


def task_of(row: Mapping[str, Any], columns: Sequence[str] | None = None) -> dict[str, Any]:
    """The reset columns of an SFT row (its ``task``) or of a task row: its ``columns``, by
    default every registered game's task and setting columns."""
    if row.get("task") is not None:
        return dict(row["task"])
    if columns is None:
        envs = [registry.game(name).env for name in registry.names()]
        columns = list(dict.fromkeys(k for env in envs for k in env.task_keys + env.setting_keys))
    return {key: row[key] for key in columns if row.get(key) is not None}


def row_strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string in a row, keys included, with where it sits (``messages[2].content``)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from row_strings(key, f"{path}.{key} (key)")
            yield from row_strings(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from row_strings(item, f"{path}[{i}]")


# -- tasks ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """One task: which env, the prompt, the columns ``reset`` needs and the answer."""

    environment: str
    prompt: list[Message]
    task: dict[str, Any]  # reset columns: {"secret": ...}, {"ball_col": ...}, {"puzzle": ...}
    ground_truth: str  # the secret, the ball's column, the solved grid; "" for echo

    def row(self, environment_column: bool = False) -> dict[str, Any]:
        """The dataset row TRL resets the env from."""
        row = {"prompt": self.prompt, **self.task}
        return {"environment": self.environment, **row} if environment_column else row

    @property
    def label(self) -> str:
        """The task as JSON with its ``environment``: the ground truth veRL and OpenRLHF carry."""
        return json.dumps({"environment": self.environment, **self.task}, sort_keys=True)


class TaskProvider:
    """The tasks of one game and split, in a fixed order drawn from ``seed``.

    Default sizes: train = the 125 train secrets / Catch's 30 train boards and columns / 200
    Sudoku puzzles / 100 Echo prompts; eval = the 31 held-out secrets / Catch's 10 held-out
    boards and columns / the 50 eval puzzles / 20.
    Where they come from is the game's (``GameSpec.tasks``, ``draw``, ``task`` and ``sizes``).
    A split with a fixed list of tasks is cycled through, reshuffled on each pass, when
    ``num_tasks`` exceeds it. The first ``k`` tasks do not depend on ``num_tasks``.

    ``where`` keeps only the tasks whose reset columns have the given values, e.g.
    ``{"ball_col": 0}``: Catch with the ball always in the left column, a task a player can win
    without reading the board (``python -m kit.demo --where ball_col=0`` uses it to tell a
    policy that cannot learn from one that cannot see). Games whose tasks are drawn afresh
    (Sudoku's train split, Echo) have no list to select from and refuse it.
    """

    def __init__(
        self,
        game: str,
        split: str = "train",
        num_tasks: int | None = None,
        seed: int = 0,
        difficulty: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> None:
        self.game = _check_game(game)
        self.split = check_split(split)
        self.spec = spec = registry.game(game)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        fixed = spec.tasks(split)
        if difficulty is not None and (spec.difficulty is None or fixed is not None):
            raise ValueError(
                f"difficulty applies to tasks drawn afresh, of a game with difficulties (such "
                f"as Sudoku's train split); {game}'s {split} tasks have none"
            )
        if fixed is None and spec.draw is None:
            raise ValueError(f"{game} has no {split} tasks: its GameSpec has no list nor draw")
        self.seed = seed
        self.difficulty = difficulty or spec.difficulty
        self.where = dict(where or {})
        self._pool = self._select(None if fixed is None else list(fixed))
        pool = self._pool
        default = len(pool) if pool is not None else spec.sizes.get(split)
        if num_tasks is None and default is None:
            raise ValueError(f"{game}'s {split} tasks are drawn afresh: say how many (num_tasks)")
        self.num_tasks = default if num_tasks is None else _check_count("num_tasks", num_tasks)

    def _select(self, pool: list[Any] | None) -> list[Any] | None:
        if not self.where:
            return pool
        if pool is None:
            raise ValueError(
                f"where= selects from a fixed list of tasks, and {self.game}'s {self.split} "
                "tasks are drawn afresh"
            )
        columns = set(self._task(pool[0]).task)
        unknown = sorted(set(self.where) - columns)
        if unknown:
            raise ValueError(
                f"where= names {unknown}, not a {self.game} task column; the columns are "
                f"{sorted(columns)}"
            )
        chosen = [
            value
            for value in pool
            if all(self._task(value).task[k] == v for k, v in self.where.items())
        ]
        if not chosen:
            raise ValueError(f"no {self.game} {self.split} task has {self.where}")
        return chosen

    def __len__(self) -> int:
        return self.num_tasks

    def __iter__(self) -> Iterator[Task]:
        values = self._values(random.Random(self.seed))
        for _ in range(self.num_tasks):
            yield self._task(next(values))

    def _values(self, rng: random.Random) -> Iterator[Any]:
        pool = self._pool
        if pool is None:
            yield from self.spec.draw(rng, self.difficulty)
        while True:
            order = pool[:]
            rng.shuffle(order)
            yield from order

    def _task(self, value: Any) -> Task:
        columns, ground_truth = self.spec.task(value)
        return Task(self.game, prompt(self.game), columns, ground_truth)

    def to_hf_dataset(self, environment_column: bool = False) -> Any:
        """A ``datasets.Dataset`` of the tasks' rows (``prompt`` + task columns)."""
        from datasets import Dataset

        return Dataset.from_list([task.row(environment_column) for task in self])


def task_dataset(
    game: str,
    split: str = "train",
    num_tasks: int | None = None,
    seed: int = 0,
    difficulty: str | None = None,
    where: Mapping[str, Any] | None = None,
) -> Any:
    """GRPO rows for ``game``: ``prompt`` plus the task columns its env's ``reset`` reads
    (``where``: only the tasks with these column values, see :class:`TaskProvider`)."""
    return TaskProvider(game, split, num_tasks, seed, difficulty, where).to_hf_dataset()


def mixture_dataset(
    games: Mapping[str, int] | Sequence[str], split: str = "train", seed: int = 0
) -> Any:
    """Rows of several games, shuffled together, with the ``environment`` column TRL routes a
    dict ``environment_factory`` by (its keys must be these game names). ``games`` maps each
    game to its number of tasks, or lists games to take their default sizes. Columns a game
    does not use are None."""
    from datasets import Dataset

    sizes = dict(games) if isinstance(games, Mapping) else dict.fromkeys(games)
    if not sizes:
        raise ValueError("name at least one game")
    rows = [
        task.row(environment_column=True)
        for game, size in sizes.items()
        for task in TaskProvider(game, split, size, seed)
    ]
    random.Random(seed).shuffle(rows)
    columns = ["environment", "prompt"] + sorted(
        {k for row in rows for k in row} - {"environment", "prompt"}
    )
    return Dataset.from_list([{column: row.get(column) for column in columns} for row in rows])


# -- SFT ------------------------------------------------------------------------------------------
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
    reasoning: bool = True,
    split: str = "train",
    difficulty: str | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``sft_dataset`` as plain dicts (what the JSONL files hold), each validated.

    Game ``i`` plays task ``i`` of ``TaskProvider(game, split, seed=seed)`` with a player seeded
    from ``(seed, i)``, so the first ``k`` games do not depend on ``num_games``. Wordle's solver
    and its blunders guess only the split's secrets, so no other split's word is ever shown.
    """
    spec = registry.game(game)
    _check_count("num_games", num_games)
    env_cls = spec.env
    # A game with a word pool (Wordle) plays only the split's own words: a train game must not
    # show an eval secret even as a probe or a blunder (data/splits/README.md).
    words = None if spec.words is None else spec.words(split)
    policy = noisy_policy(noise, reasoning=reasoning, words=words)
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
    return rows


def sft_dataset(
    game: str,
    num_games: int = 100,
    seed: int = 0,
    noise: float = 0.0,
    reasoning: bool = True,
    split: str = "train",
    difficulty: str | None = None,
) -> Any:
    """Solver-played SFT conversations for ``game``: columns ``messages``, ``tools``,
    ``environment`` and ``task``.

    ``noise`` is the noisy solver's blunder rate: blunders add states a perfect player never
    reaches (a wasted guess, an invalid move and its error) and the recovery from them, at the
    cost of training on the blunders too. ``reasoning=False`` leaves the assistant text empty.
    Only ``split="train"`` tasks are used unless asked otherwise; Wordle's guesses, too, come
    from the split's secrets only, so a train set never shows an eval secret (``leaks``).
    """
    from datasets import Dataset

    rows = sft_examples(game, num_games, seed, noise, reasoning, split, difficulty)
    return Dataset.from_list(rows, features=_features())


def validate_example(example: Mapping[str, Any]) -> Any:
    """Replay an SFT example in a fresh env; raise ``ValueError`` where it disagrees, else
    return the env as the replay left it.

    Checks that the one user message ends with the reset observation and that every tool
    message is what calling the assistant's tool calls (in order, as TRL does) returns, byte
    for byte, with nothing but assistant turns in between.
    """
    game = _check_game(example["environment"])
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
    """The shipped SFT set of ``game`` (``data/sft/<game>/train.jsonl``) as a ``Dataset``."""
    from datasets import Dataset

    path = data_dir() / "sft" / _check_game(game) / "train.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return Dataset.from_list(rows, features=_features())


# -- the shipped files ----------------------------------------------------------------------------
def jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows as JSON lines, one per row, in a byte-stable form."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def sft_command(game: str) -> str:
    options = SHIPPED_SFT[game]
    args = ", ".join(f"{key}={value!r}" for key, value in options.items())
    return f"kit.data.sft_dataset({game!r}, {args})"


def _noise_text(noise: float) -> str:
    if not noise:
        return "\n  Every move is the solver's own (`noise=0.0`): no blunders, no recoveries."
    return f"""
  With probability {noise} per move the noisy solver blunders (plays the random
  policy's well-formed move) and then plays on from the real state: the set shows recoveries
  from states a perfect player never reaches, at the cost of also training on the blunders
  (their reasoning text, where there is one, reads "Let me try ...")."""


def _sft_card(game: str, rows: Sequence[Mapping[str, Any]]) -> str:
    options = SHIPPED_SFT[game]
    turns = sum(sum(m["role"] == "assistant" for m in row["messages"]) for row in rows)
    won = sum(validate_example(row).won for row in rows)
    size = len(jsonl(rows).encode("utf-8"))
    held_out, guesses = registry.game(game).card_notes(rows)
    turn_text = "a short reasoning text" if options.get("reasoning", True) else "no text"
    return f"""# kit SFT warm-up set: {game}

Solver-played {game} games through `kit.envs.{ENVS[game].__name__}`, in the exact conversation
format `GRPOTrainer(environment_factory={ENVS[game].__name__})` renders: system + user prompt
with the reset observation appended, assistant turns with {turn_text} and one tool
call, tool results as TRL formats them (`{{'error': ...}}` for errors), and a closing message.

- File: `train.jsonl` ({len(rows)} games, {turns} assistant turns, {size:,} bytes); columns
  `messages`, `tools` (the tools' JSON schemas), `environment`, `task` (the reset columns).
- Made by: `{sft_command(game)}`.{_noise_text(options["noise"])}
- Regenerate: `python -m kit.data --write data/` (byte-identical; `--check` compares).
- Tasks: the train split only{held_out}; see `data/splits/README.md`.{guesses}
- Validation: every example was replayed in a fresh env and every tool result matched.
- Games ending in a win: {won} of {len(rows)}.
- Load: `kit.data.load_sft({game!r})`; train: `SFTTrainer(..., args=kit.train.sft_config(...))`.
- Licence: Apache-2.0, like the kit. The games' texts follow TextArena / OpenSpiel / OpenEnv
  (Apache-2.0); Wordle's words come from NLTK's Basic English list and word corpus.
"""


_SPLITS_CARD = """# Fixed task splits

Made by `kit.data.make_splits()`; regenerate with `python -m kit.data --write data/`.

{games}

What each eval split holds out (`kit.data.HELD_OUT`; `kit.data.leaks(game, rows)` lists any
training row that shows an eval task, and `tests/test_heldout.py` runs it on every set):

{held_out}

Licence: Apache-2.0. The secrets are Ogden's Basic English nouns as TextArena selects them.
"""


def write(root: Path) -> list[Path]:
    """Write ``data/splits`` and ``data/sft`` under ``root``; return the files written."""
    splits = make_splits()
    written = []
    folder = root / "splits"
    folder.mkdir(parents=True, exist_ok=True)
    for name, split in splits.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(split, indent=1) + "\n", encoding="utf-8")
        written.append(path)
    specs = [registry.game(game) for game in registry.BUILTIN]
    card = _SPLITS_CARD.format(
        games="\n".join(
            f"- {spec.split_card(splits.get(spec.name))}" for spec in specs if spec.split_card
        ),
        held_out="\n".join(
            textwrap.fill(f"- {game}: {HELD_OUT[game]}.", width=96, subsequent_indent="  ")
            for game in registry.BUILTIN
        ),
    )
    (folder / "README.md").write_text(card, encoding="utf-8")
    written.append(folder / "README.md")
    load_split.cache_clear()
    for game in registry.BUILTIN:
        rows = sft_examples(game, **SHIPPED_SFT[game])
        found = leaks(game, rows)
        if found:  # a shipped training set must never show an eval task
            raise ValueError(f"the {game} SFT set shows eval tasks: {found[:3]}")
        folder = root / "sft" / game
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "train.jsonl").write_text(jsonl(rows), encoding="utf-8")
        (folder / "README.md").write_text(_sft_card(game, rows), encoding="utf-8")
        written += [folder / "train.jsonl", folder / "README.md"]
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kit.data", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--write", type=Path, metavar="DIR", help="write the splits and SFT sets under DIR"
    )
    group.add_argument("--check", type=Path, metavar="DIR", help="regenerate and compare with DIR")
    args = parser.parse_args(argv)
    if args.write:
        for path in write(args.write):
            print(path)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = write(Path(tmp))
        stale = [
            str(path.relative_to(tmp))
            for path in fresh
            if not (args.check / path.relative_to(tmp)).is_file()
            or (args.check / path.relative_to(tmp)).read_bytes() != path.read_bytes()
        ]
    if stale:
        print("differs from a fresh build:", *stale, sep="\n  ")
        return 1
    print("all files match a fresh build")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
