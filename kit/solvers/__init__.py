"""Solvers: strong players that see only what a model would see.

They are the source of the SFT warm-up data and the "expert" policy of the reward diagnostics,
so each one plays from the observation text alone (Wordle's never peeks at the secret) and its
moves look like good play. A solver is a small object with one method::

    player = solver("wordle")
    action = player.act(observation)   # the newest observation: reset text, then each step's

``play(name, **task)`` runs a whole game and returns the actions it played.
"""

from __future__ import annotations

from typing import Any, Protocol

from kit import registry
from kit.games import make


class Solver(Protocol):
    def act(self, observation: str) -> str:
        """Return the next action, given the text the game added since the last call."""
        ...


def solver(name: str, **options: Any) -> Solver:
    """A fresh solver for game ``name``; ``options`` match the game's variant options."""
    return registry.game(name).solver(**options)


def play(name: str, max_steps: int = 200, **task: Any) -> list[str]:
    """Play one game of ``name`` with its solver on ``task``; return the actions played.

    Keyword options of the game's variant and of its task go together in ``task``: the game
    takes what it knows (see each game's ``OPTIONS``) and ``reset`` takes the rest.
    """
    variant = _split_variant(name, task)
    game = make(name, **variant)
    player = solver(name, **variant)
    observation = game.reset(**task)
    actions: list[str] = []
    while not game.done and len(actions) < max_steps:
        action = player.act(observation)
        actions.append(action)
        observation = game.step(action).observation
    return actions


def _split_variant(name: str, task: dict[str, Any]) -> dict[str, Any]:
    keys = getattr(registry.game(name).engine, "OPTIONS", ())
    return {k: task.pop(k) for k in list(task) if k in keys}
