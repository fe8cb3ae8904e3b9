"""A strong Wordle player that sees only the game's text.

What it knows: the variant's secret list (for ``Wordle-v0`` the 156 five-letter nouns of Ogden's
Basic English), which is what a model trained on ``Wordle-v0`` can learn as well, and the guess
dictionary. What it reads: the prompt (word length, number of attempts) and every
``You submitted [word].`` feedback block; it never assumes its own last move was played, so a
wrapper may swap in blunders. It keeps the secrets consistent with all feedback so far (or, if
none is left because the secret came from outside the list, the consistent dictionary words) and
guesses the word that minimises the expected number of candidates left, a guess that can win
counting one less. Guesses come from the secret list itself, candidates or not: probing with
obscure dictionary words would gain little here and read as odd play in SFT data. The opening
guess of each variant is precomputed (``FIRST_GUESS``). Over all 156 ``Wordle-v0`` secrets it
needs 2.70 guesses on average and never more than 4 (``tests/test_wordle.py`` checks <= 3.6, 6).

``words=`` replaces the secret list by a pool of its own: the solver then believes the secret is
one of them and guesses nothing else, ever. Why: SFT data made from the train split's secrets
must not show a held-out secret even as a probe, so ``kit.sft`` hands it the split's secrets
(through ``kit.solvers.policies``). With the 125 train secrets as its pool it needs 2.62 guesses
on average over them, never more than 4 (2.73 with the whole list: a smaller pool leaves fewer
candidates). A secret outside the pool cannot be found: once no pool word fits the feedback, it
plays the pool words it has not tried, in alphabetical order, and loses.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import cache

from kit.builtin.wordle.engine import LENGTHS, dictionary, feedback, secrets

# What ``WordleSolver._choose`` picks on an empty board, keyed by (word_length, hardcore);
# tests/test_wordle.py recomputes them.
FIRST_GUESS = {(5, False): "store", (7, False): "curtain", (5, True): "tarie", (7, True): "ratline"}

_PROMPT = re.compile(r"A secret (\d+)-letter word has been chosen\. You have (\d+) attempts")
_FEEDBACK = re.compile(r"You submitted \[(\w+)\]\.\nFeedback:\n[^\n]*\n([GYX](?: [GYX])*)\n")
_SHORTLIST = 100  # guesses scored exactly per move, picked by letter counts
_SAMPLE = 400


class WordleSolver:
    """``act(observation) -> "[word]"``; options as ``kit.builtin.wordle.engine.Wordle``'s, and ``words``,
    the pool it guesses from (default: the variant's secret list)."""

    def __init__(
        self,
        word_length: int = 5,
        num_guesses: int = 6,
        hardcore: bool = False,
        words: Iterable[str] | None = None,
    ) -> None:
        if word_length not in LENGTHS:
            raise ValueError(f"word_length must be one of {LENGTHS}, got {word_length!r}")
        self.hardcore = hardcore
        # Sorted: the order breaks ties, so a set's order (it varies between processes) would
        # change the play.
        self.words = None if words is None else tuple(sorted(set(words)))
        self._new_game(word_length, num_guesses)

    def _pool(self, word_length: int) -> tuple[str, ...]:
        """The words this solver may guess and believes the secret is among."""
        if self.words is None:
            return secrets(word_length, self.hardcore)
        pool = tuple(
            w for w in self.words if len(w) == word_length and w in dictionary(word_length)
        )
        if not pool:
            raise ValueError(f"no word of the pool is a {word_length}-letter dictionary word")
        return pool

    def _new_game(self, word_length: int, attempts: int) -> None:
        self.word_length = word_length
        self.attempts = attempts
        self.history: list[tuple[str, str]] = []  # (guess, feedback) as the game reported them
        self.pool = self._pool(word_length)
        self.candidates: list[str] = list(self.pool)

    def act(self, observation: str) -> str:
        """Read the newest text (or the whole history) and return the next guess, e.g. ``[store]``."""
        prompt = _PROMPT.search(observation)
        if prompt:
            self._new_game(int(prompt.group(1)), int(prompt.group(2)))
        for match in _FEEDBACK.finditer(observation):
            word, marks = match.groups()
            if (word, marks) not in self.history and len(word) == self.word_length:
                self.history.append((word, marks))
                self.candidates = [c for c in self.candidates if feedback(c, word) == marks]
        if not self.candidates and self.words is None:
            # The secret is not in the list: fall back on the dictionary. A pool of one's own is
            # a promise never to guess outside it, so there is no such fallback then.
            self.candidates = sorted(
                w
                for w in dictionary(self.word_length)
                if all(feedback(w, g) == m for g, m in self.history)
            )
        return f"[{self._choose()}]"

    def _choose(self) -> str:
        if not self.history:
            if self.words is not None:
                return _opening(self.pool)
            if (self.word_length, self.hardcore) in FIRST_GUESS:
                return FIRST_GUESS[self.word_length, self.hardcore]
        return self._best()

    def _best(self) -> str:
        words = dictionary(self.word_length)
        guessed = {g for g, _ in self.history}
        # Capitalised secrets (hardcore) cannot be typed: a guess is lower-cased by the game.
        playable = [c for c in self.candidates if c in words and c not in guessed]
        if not playable:  # only untypable candidates left: probe with a good allowed word
            allowed = words if self.words is None else self.pool
            probes = self._shortlist(allowed, guessed)
            if not probes:
                raise ValueError("every word of the pool has been guessed")
            return probes[0]
        if len(playable) <= 2 or len(self.history) >= self.attempts - 1:
            return playable[0]
        step = max(1, len(self.candidates) // _SAMPLE)
        sample = self.candidates[::step]
        targets = set(playable)
        listed = [w for w in self.pool if w in words]
        shortlist = dict.fromkeys(
            self._shortlist(playable, guessed) + self._shortlist(listed, guessed)
        )

        def cost(guess: str) -> tuple[float, str]:
            sizes = Counter(feedback(secret, guess) for secret in sample)
            expected = sum(n * n for n in sizes.values()) / len(sample)
            if guess in targets:  # it may win now, leaving no candidate
                expected -= 1 / len(sample)
            return expected, guess

        return min(shortlist, key=cost)

    def _shortlist(self, words: Iterable[str], guessed: set[str]) -> list[str]:
        """The words whose letters best split the candidates, by letter and position counts."""
        total = len(self.candidates)
        anywhere = Counter(ch for c in self.candidates for ch in set(c))
        placed = Counter((i, ch) for c in self.candidates for i, ch in enumerate(c))

        def score(word: str) -> tuple[int, str]:
            split = sum(anywhere[ch] * (total - anywhere[ch]) for ch in set(word))
            split += sum(placed[i, ch] * (total - placed[i, ch]) for i, ch in enumerate(word))
            return -split, word

        return sorted((w for w in words if w not in guessed), key=score)[:_SHORTLIST]


@cache
def _opening(pool: tuple[str, ...]) -> str:
    """The first guess on an empty board for a pool of one's own: worked out once per pool, as
    ``FIRST_GUESS`` was for the secret lists (SFT generation opens hundreds of games with it)."""
    return WordleSolver(len(pool[0]), words=pool)._best()
