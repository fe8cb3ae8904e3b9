"""Wordle served as OpenEnv's ``textarena_env`` serves TextArena's ``Wordle-v0``.

Task: ``reset(secret="crane")`` or ``reset(seed=n)``; a bare ``reset()`` draws a seed. Action:
``{"message": "[crane]"}``. The observation carries TextArena's ``prompt`` and cumulative
``messages`` (TRL's Wordle example reads them), and the official server's per-step
``reward_signals``, beside the kit's ``text`` and public state.
"""

from __future__ import annotations

import re
from typing import Any

from kit.games import Game
from kit.serve.base import KitObservation, TextArenaEnvironment

_GUESS = re.compile(r"\[[A-Za-z]{5}\]")


class WordleEnvironment(TextArenaEnvironment):
    game_name = "wordle"
    env_id = "Wordle-v0"
    public = ("guesses", "feedbacks", "max_guesses", "word_length")
    hidden = ("secret",)

    def start(
        self, game: Game, text: str, task: dict[str, Any], episode_id: str | None
    ) -> KitObservation:
        self._guess_counts: dict[str, int] = {}  # a new episode forgets the guesses it counted
        return super().start(game, text, task, episode_id)

    def reward_signals(self, action: str, transcript: str, reward: float) -> dict[str, float]:
        # As textarena_env's _WordleRewardProvider computes them: the latest feedback line's
        # greens and yellows over 5, 1 minus the times this guess was sent before, the reward.
        match = _GUESS.search(action)
        letters = re.sub(r"[^a-z]", "", action.lower())
        guess = match.group(0).lower() if match else f"[{letters[:5]}]" if len(letters) >= 5 else ""
        guess = "" if guess == "[dunno]" else guess  # the provider's own "no guess" marker
        seen = self._guess_counts.get(guess, 0) if guess else 0
        if guess:
            self._guess_counts[guess] = seen + 1
        greens = yellows = 0
        content = transcript.strip()
        if "Feedback:" in content:
            feedback = content.split("Feedback:", 1)[-1].strip()
            lines = [line.strip() for line in feedback.split("\n") if line.strip()]
            for line in reversed(lines if len(lines) >= 2 else []):
                normalized = line.replace(" ", "")
                if normalized and all(c in "GYX" for c in normalized):
                    greens, yellows = normalized.count("G"), normalized.count("Y")
                    break
        return {
            "wordle.greens": greens / 5.0,
            "wordle.yellows": yellows / 5.0,
            "wordle.repetitions": 1.0 - seen,
            "wordle.correct": float(reward),
        }
