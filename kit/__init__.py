"""kit: train language models in tool-calling game environments with TRL, and see what they did.

Start with ``kit.builtin`` (each game in its folder: engine, solver, tool env, server),
``kit.envs`` (what ``GRPOTrainer(environment_factory=...)`` trains through) and ``kit.models``
(a tiny offline model, or any local/hub model on a GPU).
"""

__version__ = "0.1.0"
