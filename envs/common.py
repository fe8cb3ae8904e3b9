"""One OpenEnv environment for every kit game, so that each ``envs/<game>/server.py`` only names one.

Why a server at all: OpenEnv is how the ecosystem deploys environments (a local ``uvicorn``, a
Docker image, a Hugging Face Space reached by URL), and a served game can be shared by many
trainers. The engine underneath is the same ``kit.games`` engine the in-process envs use, so a
game played through a server returns the same text, rewards and ``done`` byte for byte
(``tests/test_openenv.py`` checks it); the wire models live in ``kit.remote``, beside the client.

Each WebSocket session gets its own ``KitEnvironment`` (OpenEnv builds one per connection); the
engines share nothing mutable, hence ``SUPPORTS_CONCURRENT_SESSIONS``.
"""

from __future__ import annotations

import copy
import os
import uuid
from typing import Any, ClassVar

from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

import kit
from kit.envs import ENVS
from kit.games import Game, make
from kit.remote import KitAction, KitObservation, KitState

DEFAULT_MAX_CONCURRENT_ENVS = 64
"""Sessions one server process holds at once (one thread each); ``MAX_CONCURRENT_ENVS`` overrides."""


class KitEnvironment(Environment[KitAction, KitObservation, KitState]):
    """A kit game as an OpenEnv environment; subclasses name the game and its state fields.

    ``reset(seed=None, episode_id=None, **task)`` is a pure function of its task (``seed``,
    ``secret``, ``puzzle``, ``ball_col``, ``difficulty``), as in ``kit.envs``: a game that needs a
    task refuses to start without one rather than draw its own. ``step(KitAction(message=...))``
    plays the game's text action. A move the game rejects is an observation with
    ``metadata["valid"] == False`` (it counts under the game's rules); a request the engine cannot
    take at all (a bad task, a move after the end, a step before any reset) raises ``ValueError``,
    which the server sends back as an ``EXECUTION_ERROR`` frame and the session stays usable.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    game_name: ClassVar[str]
    options: ClassVar[dict[str, Any]] = {}  # the variant, e.g. {"word_length": 7}
    public: ClassVar[tuple[str, ...]] = ()  # engine fields every observation carries
    hidden: ClassVar[tuple[str, ...]] = ()  # engine fields only the state carries (secrets)

    def __init__(self) -> None:
        super().__init__()
        self._game: Game | None = None
        self._task: dict[str, Any] = {}
        self._episode_id: str | None = None
        self._step_count = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **task: Any
    ) -> KitObservation:
        task = {key: value for key, value in {"seed": seed, **task}.items() if value is not None}
        spec = ENVS[self.game_name]
        if spec.task_required and not any(key in task for key in spec.task_keys):
            raise ValueError(
                f"{self.game_name} needs a task: reset with one of {list(spec.task_keys)} "
                "(reset is a pure function of its task, so every rollout of a group sees one board)"
            )
        game = make(self.game_name, **self.options)
        text = game.reset(**task)  # raises on a bad task before anything of the old episode changes
        self._game, self._task, self._step_count = game, task, 0
        self._episode_id = episode_id or uuid.uuid4().hex
        return self._observe(text, game.reward, game.done, {})

    def step(
        self, action: KitAction, timeout_s: float | None = None, **kwargs: Any
    ) -> KitObservation:
        if self._game is None:
            raise ValueError(
                "no episode in this session: send a reset first (a new WebSocket connection is a "
                "new session, with no episode)"
            )
        step = self._game.step(action.message)
        self._step_count += 1
        return self._observe(step.observation, step.reward, step.done, step.info)

    @property
    def state(self) -> KitState:
        game = self._game
        if game is None:
            return KitState(game=self.game_name)
        return KitState(
            episode_id=self._episode_id,
            step_count=self._step_count,
            game=self.game_name,
            task=dict(self._task),
            **self._summary(game),
            data={name: copy.deepcopy(getattr(game, name)) for name in self.public + self.hidden},
        )

    def get_metadata(self) -> EnvironmentMetadata:
        doc = (ENVS[self.game_name].__doc__ or "").strip()
        return EnvironmentMetadata(
            name=f"kit-{self.game_name}",
            description=" ".join(doc.split("\n\n")[0].split()),
            version=kit.__version__,
        )

    def _observe(
        self, text: str, reward: float, done: bool, info: dict[str, Any]
    ) -> KitObservation:
        game = self._game
        snapshot = self._summary(game)
        # Copies: an in-process caller keeps the observation while the engine plays on.
        snapshot.update({name: copy.deepcopy(getattr(game, name)) for name in self.public})
        # Written last: an engine's info key can never pass for the bookkeeping the client checks.
        metadata = info | {"episode_id": self._episode_id, "step_count": self._step_count}
        metadata["game"] = snapshot
        return KitObservation(text=text, reward=reward, done=done, metadata=metadata)

    @staticmethod
    def _summary(game: Game) -> dict[str, Any]:
        return {
            "done": game.done,
            "won": game.won,
            "reward": game.reward,
            "num_steps": game.num_steps,
            "invalid_moves": game.invalid_moves,
        }


def build_app(environment: type[KitEnvironment], max_concurrent_envs: int | None = None) -> FastAPI:
    """The OpenEnv FastAPI app serving ``environment``: WebSocket ``/ws``, ``/health``, ``/schema``...

    ``max_concurrent_envs`` (default: the ``MAX_CONCURRENT_ENVS`` variable, else 64) bounds the
    sessions; a TRL run opens one per pooled env instance (batch size x steps per generation).
    """
    if max_concurrent_envs is None:
        max_concurrent_envs = int(
            os.environ.get("MAX_CONCURRENT_ENVS", DEFAULT_MAX_CONCURRENT_ENVS)
        )
    return create_app(
        environment,
        KitAction,
        KitObservation,
        env_name=environment.game_name,
        max_concurrent_envs=max_concurrent_envs,
        state_cls=KitState,
    )
