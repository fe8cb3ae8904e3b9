"""Wordle (TextArena ``Wordle-v0``) in the kit: its tool env, prompt, splits, reward and texts.

Held out: a fifth of the 156 secrets, never a task, a guess or any word of a training set. The
SFT solver guesses only the train secrets (``words``), so not even a probe shows an eval secret.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import Any

from kit.builtin.wordle.engine import Wordle, dictionary, secrets
from kit.builtin.wordle.solver import WordleSolver
from kit.envs import GameEnv, as_text, shown
from kit.episode import Episode
from kit.registry import GameSpec, Message, Move, MoveContext, register
from kit.rewards import (
    called_tool,
    ended_on_invalid_move,
    failed_calls,
    guesses_left,
    partial_credit,
    repeated_calls,
    won,
)
from kit.sft import ending
from kit.solvers.policies import own_calls, texts
from kit.tasks import SPLIT_SEED, check_split, load_split, row_strings

WORDLE_EVAL_SIZE = 31  # a fifth of the 156 secrets
_FEEDBACK = re.compile(r"You submitted \[(\w+)\]\.\nFeedback:\n[^\n]*\n([GYX](?: [GYX])*)")
_LETTERS = re.compile(r"[a-z]+")


def wordle_secrets(split: str) -> tuple[str, ...]:
    """The Wordle secrets of a split (``data/splits/wordle.json``): train 125, eval 31."""
    return tuple(load_split("wordle")[check_split(split)])


def _splits() -> dict[str, Any]:
    """The secrets shuffled with ``random.Random(SPLIT_SEED)``, the first ``WORDLE_EVAL_SIZE``
    held out."""
    words = list(secrets())
    random.Random(SPLIT_SEED).shuffle(words)
    return {
        "seed": SPLIT_SEED,
        "train": sorted(words[WORDLE_EVAL_SIZE:]),
        "eval": sorted(words[:WORDLE_EVAL_SIZE]),
    }


def _split_card(split: dict[str, Any] | None) -> str:
    assert split is not None
    return f"""`wordle.json`: the 156 secrets of `data/wordle/secrets.txt` shuffled with
  `random.Random({split["seed"]})`; the first {len(split["eval"])} are held out (`eval`), the other {len(split["train"])}
  are `train`. SFT sets and `task_dataset("wordle", "train")` use only `train`, as tasks and
  as guesses: the SFT solver guesses from the train list alone, so no eval secret appears in
  any training file, in any form."""


def _reason(messages: list[Message], call: Move) -> str:
    word = call[1]["guess"]
    history = [m.groups() for text in texts(messages) for m in _FEEDBACK.finditer(text)]
    if not history:
        return f"No feedback yet, so I open with '{word}' to test common letters."
    length = len(history[0][0])
    greens = ["_"] * length
    present: set[str] = set()
    for guess, marks in history:
        for i, (letter, mark) in enumerate(zip(guess, marks.split(), strict=True)):
            if mark == "G":
                greens[i] = letter
            if mark in "GY":
                present.add(letter)
    absent = sorted({letter for guess, _ in history for letter in guess} - present)
    parts = [f"Known positions: {' '.join(greens)}."]
    elsewhere = sorted(present - {letter for letter in greens if letter != "_"})
    if elsewhere:
        parts.append(f"Also in the word: {', '.join(elsewhere)}.")
    if absent:
        parts.append(f"Not in the word: {', '.join(absent)}.")
    parts.append(f"Next guess: '{word}'.")
    return " ".join(parts)


@cache
def _sorted_dictionary(word_length: int) -> tuple[str, ...]:
    return tuple(sorted(dictionary(word_length)))  # sorted: set order changes between processes


def _random_move(context: MoveContext) -> Move:
    """A dictionary word not guessed yet (always accepted), or one of ``words`` if given."""
    length = Wordle(**context.options).word_length
    pool = _sorted_dictionary(length)
    if context.words is not None:
        allowed = dictionary(length)
        pool = tuple(w for w in context.words if w in allowed)
    calls = own_calls(context.messages)
    guessed = {args.get("guess") for name, args in calls if name == "guess"}
    if guessed.issuperset(pool):
        raise ValueError("no word left that the random player may guess")
    word = context.rng.choice(pool)
    while word in guessed:
        word = context.rng.choice(pool)
    return "guess", {"guess": word}


def _closing(env: WordleEnv) -> str:
    won_text = f"Solved: the secret word is '{env.game.guesses[-1]}'." if env.won else ""
    return ending(env, won_text, "Out of guesses: the game is over.")


def _leaks(row: Mapping[str, Any]) -> Iterator[str]:
    """No eval secret as a whole word, in any case, in any string of the row (messages, tool
    call arguments, the tools column, the task)."""
    held_out = set(wordle_secrets("eval"))
    for key, value in row.items():
        for path, text in row_strings(value, str(key)):
            for word in sorted(set(_LETTERS.findall(text.lower())) & held_out):
                yield f"eval secret {word!r} in {path}"


def _guesses(row: Mapping[str, Any]) -> list[str]:
    return [
        call["function"]["arguments"]["guess"]
        for m in row["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
        if call["function"]["name"] == "guess"
    ]


def _card_notes(rows: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    mean = sum(len(_guesses(row)) for row in rows) / len(rows)
    return (
        f" (the {WORDLE_EVAL_SIZE} held-out eval secrets never appear)",
        f"""
- Guesses: the solver, and its blunders, guess only the {len(wordle_secrets("train"))} train secrets
  (`kit.solvers.policies.noisy_policy(..., words=kit.builtin.wordle.wordle_secrets("train"))`), so no
  eval secret appears anywhere in the file, not even as a probe; `kit.tasks.leaks("wordle",
  rows)` finds none. The solver needed {mean:.2f} guesses per game.""",
    )


def _partial(episode: Episode) -> float:
    """The best ``(greens + 0.5 * yellows) / length`` of any accepted guess; forfeited when
    invalid moves ended the game."""
    return 0.0 if ended_on_invalid_move(episode) else float(episode.game.best_partial)


class WordleEnv(GameEnv):
    """Wordle (TextArena ``Wordle-v0``): guess the secret five-letter word in six tries.

    Task columns: ``secret`` (a word) or ``seed`` (picks a secret). Reward: 1 for a win, else
    partial credit of the last guess as TextArena pays it (see ``kit.builtin.wordle.engine``).
    """

    game_name = "wordle"
    task_keys = ("secret", "seed")

    def guess(self, guess: str) -> str:
        """Guess the secret word. The reply scores each letter: G = right letter, right place;
        Y = in the word, elsewhere; X = not in the word.

        Args:
            guess: A five-letter English word, for example "crane".
        """
        # The argument is named as in TRL's example (examples/scripts/openenv/wordle.py), so a
        # model trained with it calls this tool unchanged (tests/test_trl_envs.py).
        problem = as_text("guess", guess)
        # TextArena reads a guess as `[word]`; a model that already wrote the brackets is forgiven.
        word = None if problem else guess.strip().strip("[]")
        action = None if word is None else f"[{word}]"
        hint = None
        if word is not None and not (word.isascii() and word.isalpha()):
            # TextArena would say "use squared brackets", which the tool already adds.
            hint = (
                f"A guess is one word of letters only, like crane (the tool adds the square "
                f"brackets); got {shown(guess)}."
            )
        return self._play("guess", {"guess": guess}, action, problem, hint)


SPEC = register(
    GameSpec(
        name="wordle",
        env=WordleEnv,
        engine=Wordle,
        solver=WordleSolver,
        prompt=(
            "Let's play Wordle. Guess the secret word with the guess tool; each result scores "
            "your letters. The game says:\n\n"
        ),
        # The game's own bound plus room for invalid moves.
        turn_limit=12,
        # A move is `[word]`; 256 leaves room for a model's prose around it, and bounds the
        # transcript each textarena_env reply carries (at most 13 moves: 6 guesses, 7 warnings).
        max_action_chars=256,
        budget=1024,
        reward={
            "won": (won, 1.0),
            "sooner": (guesses_left, 0.2),
            "partial": (partial_credit, 0.5),
            "failed": (failed_calls, -0.1),
            "repeated": (repeated_calls, -0.1),
            "format": (called_tool, 0.1),
        },
        tasks=wordle_secrets,
        task=lambda secret: ({"secret": secret}, secret),
        to_tool_call=lambda action: ("guess", {"guess": action.strip().strip("[]")}),
        random_move=_random_move,
        closing=_closing,
        held_out=(
            f"{WORDLE_EVAL_SIZE} of the {len(secrets())} secrets, never a task, a guess or any "
            f"word of a training set (the SFT solver guesses only the "
            f"{len(secrets()) - WORDLE_EVAL_SIZE} train secrets)"
        ),
        reason=_reason,
        partial=_partial,
        leaks=_leaks,
        words=wordle_secrets,
        sft={"num_games": 300, "seed": 0, "noise": 0.0},
        card_notes=_card_notes,
        splits=_splits,
        split_card=_split_card,
        server="kit.builtin.wordle.serve:WordleEnvironment",
    )
)
