"""The kit's main job on a CPU, offline: every game played by its solver, then a GRPO step
through every environment with the tiny model.

    python -m kit.demo            # about a minute on a 2-core laptop
    python -m kit.demo --steps 3  # more GRPO steps per environment

It prints what a newcomer wants to know first: the solvers win, and TRL trains through the envs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from kit.envs import ENVS
from kit.games import make
from kit.solvers import play

PROMPT = [{"role": "user", "content": "Play the game with the tools.\n\n"}]
TASKS = {
    "wordle": [{"secret": "sheep"}, {"seed": 1}],
    "catch": [{"ball_col": 0}, {"seed": 1}],
    "sudoku": [{"seed": 0, "difficulty": "easy"}, {"seed": 1, "difficulty": "easy"}],
    "echo": [{}],
}


def solver_report(games: int = 50) -> list[dict]:
    """Play ``games`` seeded games of each game with its solver; return one summary row each."""
    rows = []
    for name in ("wordle", "catch", "sudoku"):
        wins, lengths = 0, []
        for seed in range(games):
            game = make(name)
            game.reset(seed=seed)
            for action in play(name, seed=seed):
                game.step(action)
            wins += game.won
            lengths.append(game.num_steps)
        rows.append(
            {
                "game": name,
                "games": games,
                "win_rate": wins / games,
                "mean_moves": statistics.mean(lengths),
            }
        )
    return rows


def grpo_smoke(name: str, steps: int = 1) -> dict:
    """Run ``steps`` real GRPO steps through ``ENVS[name]`` with the tiny model (real sampling)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOTrainer

    from kit.models import tiny_model
    from kit.train import grpo_config

    model, tokenizer = tiny_model()
    dataset = Dataset.from_list([{"prompt": PROMPT, **task} for task in TASKS[name]])

    def env_reward(environments, **kwargs):
        return [env.reward for env in environments]

    with tempfile.TemporaryDirectory() as out:
        trainer = GRPOTrainer(
            model=model,
            args=grpo_config(out, max_steps=steps, max_completion_length=48),
            reward_funcs=env_reward,
            train_dataset=dataset,
            processing_class=tokenizer,
            environment_factory=ENVS[name],
        )
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    return {
        "env": ENVS[name].__name__,
        "steps": len(logs),
        "loss": logs[-1]["loss"],
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--games", type=int, default=50, help="solver games per game (seeds 0..N-1)"
    )
    parser.add_argument("--steps", type=int, default=1, help="GRPO steps per environment")
    args = parser.parse_args()

    print(f"Solvers, seeds 0..{args.games - 1}:")
    for row in solver_report(args.games):
        print(
            f"  {row['game']:<7} win rate {row['win_rate']:.2f}   mean moves {row['mean_moves']:.2f}"
        )
    print(f"\nGRPO through each environment, tiny model, {args.steps} step(s), CPU:")
    for name in ENVS:
        row = grpo_smoke(name, args.steps)
        print(
            f"  {row['env']:<10} steps {row['steps']}  loss {row['loss']:+.4f}  {row['seconds']:.1f} s"
        )


if __name__ == "__main__":
    main()
