"""Wordle, exactly as TextArena's ``Wordle-v0`` plays it (textarena 0.7.4, default wrappers).

Rules (``textarena/envs/Wordle/env.py``): a secret word is drawn from a list of nouns; each move
is a text in which the first ``[word]`` is the guess (a text with no bracket at all is wrapped in
brackets first, by ``ActionFormattingWrapper``). A guess is checked for format, length, repetition
and the dictionary, in that order; the first invalid move is a warning that costs no guess, a
second one in a row ends the game. An accepted guess gets Wordle feedback (greens first, then
yellows left to right against the secret letters not yet used). Rewards: 1 for a win; when the
guesses run out, or on a game-ending invalid move, ``(greens + 0.5 * yellows) / word_length`` of
the last accepted guess (0 if none).

Text: ``reset()`` and the ``step()`` texts concatenate to the cumulative string the default
``LLMObservationWrapper`` gives player 0: every message reads ``"\\n[GAME] " + message``, the echoed
action included, with any ``[Player]`` / ``[GAME]`` tag removed from the echo.

Variants are the registered ones: ``Wordle-v0`` (5 letters, 6 guesses), ``-long`` (7, 9) and their
``-hardcore`` versions, whose secrets come from all of NLTK ``words("en")`` instead of Ogden's
Basic English; see ``VARIANTS``. The word lists in ``data/wordle`` are derived from TextArena's own
code (``data/wordle/README.md``).

Task: ``reset(secret=...)`` takes any word of the variant's secret list or dictionary;
``reset(seed=n)`` draws ``random.Random(n).choice(secrets)``, the very draw ``WordleEnv.reset(seed=n)``
makes, so a seed names the same secret in both engines. ``reset()`` alone means ``seed=0``.
A hardcore list holds capitalised names (``Irwin``); as in TextArena, no guess can match them.
"""

from __future__ import annotations

import random
import re
from functools import cache, lru_cache
from typing import Any

from kit.games import Step
from kit.paths import data_dir

VARIANTS: dict[str, dict[str, Any]] = {
    "Wordle-v0": {"word_length": 5, "num_guesses": 6, "hardcore": False},
    "Wordle-v0-hardcore": {"word_length": 5, "num_guesses": 6, "hardcore": True},
    "Wordle-v0-long": {"word_length": 7, "num_guesses": 9, "hardcore": False},
    "Wordle-v0-long-hardcore": {"word_length": 7, "num_guesses": 9, "hardcore": True},
}
LENGTHS = (5, 7)  # the only lengths the variants use, hence the only ones shipped

_GUESS = re.compile(r"\[(\w+)\]")
_WIN = "Congratulations! You guessed the word correctly!"


@cache
def secrets(word_length: int = 5, hardcore: bool = False) -> tuple[str, ...]:
    """The secret list of a variant, in TextArena's order (the order its seeded draw uses)."""
    name = "secrets" + ("-hardcore" if hardcore else "") + ("" if word_length == 5 else "-7")
    return tuple((data_dir() / "wordle" / f"{name}.txt").read_text().split())


@cache
def dictionary(word_length: int = 5) -> frozenset[str]:
    """Every guess of this length TextArena's dictionary accepts."""
    return frozenset((data_dir() / "wordle" / f"dictionary-{word_length}.txt").read_text().split())


@cache
def _secret_set(word_length: int, hardcore: bool) -> frozenset[str]:
    return frozenset(secrets(word_length, hardcore))


@lru_cache(maxsize=1 << 16)
def _draw(seed: int, word_length: int, hardcore: bool) -> str:
    # Seeding a Mersenne Twister costs more than the rest of a reset; GRPO resets every seed
    # once per rollout of its group, so the draws are worth remembering.
    return random.Random(seed).choice(secrets(word_length, hardcore))


def feedback(secret: str, guess: str) -> str:
    """The marks ``guess`` earns against ``secret``, as TextArena computes them.

    ``feedback("crane", "eerie") == "X X Y X G"``: the secret comes first, as in the kit's
    contract (``kit.builtin.wordle.engine.feedback(secret, guess)``).
    """
    if len(guess) != len(secret):
        raise ValueError(f"guess {guess!r} and secret {secret!r} differ in length")
    return _marks(guess, secret)


def _marks(guess: str, secret: str) -> str:
    # Greens first; a yellow then uses up the leftmost secret letter not yet matched.
    unmatched = "".join([s for g, s in zip(guess, secret, strict=False) if g != s])
    marks = ""
    for g, s in zip(guess, secret, strict=False):
        if g == s:
            marks += " G"
        elif g in unmatched:
            unmatched = unmatched.replace(g, "", 1)
            marks += " Y"
        else:
            marks += " X"
    return marks[1:]


def prompt(word_length: int = 5, num_guesses: int = 6) -> str:
    """The player prompt ``WordleEnv`` shows at reset (without the ``[GAME]`` tag)."""
    return (
        f"You are Playing Wordle.\nA secret {word_length}-letter word has been chosen. "
        f"You have {num_guesses} attempts to guess it.\n"
        "For each guess, wrap your word in square brackets (e.g., '[apple]').\n"
        "Feedback for each letter will be given as follows:\n"
        "  - G (green): correct letter in the correct position\n"
        "  - Y (yellow): letter exists in the word but in the wrong position\n"
        "  - X (wrong): letter is not in the word\n"
        "Enter your guess to begin.\n"
    )


class Wordle:
    """One Wordle game; ``Wordle(**VARIANTS["Wordle-v0-long"])`` selects a variant.

    ``Step.info``: ``valid``, ``reason`` (TextArena's invalid-move reason) and, on the last step,
    ``outcome`` (the reason TextArena records for the end of the game).
    """

    OPTIONS: tuple[str, ...] = ("word_length", "num_guesses", "hardcore")

    def __init__(self, word_length: int = 5, num_guesses: int = 6, hardcore: bool = False) -> None:
        if type(word_length) is not int or word_length not in LENGTHS:
            raise ValueError(f"word_length must be one of {LENGTHS}, got {word_length!r}")
        if type(num_guesses) is not int or num_guesses < 1:
            raise ValueError(f"num_guesses must be a positive int, got {num_guesses!r}")
        if not isinstance(hardcore, bool):
            raise ValueError(f"hardcore must be a bool, got {hardcore!r}")
        self.word_length = word_length
        self.max_guesses = num_guesses
        self.hardcore = hardcore
        self._prompt = "\n[GAME] " + prompt(word_length, num_guesses)
        self._words: frozenset[str] = frozenset()  # the dictionary, loaded by the first reset
        self.secret = ""
        self._start("")

    def _start(self, secret: str) -> None:
        self.secret = secret
        self.guesses: list[str] = []
        self.feedbacks: list[str] = []
        self.done = False
        self.won = False
        self.reward = 0.0
        self.num_steps = 0
        self.invalid_moves = 0
        self._warned = False  # TextArena's error_count: one invalid move is forgiven, not two

    def reset(self, **task: Any) -> str:
        """Start a game on ``secret=word`` or ``seed=n`` (default ``seed=0``); return the prompt."""
        unknown = [key for key in task if key not in ("secret", "seed")]
        if unknown:
            raise ValueError(f"unknown Wordle task keys {sorted(unknown)}; use secret= or seed=")
        if len(task) > 1:
            raise ValueError("give either secret= or seed=, not both")
        if "secret" in task:
            secret = task["secret"]
            if not isinstance(secret, str) or not (
                secret in _secret_set(self.word_length, self.hardcore)
                or secret in dictionary(self.word_length)
            ):
                raise ValueError(
                    f"secret must be a {self.word_length}-letter word of this variant's secret "
                    f"list or dictionary, got {secret!r}"
                )
        else:
            seed = task.get("seed", 0)
            if type(seed) is not int or seed < 0:
                raise ValueError(f"seed must be a non-negative int, got {seed!r}")
            secret = _draw(seed, self.word_length, self.hardcore)
        self._words = dictionary(self.word_length)
        self._start(secret)
        return self._prompt

    def step(self, action: str) -> Step:
        """Play one move, e.g. ``"[crane]"``; return the text it adds, the reward and ``done``."""
        if not isinstance(action, str):
            raise ValueError(f"action must be a str, got {type(action).__name__}")
        if self.done or not self.secret:
            raise ValueError(
                "the game is over; call reset() to play again"
                if self.done
                else "call reset() first"
            )
        self.num_steps += 1
        if "[" not in action and "]" not in action:
            action = f"[{action}]"
        text = "\n[GAME] " + action.replace("[Player]", "").replace("[GAME]", "")
        word, reason = self._parse(action)
        if reason is not None:
            self.invalid_moves += 1
            if self._warned:
                return self._end(text, self._last_score(), f"Invalid Move: {reason}", reason)
            self._warned = True
            text += (
                f"\n[GAME] You attempted an invalid move. Reason: {reason} Please resubmit a valid"
                " move and remember to follow the game rules to avoid penalties."
            )
            return Step(text, 0.0, False, {"valid": False, "reason": reason})

        self._warned = False
        marks = _marks(word, self.secret)
        self.guesses.append(word)
        self.feedbacks.append(marks)
        if word == self.secret:
            self.won = True
            return self._end(text, 1.0, _WIN, None)
        left = self.max_guesses - len(self.guesses)
        text += (
            f"\n[GAME] You submitted [{word}].\nFeedback:\n{' '.join(word.upper())}\n{marks}"
            f"\nYou have {left} guesses left."
        )
        if left <= 0:
            # "best guess" is TextArena's wording; the figure is the last guess's, as it pays.
            score = self._last_score()
            outcome = (
                "The turn limit has been reached. You didn't guess the word, but your best guess "
                f"matched {round(score * 100)}% of the letters in the correct positions.\n"
                f"The secret word was: **{self.secret}**."
            )
            return self._end(text, score, outcome, None)
        return Step(text, 0.0, False, {"valid": True, "reason": None})

    def _parse(self, action: str) -> tuple[str, str | None]:
        match = _GUESS.search(action)
        if match is None:
            return "", (
                "You tried submitting a word in the wrong format. "
                "Please make sure to use squared brackets."
            )
        word = match.group(1).lower()
        if len(word) != self.word_length:
            return word, f"Your word must be exactly {self.word_length} letters."
        if word in self.guesses:
            return word, f"You have already guessed '{word}' before. Please try a different word."
        if word not in self._words:
            return word, f"'{word}' is not an English word."
        return word, None

    @property
    def best_partial(self) -> float:
        """The best ``(greens + 0.5 * yellows) / word_length`` of the accepted guesses (0.0 if none)."""
        return max((self._score(marks) for marks in self.feedbacks), default=0.0)

    def _last_score(self) -> float:
        # What TextArena pays when the game ends without a win: the *last* accepted guess's score.
        return self._score(self.feedbacks[-1]) if self.feedbacks else 0.0

    def _score(self, marks: str) -> float:
        return (marks.count("G") + marks.count("Y") * 0.5) / self.word_length

    def _end(self, text: str, reward: float, outcome: str, reason: str | None) -> Step:
        self.done = True
        self.reward = reward
        info = {"valid": reason is None, "reason": reason, "outcome": outcome}
        return Step(text, reward, True, info)
