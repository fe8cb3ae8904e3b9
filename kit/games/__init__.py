"""The four games as small, dependency-free engines.

Why our own engines: the references (TextArena's Wordle/Sudoku, OpenSpiel's Catch, OpenEnv's
echo env) are what TRL's and OpenEnv's examples train on, so a model trained here must play them
unchanged; but they are slow to reset, pull heavy dependencies and (Wordle) download data at
construction. Each engine here reproduces its reference's text and rewards byte for byte — the
differential tests in ``tests/`` hold them to that — and is a pure function of its task.

Every game has the same shape::

    game = make("wordle")            # keyword options select a variant
    text = game.reset(secret="sheep") # the task: seed=..., secret=..., puzzle=..., ball_col=...
    step = game.step("[crane]")       # Step(observation, reward, done, info)

``reset`` returns the whole first observation; each ``step().observation`` is only the text that
step adds, so ``reset() + "".join(step.observation ...)`` is the reference's cumulative view.
After every call the engine exposes ``done``, ``reward`` (what the reference paid for the last
step, 0.0 after ``reset``: Wordle, Catch and Sudoku pay only when the game ends, Echo pays every
message; final once ``done``), ``won`` and ``num_steps``. Progress short of the end is not a
reward: it has its own fields (Sudoku's ``progress``, also in ``Step.info["progress"]``), which
``kit.rewards`` shapes with.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple, Protocol


class Step(NamedTuple):
    """What one action did: the text it adds, the reward it pays, whether the game ended.

    A NamedTuple rather than a frozen dataclass: immutable all the same, and about twice as
    cheap to build, which is a third of a Catch step.
    """

    observation: str
    reward: float
    done: bool
    info: dict[str, Any]


class Game(Protocol):
    done: bool
    won: bool
    reward: float
    num_steps: int

    def reset(self, **task: Any) -> str: ...

    def step(self, action: str) -> Step: ...


@cache
def _registry() -> dict[str, Callable[..., Game]]:
    # Imported lazily: `import kit.games` stays cheap and one broken game cannot break the rest.
    # Cached: a tool env makes a fresh engine at every reset, and re-running these imports cost
    # 20x a Catch reset.
    from kit.games.catch import Catch
    from kit.games.echo import Echo
    from kit.games.sudoku import Sudoku
    from kit.games.wordle import Wordle

    return {"wordle": Wordle, "catch": Catch, "sudoku": Sudoku, "echo": Echo}


GAMES = ("wordle", "catch", "sudoku", "echo")


def make(name: str, **options: Any) -> Game:
    """Build a fresh game by name (``"wordle"``, ``"catch"``, ``"sudoku"``, ``"echo"``)."""
    registry = _registry()
    if name not in registry:
        raise ValueError(f"unknown game {name!r}; choose one of {sorted(registry)}")
    return registry[name](**options)
