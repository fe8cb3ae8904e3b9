"""The contract every game engine meets, and ``make``; the four built-in engines live in their
games' folders (``kit/builtin/<game>/engine.py``), as small, dependency-free engines.

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

from typing import Any, NamedTuple, Protocol

from kit import registry


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


# The built-in games; kit.registry.names() lists the registered ones too.
GAMES = tuple(registry.BUILTIN)


def check_action(name: str, action: str) -> None:
    """Refuse, with ``ValueError``, a move longer than game ``name`` takes
    (``GameSpec.max_action_chars``).

    Why a limit the references do not have: a server reply carries the move's text, and
    TextArena's transcript carries every move, so an unbounded move makes unbounded replies (a
    Sudoku move padded to 1 MB gave a 121 MB reply by step 40). The tool envs and the servers
    both call this before the engine sees the move, with this one message, so a move is refused
    the same way in-process and remotely, and a refused move changes nothing.
    """
    limit = registry.game(name).max_action_chars
    if len(action) > limit:
        raise ValueError(
            f"the move is {len(action):,} characters long; {name} takes moves of at most "
            f"{limit:,} characters, so it was not played"
        )


def make(name: str, **options: Any) -> Game:
    """Build a fresh game by name (``"wordle"``, ``"catch"``, ``"sudoku"``, ``"echo"``, or any
    game registered with ``kit.registry.register``)."""
    return registry.game(name).engine(**options)
