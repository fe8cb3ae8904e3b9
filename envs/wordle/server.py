"""Wordle (TextArena ``Wordle-v0``) served over OpenEnv: ``uvicorn envs.wordle.server:app``.

Task: ``reset(secret="crane")`` or ``reset(seed=n)``. Action: ``{"message": "[crane]"}``.
"""

from envs.common import KitEnvironment, build_app


class WordleEnvironment(KitEnvironment):
    game_name = "wordle"
    public = ("guesses", "feedbacks", "max_guesses", "word_length")
    hidden = ("secret",)


app = build_app(WordleEnvironment)
