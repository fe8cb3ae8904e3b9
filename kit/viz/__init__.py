"""See what the loss trained on: token views, a batch inspector and batch plots of trajectories.

Why: in multi-turn tool training the loss covers only the tokens the model sampled, while the
template and the environment insert text between its turns. Every mask bug, every leaked tool
result and every episode cut by the budget is a question of which token came from where, and
that is what these views paint. All of them read ``kit.trajectory.Trajectory``, whether it came
from a rollout or was captured from a running ``GRPOTrainer``::

    kit.viz.show(trajectory, tokenizer)               # the token view in the notebook
    kit.viz.save_html(trajectories, tokenizer, path)  # a standalone page, one rollout at a time
    kit.viz.inspector(trajectories, tokenizer)        # pick, filter, token / chat / env state
    kit.viz.plot_tokens(trajectories)                 # model vs env tokens, per rollout and turn
    kit.viz.plot_lengths(trajectories, budget)        # episode lengths against the budget
    kit.viz.plot_rewards(trajectories)                # reward by outcome
    kit.viz.plot_evaluation([before, after])          # each metric per player, with intervals
    kit.viz.plot_log(trainer.state.log_history, keys) # a run's logged figures, step by step
    kit.viz.log_table(trainer.state.log_history, keys)  # the same trend as numbers

The modules import ipywidgets and matplotlib only when a function needs them, so the HTML view
works with the ``train`` extra alone.
"""

from kit.viz.log import log_table, plot_log
from kit.viz.page import save_html
from kit.viz.plots import plot_evaluation, plot_lengths, plot_rewards, plot_tokens
from kit.viz.render import (
    TrajectoryView,
    chat_view,
    html,
    outcome,
    show,
    summary,
    token_texts,
)
from kit.viz.widgets import Inspector, inspector

__all__ = [
    "Inspector",
    "TrajectoryView",
    "chat_view",
    "html",
    "inspector",
    "log_table",
    "outcome",
    "plot_evaluation",
    "plot_lengths",
    "plot_log",
    "plot_rewards",
    "plot_tokens",
    "save_html",
    "show",
    "summary",
    "token_texts",
]
