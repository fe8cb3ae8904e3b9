"""A fifth game in one file, which the kit does not import: guess a number from 1 to 100.

Importing this module registers the game as ``"guess_number"``; from then on every part of the
kit plays it by name, with no edit to ``kit/``::

    import examples.guess_number  # noqa: F401  (registers the game)
    from kit.sft import sft_dataset
    from kit.tasks import task_dataset

    rows = task_dataset("guess_number", "train")   # GRPO rows: prompt + target
    sft = sft_dataset("guess_number", num_games=20) # the solver's games, as TRL renders them

The file holds what every game has: an engine (the rules, as text in and text out), a tool env
(what ``GRPOTrainer(environment_factory=...)`` calls), a solver (SFT data and the "expert" of
the reward diagnostics), its tasks with a held-out eval split, and the ``GameSpec`` that ties
them to a prompt, limits and a reward made of ``kit.rewards`` signals. The OpenEnv server class
at the end needs the ``serve`` extra; without it the game still trains and evaluates.
"""

from __future__ import annotations

import random
import re

from kit.envs import GameEnv, as_int
from kit.games import Step
from kit.registry import GameSpec, Message, Move, MoveContext, register
from kit.rewards import called_tool, failed_calls, guesses_left, won
from kit.sft import ending
from kit.solvers.policies import texts

LOW, HIGH, MAX_GUESSES = 1, 100, 7  # 7 guesses: enough for halving 1..100, none to spare
# Held out: every target ending in 5. Training tasks are the other 90 targets.
EVAL_TARGETS = tuple(range(5, HIGH + 1, 10))
TRAIN_TARGETS = tuple(n for n in range(LOW, HIGH + 1) if n not in EVAL_TARGETS)
_ANSWER = re.compile(r"(\d+) is too (low|high)")


class GuessNumber:
    """The engine: a hidden whole number; each guess is answered "too low", "too high" or
    right. A win pays 1. A guess outside the range is an invalid move: it costs no guess."""

    OPTIONS = ("low", "high", "max_guesses")  # the variant options kit.solvers.play passes on

    def __init__(self, low: int = LOW, high: int = HIGH, max_guesses: int = MAX_GUESSES) -> None:
        self.low, self.high, self.max_guesses = low, high, max_guesses
        self.reset(target=low)

    def reset(self, target: int | None = None, seed: int | None = None) -> str:
        if target is None:
            if seed is None:
                raise ValueError("reset needs a target or a seed")
            target = random.Random(seed).randint(self.low, self.high)
        if isinstance(target, bool) or not isinstance(target, int):
            raise ValueError(f"target must be a whole number, not {target!r}")
        if not self.low <= target <= self.high:
            raise ValueError(f"target must be from {self.low} to {self.high}, not {target}")
        self.target, self.guesses = target, []
        self.done = self.won = False
        self.reward, self.num_steps, self.invalid_moves = 0.0, 0, 0
        return (
            f"I am thinking of a whole number from {self.low} to {self.high}. "
            f"You have {self.max_guesses} guesses.\n"
        )

    def step(self, action: str) -> Step:
        if self.done:
            raise ValueError("the game is over")
        self.num_steps += 1
        text = action.strip()
        if not (text.isdecimal() and self.low <= int(text) <= self.high):
            self.invalid_moves += 1
            reason = f"A guess is a whole number from {self.low} to {self.high}."
            return Step(
                f"{text[:20]!r} is no guess.\n", 0.0, False, {"valid": False, "reason": reason}
            )
        number = int(text)
        self.guesses.append(number)
        if number == self.target:
            self.done = self.won = True
            self.reward = 1.0
            return Step(f"{number} is right!\n", 1.0, True, {"valid": True})
        way = "low" if number < self.target else "high"
        observation = f"{number} is too {way}.\n"
        if len(self.guesses) == self.max_guesses:
            self.done = True
            observation += f"Out of guesses: the number was {self.target}.\n"
        return Step(observation, 0.0, self.done, {"valid": True})


class GuessEnv(GameEnv):
    """Guess the number: find a whole number from 1 to 100 in 7 guesses.

    Task columns: ``target`` or ``seed``. Reward: 1 for a win, else 0.
    """

    game_name = "guess_number"
    task_keys = ("target", "seed")

    def guess(self, number: int) -> str:
        """Guess the number. The reply says whether it is too low, too high or right.

        Args:
            number: A whole number from 1 to 100.
        """
        # JSON gives ints, floats, strings, lists...: the kit's check passes on whole numbers
        # only (50, 50.0, "50"), and its error says what came instead.
        value, problem = as_int("number", number)
        return self._play("guess", {"number": number}, None if problem else str(value), problem)


def _bounds(text: str, low: int, high: int) -> tuple[int, int]:
    """The range the answers in ``text`` leave, starting from ``low``..``high``."""
    for number, way in _ANSWER.findall(text):
        if way == "low":
            low = max(low, int(number) + 1)
        else:
            high = min(high, int(number) - 1)
    return low, high


class GuessSolver:
    """Guesses the middle of the range the answers leave: never more than 7 guesses."""

    def __init__(self, low: int = LOW, high: int = HIGH, max_guesses: int = MAX_GUESSES) -> None:
        self.low, self.high = low, high

    def act(self, observation: str) -> str:
        self.low, self.high = _bounds(observation, self.low, self.high)
        return str((self.low + self.high) // 2)


def _reason(messages: list[Message], call: Move) -> str:
    low, high = _bounds("".join(texts(messages)), LOW, HIGH)
    return f"The number is from {low} to {high}, so I guess the middle, {call[1]['number']}."


def _random_move(context: MoveContext) -> Move:
    return "guess", {"number": context.rng.randint(LOW, HIGH)}


try:  # serving needs the serve extra (OpenEnv); the rest of the game does not
    from kit.serve.base import KitEnvironment
except ImportError:
    SERVER = None
else:

    class GuessEnvironment(KitEnvironment):
        """The game over OpenEnv: ``python -m kit.serve examples.guess_number:GuessEnvironment``."""

        game_name = "guess_number"
        public = ("guesses", "low", "high", "max_guesses")
        hidden = ("target",)

    SERVER = f"{__name__}:GuessEnvironment"


SPEC = register(
    GameSpec(
        name="guess_number",
        env=GuessEnv,
        engine=GuessNumber,
        solver=GuessSolver,
        prompt=(
            "Let's play a guessing game. Find the number with the guess tool; each result says "
            "whether your guess is too low or too high. The game says:\n\n"
        ),
        turn_limit=10,  # 7 guesses and room for invalid ones
        budget=512,
        reward={
            "won": (won, 1.0),
            "sooner": (guesses_left, 0.2),  # a kit signal: it reads max_guesses and guesses
            "failed": (failed_calls, -0.1),
            "format": (called_tool, 0.1),
        },
        tasks=lambda split: EVAL_TARGETS if split == "eval" else TRAIN_TARGETS,
        task=lambda target: ({"target": target}, str(target)),
        to_tool_call=lambda action: ("guess", {"number": int(action)}),
        random_move=_random_move,
        closing=lambda env: ending(env, "Found it.", "Out of guesses: the game is over."),
        held_out="the 10 targets ending in 5, never a training task; training plays the other 90",
        reason=_reason,
        server=SERVER,
    )
)
