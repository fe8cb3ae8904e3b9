"""Catch served as OpenEnv's ``openspiel_env`` serves OpenSpiel's ``catch``.

Task: ``reset(ball_col=k)`` or ``reset(seed=n)``; a bare ``reset()`` draws a seed. Action:
OpenSpiel's ``{"action_id": 0|1|2, "game_name": "catch", "game_params": {}}`` (LEFT, STAY,
RIGHT, as TRL's Catch example sends it) or the kit's ``{"message": "LEFT"}``. The observation
carries OpenSpiel's ``info_state`` (the board one-hot, row by row), ``legal_actions``,
``game_phase`` and ``current_player_id``, and a ``null`` reward at reset, as the official server
sends them, beside the kit's ``text`` and public state.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action
from pydantic import Field, model_validator

from kit.builtin.catch.engine import Catch, parse_action
from kit.games import Step
from kit.serve.base import KitEnvironment, KitObservation, KitState, OfficialReader

ACTIONS = ("LEFT", "STAY", "RIGHT")
"""OpenSpiel's action ids, in order: 0 moves the paddle left, 1 stays, 2 moves it right."""

TERMINAL_PLAYER = -4
"""OpenSpiel's ``current_player`` once the game is over (``pyspiel.PlayerId.TERMINAL``)."""


class CatchAction(Action):
    """OpenSpiel's action (``action_id``, ``game_name``, ``game_params``) or the kit's ``message``."""

    action_id: int | None = Field(default=None, description="0 LEFT, 1 STAY, 2 RIGHT")
    game_name: str = "catch"
    game_params: dict[str, Any] = Field(default_factory=dict)
    message: str | None = Field(default=None, description='"LEFT", "STAY" or "RIGHT"')

    @model_validator(mode="after")
    def _one_action(self) -> CatchAction:
        if (self.action_id is None) == (self.message is None):
            raise ValueError("send exactly one of action_id (0, 1, 2) and message")
        if self.game_name != "catch":
            raise ValueError(f"this server plays catch, not {self.game_name!r}")
        return self


class CatchObservation(KitObservation):
    """OpenEnv's ``openspiel_env`` observation plus the kit's ``text``."""

    info_state: list[float] = Field(default_factory=list)
    legal_actions: list[int] = Field(default_factory=list)
    game_phase: str = "initial"
    current_player_id: int = 0
    opponent_last_action: int | None = None


class CatchState(KitState):
    """The kit's state plus the fields of ``openspiel_env``'s."""

    game_name: str = "catch"
    agent_player: int = 0
    opponent_policy: str = "random"
    game_params: dict[str, Any] = Field(default_factory=dict)
    num_players: int = 1


class CatchEnvironment(KitEnvironment):
    game_name = "catch"
    action_cls = CatchAction
    observation_cls = CatchObservation
    state_cls = CatchState
    public = ("ball_row", "ball_col", "paddle_col", "rows", "columns")

    def move(self, action: Action) -> str:
        if action.message is not None:
            return action.message
        params = action.game_params
        board = {"rows": self.options.get("rows", 10), "columns": self.options.get("columns", 5)}
        if not set(params) <= set(board) or any(board[key] != params[key] for key in params):
            raise ValueError(f"this server plays catch with {board}, not game_params={params}")
        if action.action_id not in range(len(ACTIONS)):
            raise ValueError(
                f"action_id must be 0 (LEFT), 1 (STAY) or 2 (RIGHT), not {action.action_id}"
            )
        return ACTIONS[action.action_id]

    def official(
        self, text: str, reward: float, done: bool, info: dict[str, Any], action: str | None
    ) -> dict[str, Any]:
        game = self._game
        info_state = [0.0] * (game.rows * game.columns)
        info_state[game.ball_row * game.columns + game.ball_col] = 1.0
        info_state[(game.rows - 1) * game.columns + game.paddle_col] = 1.0
        return {
            "info_state": info_state,
            "legal_actions": [] if done else [0, 1, 2],
            "game_phase": "terminal" if done else "initial" if action is None else "playing",
            "current_player_id": TERMINAL_PLAYER if done else 0,
            "reward": None if action is None else reward,  # OpenSpiel has no reward at reset
        }


class CatchReader(OfficialReader):
    """``openspiel_env``: the board is drawn from ``info_state``; the action goes as its id.

    ``info_state`` cannot tell the ball from the paddle when both are on the bottom row, so the
    paddle is tracked from the actions sent (each moves it one column, clamped at the walls).
    """

    server = "openspiel_env"
    fields = ("info_state",)

    def payload(self, action: str) -> dict[str, Any]:
        move = parse_action(action)
        if move is None:  # the official server has no invalid move to count: refuse it here
            raise ValueError(f"Invalid action {action!r}: choose LEFT, STAY or RIGHT (or 0, 1, 2).")
        self._move = move
        return {"action_id": move, "game_name": "catch", "game_params": {}}

    def reset(self, observation: Any) -> str:
        cells = list(observation.info_state)
        self._board = Catch(rows=len(cells) // Catch().columns)
        board = self._board
        self._read(cells, paddle_col=cells[-board.columns :].index(1.0))
        return board.render()

    def step(self, action: str, observation: Any, reward: float | None, done: bool) -> Step:
        board = self._board
        self._read(
            list(observation.info_state),
            paddle_col=min(max(board.paddle_col + self._move - 1, 0), board.columns - 1),
        )
        self._count(reward, done, valid=True)
        return Step(board.render(), self.reward, done, {"valid": True, "reason": None})

    def _read(self, cells: list[float], paddle_col: int) -> None:
        board = self._board
        on = [index for index, value in enumerate(cells) if value == 1.0]
        ball = [index for index in on if index != (board.rows - 1) * board.columns + paddle_col]
        board.ball_row, board.ball_col = (
            divmod(ball[0], board.columns)
            if ball
            else (
                board.rows - 1,
                paddle_col,
            )
        )
        board.paddle_col = paddle_col


CatchEnvironment.reader = CatchReader
