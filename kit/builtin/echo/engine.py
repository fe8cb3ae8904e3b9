"""Echo, as OpenEnv's ``echo_env`` plays it (the env of TRL's ``examples/scripts/openenv/echo.py``).

Rules (OpenEnv ``envs/echo_env/server/echo_environment.py``): ``reset()`` answers
``"Echo environment ready!"`` with reward 0.0; each message is echoed back unchanged and pays
``len(message) * 0.1`` (computed exactly so: ``3 * 0.1`` is ``0.30000000000000004``, not
``0.3``); the episode is never done. Every str of at least one character is a valid message; the
empty one is refused, as the reference's action model refuses it (``message: str =
Field(min_length=1)``: the server answers ``VALIDATION_ERROR`` and nothing changes): ``step("")``
raises ``ValueError`` (``EMPTY_MESSAGE``) and leaves the episode as it was, no step counted.

The reference is not installed here: openenv 0.10.0 ships no ``echo_env`` (upstream serves it
through MCP now, with the same text and rewards, and its pip template bounds the reward by 1.0,
which the echo env does not), so the tests hold this engine to the rule above.

Additions for evaluation loops: ``max_turns`` (default None: never done, as the reference) ends
the episode after that many messages. ``reward`` is the last message's reward (0.0 after
``reset``), ``messages`` lists the episode's latest messages (a window: at most
``HISTORY_MESSAGES`` of them and ``HISTORY_CHARS`` characters, the newest always kept, since an
episode that never ends must not grow a server's memory and its ``state`` reply without end), and
``won`` is always False: echo has nothing to win.
"""

from __future__ import annotations

from typing import Any

from kit.games import Step

READY = "Echo environment ready!"
EMPTY_MESSAGE = "message must not be empty: send at least one character."
HISTORY_MESSAGES = 256
"""The most messages ``Echo.messages`` keeps: the newest."""
HISTORY_CHARS = 65_536
"""The most characters ``Echo.messages`` keeps (beyond its newest message)."""


class Echo:
    """OpenEnv's echo env: returns each message, pays a tenth of a point per character."""

    OPTIONS: tuple[str, ...] = ("max_turns",)

    def __init__(self, max_turns: int | None = None) -> None:
        if max_turns is not None and (
            isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1
        ):
            raise ValueError(f"max_turns must be None or an int >= 1, got {max_turns!r}")
        self.max_turns = max_turns
        self.messages: list[str] = []
        self._history_chars = 0
        self.done = False
        self.won = False
        self.reward = 0.0
        self.num_steps = 0
        self.invalid_moves = 0

    def reset(self, **task: Any) -> str:
        """Start an episode; returns the reference's ready message.

        The reference's reset takes ``seed`` and ``episode_id`` and ignores them; so does this one
        (so a dataset row with a seed column works), but they must have the reference's types.
        """
        unknown = sorted(set(task) - {"seed", "episode_id"})
        if unknown:
            raise ValueError(f"unknown task keys {unknown}; Echo takes only seed and episode_id")
        seed, episode_id = task.get("seed"), task.get("episode_id")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an int or None, got {type(seed).__name__}")
        if episode_id is not None and not isinstance(episode_id, str):
            raise ValueError(f"episode_id must be a str or None, got {type(episode_id).__name__}")
        self.messages, self._history_chars = [], 0
        self.done = False
        self.reward = 0.0
        self.num_steps = 0
        return READY

    def step(self, action: str) -> Step:
        """Echo ``action``; reward ``len(action) * 0.1``. An empty ``action`` raises
        ``ValueError`` and changes nothing."""
        if not isinstance(action, str):
            raise ValueError(f"action must be a str, got {type(action).__name__}")
        if not action:
            raise ValueError(EMPTY_MESSAGE)
        if self.done:
            raise ValueError(f"the game is over after max_turns={self.max_turns}; call reset()")
        self.messages.append(action)
        self._history_chars += len(action)
        while len(self.messages) > 1 and (
            len(self.messages) > HISTORY_MESSAGES or self._history_chars > HISTORY_CHARS
        ):
            self._history_chars -= len(self.messages.pop(0))
        self.num_steps += 1
        self.reward = len(action) * 0.1
        self.done = self.max_turns is not None and self.num_steps >= self.max_turns
        info = {"valid": True, "reason": None, "message_length": len(action)}
        return Step(action, self.reward, self.done, info)
