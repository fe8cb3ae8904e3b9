"""Tasks: what each game asks, the fixed train/eval splits, and what "held out" means.

Why: a GRPO run is only comparable to another if its tasks and its held-out set are fixed, and
a win rate on the eval split says something about learning only if no training set ever showed
an eval task, in any form. So:

* ``task_dataset(game, split)``: rows with a chat ``prompt`` (ending in a separator: TRL glues
  the reset observation to it) and the task columns ``reset`` reads (``secret``, ``ball_col``,
  ``puzzle``). ``mixture_dataset`` adds the ``environment`` column of multi-env training.
  ``TaskProvider`` iterates the same tasks with their ground truth (like llenvs'
  ``DatasetProvider``) and has ``to_hf_dataset()``.
* Splits (``data/splits/README.md``): Wordle's 156 secrets are split once, with a fixed seed,
  into train and a held-out eval list that no SFT or GRPO training set here ever uses. Sudoku's
  eval puzzles are a fixed list; training puzzles come from other seeds and never equal one.
  Catch holds out whole boards: its eval tasks are played on board heights no training task
  has (OpenSpiel's default 10 rows among them), every starting column of each.
* ``HELD_OUT`` says in one line per game what is held out and how the training data differs;
  ``leaks(game, rows)`` lists whatever in a training set (task rows or SFT rows, ``kit.sft``)
  shows an eval task.

Nothing here knows a game by name: each game's prompt, tasks and splits, turn limit and leak
check come from its ``GameSpec`` (``kit.registry``; the built-in games' are in
``kit/builtin/``), so a registered game of your own gets all of the above.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kit import registry
from kit.episode import Message
from kit.paths import data_dir

SPLITS = ("train", "eval")
SPLIT_SEED = 0  # the seed of every split below: changing it changes the held-out set

SYSTEM_PROMPT = (
    "You are playing a game through tools. Make one tool call per turn and read its result "
    "before the next move. When the game is over, stop calling tools and answer in one short "
    "sentence."
)
# Each game's own values (its GameSpec, kit/builtin/<game>/), by name; games registered later
# are in them too.
USER_PROMPTS = registry.View("prompt")
# Tool-calling rounds an episode may take (TRL's max_tool_calling_iterations).
TURN_LIMITS = registry.View("turn_limit")
# What each game's eval split holds out, and how its training data differs: one line per game,
# for tables and cards (a win rate means little until one knows what it was measured on).
HELD_OUT = registry.View("held_out")


def listing(values: Iterable[Any]) -> str:
    """``1, 2 and 3``: values as a sentence lists them."""
    items = [str(value) for value in values]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def check_split(split: str) -> str:
    """``split`` if it is one of ``SPLITS``, else ``ValueError``."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    return split


def check_count(name: str, value: Any) -> int:
    """``value`` if it is an int >= 1 (not a bool), else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def check_seed(value: Any) -> int:
    """``value`` if it is an int (not a bool), else ``ValueError``: a seed of 1.5 or True would
    seed a different stream than its reader expects, and silently."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"seed must be an int, got {value!r}")
    return value


def prompt(game: str) -> list[Message]:
    """The chat prompt of ``game``'s tasks: a system message and a user message that ends in a
    blank line, to which TRL appends the reset observation."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": registry.game(game).prompt},
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

    A game without a check of its own gets ``eval_task_leaks``: no row's task is an eval task,
    and, where the game sets ``GameSpec.answers_leak``, no eval task's ground truth in any string
    of the row (a solver that probes with a held-out code shows the code).
    """
    spec = registry.game(game)
    check = spec.leaks or eval_task_leaks(game)
    return [f"row {i}: {leak}" for i, row in enumerate(rows) for leak in check(row)]


def eval_task_leaks(game: str) -> Callable[[Mapping[str, Any]], Iterator[str]]:
    """The default leak check of ``game``, a row at a time: the row's task is one of its eval
    tasks, or (with ``GameSpec.answers_leak``) a string of the row holds an eval task's truth as
    a whole word. The eval tasks and the pattern of their truths are built once, not per row."""
    spec = registry.game(game)
    eval_tasks = [spec.task(value) for value in spec.tasks("eval") or ()]
    columns = spec.env.task_keys + spec.env.setting_keys
    truths = sorted({truth for _, truth in eval_tasks if truth.strip()})
    answers = None
    if spec.answers_leak and truths:
        alternatives = "|".join(map(re.escape, truths))
        answers = re.compile(rf"(?<!\w)({alternatives})(?!\w)", re.IGNORECASE)

    def check(row: Mapping[str, Any]) -> Iterator[str]:
        task = task_of(row, columns)
        if any(task == reset for reset, _ in eval_tasks):
            yield f"task {task} is an eval task"
        if answers is not None:
            for key, value in row.items():
                for path, text in row_strings(value, str(key)):
                    for answer in sorted({m.lower() for m in answers.findall(text)}):
                        yield f"eval answer {answer!r} in {path}"

    return check


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
    """Every string in a row, keys included, with where it sits (``messages[2].content``); a
    number counts as its text (a tool call's ``{"number": 75}`` shows 75 as its content does)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, str(value)
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
    policy that cannot learn from one that cannot see); a list is any of its values
    (``{"rows": [5, 6, 7]}``: Catch's three shortest training boards). Games whose tasks are drawn afresh
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
        self.spec = spec = registry.game(game)  # ValueError for an unknown game
        self.game = game
        self.split = check_split(split)
        check_seed(seed)
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
        self.num_tasks = default if num_tasks is None else check_count("num_tasks", num_tasks)

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

        def matches(have: Any, want: Any) -> bool:  # a list of values: any of them
            return have == want or (isinstance(want, list) and have in want)

        chosen = [
            value
            for value in pool
            if all(matches(self._task(value).task[k], v) for k, v in self.where.items())
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
