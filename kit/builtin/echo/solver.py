"""Echo solver: a short, friendly message per call, varied but reproducible from its seed.

Echo pays ``len(message) * 0.1`` and has no way to lose, so any message is good play; short
sentences keep SFT examples small while still differing from call to call.
"""

from __future__ import annotations

import random

_OPENERS = ("Hello", "Hi there", "Good morning", "Greetings", "Hey", "Testing")
_SUBJECTS = ("echo", "world", "friend", "environment", "server", "everyone")
_ENDINGS = ("!", ".", ", can you hear me?", ", one two three.", ", how are you?", "!!")


class EchoSolver:
    """Sends ``"<opener>, <subject><ending>"`` messages drawn from ``random.Random(seed)``."""

    def __init__(self, max_turns: int | None = None, seed: int = 0) -> None:
        # max_turns is Echo's variant option, taken so that `solver("echo", **variant)` works;
        # when the episode ends is the game's business, not the player's.
        del max_turns
        self._rng = random.Random(seed)

    def act(self, observation: str) -> str:
        """The next message; the observation (the echo of the last one) changes nothing."""
        del observation
        rng = self._rng
        return f"{rng.choice(_OPENERS)}, {rng.choice(_SUBJECTS)}{rng.choice(_ENDINGS)}"
