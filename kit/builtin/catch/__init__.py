"""Catch (OpenSpiel ``catch``) in the kit: its tool env, prompt, splits, reward and texts.

Tasks are (board height, ball column) on OpenSpiel's 5 columns. Held out: whole board heights
(OpenSpiel's default 10 rows among them), every starting column of each; training plays other
heights only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kit.builtin.catch.engine import Catch
from kit.builtin.catch.solver import CatchSolver, last_board
from kit.envs import GameEnv, as_text, shown
from kit.episode import Episode
from kit.registry import GameSpec, Message, Move, MoveContext, register
from kit.rewards import called_tool, failed_calls, partial_credit, won
from kit.sft import ending
from kit.solvers.policies import latest
from kit.tasks import listing, load_split, task_of

# Eval heights are never trained on; 12 rows (11 moves) is the tallest board whose game fits
# the 1,024-token budget.
CATCH_COLUMNS = 5
CATCH_TRAIN_ROWS = (5, 6, 7, 9, 11, 12)
CATCH_EVAL_ROWS = (8, 10)
_ROW = re.compile(r"[.ox]+")


def _splits() -> dict[str, Any]:
    tasks = {
        split: [{"rows": rows, "ball_col": col} for rows in heights for col in range(CATCH_COLUMNS)]
        for split, heights in (("train", CATCH_TRAIN_ROWS), ("eval", CATCH_EVAL_ROWS))
    }
    return {"columns": CATCH_COLUMNS, **tasks}


def _split_card(split: dict[str, Any] | None) -> str:
    return f"""`catch.json`: (board height, ball column) tasks on OpenSpiel's {CATCH_COLUMNS} columns. `train`
  heights {list(CATCH_TRAIN_ROWS)}, `eval` heights {list(CATCH_EVAL_ROWS)} (OpenSpiel's default board is 10 x 5): no
  training set plays a board of an eval height, so every eval episode is on a board the model
  never saw."""


def _to_tool_call(action: str) -> Move:
    direction = action.strip().strip("[]").upper()
    return ("stay", {}) if direction == "STAY" else ("move", {"direction": direction})


def _reason(messages: list[Message], call: Move) -> str:
    ball, paddle = latest(messages, last_board)
    where = (
        "is under the ball: stay"
        if ball == paddle
        else ("must go left" if ball < paddle else "must go right")
    )
    return (
        f"The ball is in column {ball + 1} and the paddle in column {paddle + 1}, "
        f"so the paddle {where}."
    )


def _turn(directions: dict[str, str]) -> Callable[[Move], Move]:
    """A demonstrator that reads the board right and turns as ``directions`` says instead
    (staying stays)."""

    def habit(call: Move) -> Move:
        name, arguments = call
        if name != "move":
            return call
        return name, {"direction": directions[arguments["direction"]]}

    return habit


# "both": the other direction, whichever side the ball is on. "left": RIGHT where the solver
# moves LEFT, the solver's move elsewhere: the habit shows only on one side of the board, so
# an imitator still learns to read the board from the other, and the reward has one systematic
# error to correct (docs/results.md, "A habit on one side").
_HABITS = {
    "both": _turn({"LEFT": "RIGHT", "RIGHT": "LEFT"}),
    "left": _turn({"LEFT": "RIGHT", "RIGHT": "RIGHT"}),
}


def _random_move(context: MoveContext) -> Move:
    """LEFT, STAY or RIGHT."""
    return context.rng.choice(
        [("move", {"direction": "LEFT"}), ("stay", {}), ("move", {"direction": "RIGHT"})]
    )


def _board_heights(text: str) -> list[int]:
    """The number of lines of each Catch board drawn in ``text``."""
    heights, run = [], 0
    for line in text.splitlines() + [""]:
        if _ROW.fullmatch(line):
            run += 1
        elif run:
            heights, run = heights + [run], 0
    return heights


def _leaks(row: Mapping[str, Any]) -> Iterator[str]:
    """No task on an eval board height (a task without ``rows`` plays the default board, itself
    an eval height), and no board drawn in a user or tool message of that height."""
    heights = {task["rows"] for task in load_split("catch")["eval"]}
    task = task_of(row)
    rows = task.get("rows", Catch().rows)
    if rows in heights:
        default = "" if "rows" in task else " (no rows: the default board)"
        yield f"task {task} is on an eval board height, {rows} rows{default}"
    messages = row.get("messages") or []
    if messages and not any(_board_heights(m["content"]) for m in messages if m["role"] == "user"):
        yield "no board in the user message to check"
    for i, message in enumerate(messages):
        if message["role"] in ("user", "tool"):
            for height in sorted(set(_board_heights(str(message["content"]))) & heights):
                yield f"messages[{i}] draws a board of an eval height, {height} rows"


def _partial(episode: Episode) -> float:
    """Once the ball has landed, ``1 - |paddle - ball| / (columns - 1)``; 0.0 before."""
    game = episode.game
    if not game.done:
        return 0.0
    return 1.0 - abs(game.paddle_col - game.ball_col) / max(game.columns - 1, 1)


class CatchEnv(GameEnv):
    """Catch (OpenSpiel ``catch``): a ball falls one row per move; end under it with the paddle.

    Task columns: ``ball_col`` or ``seed``, and optionally the board's ``rows`` and ``columns``
    (default 10 x 5). Reward: +1 caught, -1 missed, at the last move (the ninth on 10 rows).
    """

    game_name = "catch"
    task_keys = ("ball_col", "seed")
    setting_keys = ("rows", "columns")

    def move(self, direction: str) -> str:
        """Move the paddle one column; the ball falls one row.

        Args:
            direction: Which way to move the paddle. (choices: ["LEFT", "RIGHT"])
        """
        problem = as_text("direction", direction)
        if problem is None and direction.strip().upper() not in ("LEFT", "RIGHT"):
            problem = (
                f"direction must be LEFT or RIGHT, not {shown(direction)}; call stay() to keep "
                "the paddle where it is."
            )
        action = None if problem else direction.strip().upper()
        return self._play("move", {"direction": direction}, action, problem)

    def stay(self) -> str:
        """Keep the paddle where it is; the ball falls one row."""
        return self._play("stay", {}, "STAY", None)


SPEC = register(
    GameSpec(
        name="catch",
        env=CatchEnv,
        engine=Catch,
        solver=CatchSolver,
        prompt=(
            "Let's play Catch. The ball (o) falls one row per move; move the paddle (x, bottom "
            "row) with move (LEFT or RIGHT) or stay so that it ends under the ball. The board:"
            "\n\n"
        ),
        # The game's own bound plus room for invalid moves.
        turn_limit=20,
        # LEFT, STAY or RIGHT, with room for a model's spacing and words around it.
        max_action_chars=64,
        budget=1024,
        reward={
            "won": (won, 1.0),
            "partial": (partial_credit, 0.5),
            "failed": (failed_calls, -0.1),
            "format": (called_tool, 0.1),
        },
        tasks=lambda split: [dict(task) for task in load_split("catch")[split]],
        task=lambda task: (dict(task), str(task["ball_col"])),
        to_tool_call=_to_tool_call,
        random_move=_random_move,
        habits=_HABITS,
        closing=lambda env: ending(env, "Caught the ball.", "Missed the ball."),
        held_out=(
            f"board heights {listing(CATCH_EVAL_ROWS)} (OpenSpiel's default of {Catch().rows} "
            f"among them), every column of {CATCH_COLUMNS}; training plays heights "
            f"{listing(CATCH_TRAIN_ROWS)} only"
        ),
        reason=_reason,
        partial=_partial,
        leaks=_leaks,
        # No reasoning text: without it a turn is less than half as long, and a GRPO step costs
        # about half as much. The tiny model learns the side of the board from the moves alone
        # (SFT at 5e-4, kit.train.SFT). With reasoning text, at the earlier SFT learning rate of
        # 2e-3, its stated columns were guesses (a scratch run of 400 steps won no more held-out
        # games than random play); not measured again at 5e-4.
        sft={"num_games": 200, "seed": 0, "noise": 0.0, "reasoning": False},
        splits=_splits,
        split_card=_split_card,
        server="kit.builtin.catch.serve:CatchEnvironment",
        breakdown="ball_col",
    )
)
