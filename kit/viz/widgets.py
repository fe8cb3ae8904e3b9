"""An ipywidgets inspector over a batch of trajectories: pick one, filter, read it three ways.

Why: a GRPO batch is dozens of episodes, and the question is always "show me the ones that
lost", "the truncated ones", "the catch ones with reward above zero". The inspector puts those
filters, the token view (what the loss saw), the chat view (what the conversation said) and the
env's state turn by turn on one cell. Episodes without token ids (an endpoint model's, played
without its tokenizer) open in the chat view, which needs none.

It uses only widgets and traits present in both ipywidgets 7.7 (Colab) and 8 (JupyterLab 4,
VS Code): ``Dropdown``, ``ToggleButtons``, ``IntSlider``, ``FloatRangeSlider``, ``HTML``,
``HBox``/``VBox``, ``Layout``, ``add_class`` and ``observe``; no ``tooltip`` /
``description_tooltip`` (renamed between the two), no ``Stack`` or ``TagsInput`` (8 only). Views
are ``HTML`` widgets rather than ``Output``: setting a value is all an update takes (no output
capture, no display hook), and a notebook saved with its widget state shows the last view.
"""

from __future__ import annotations

import html as _html
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kit.trajectory import Trajectory
from kit.viz.render import (
    OUTCOMES,
    chat_view,
    check_view_inputs,
    frame,
    has_value,
    legend,
    outcome,
    state_view,
    summary,
    token_view,
)

if TYPE_CHECKING:
    import ipywidgets

ALL = "all"
VIEWS = ("tokens", "chat")


class Inspector:
    """The inspector's widgets and its state; ``inspector()`` returns ``Inspector(...).widget``."""

    CACHE = 8  # rendered token views kept: ~240 bytes a token, 2.4 MB for 10k tokens

    def __init__(
        self, trajectories: Sequence[Trajectory], tokenizer: Any = None, cache: int = CACHE
    ) -> None:
        try:
            import ipywidgets as w
        except ImportError as error:
            raise ImportError(
                "kit.viz.inspector needs ipywidgets: pip install 'kit[notebook]'"
            ) from error

        self.trajectories = list(trajectories)
        if not self.trajectories:
            raise ValueError("inspector needs at least one trajectory")
        for trajectory in self.trajectories:
            if not isinstance(trajectory, Trajectory):
                raise ValueError(
                    f"expected kit.trajectory.Trajectory items, got {type(trajectory).__name__}"
                )
            if trajectory.input_ids and tokenizer is not None:
                check_view_inputs(trajectory, tokenizer)
        self.tokenizer = tokenizer
        if not isinstance(cache, int) or cache < 0:
            raise ValueError(f"cache must be an int >= 0 (rollouts kept), got {cache!r}")
        # Rendering is the slow part, so going back to a rollout reuses its view; a batch of long
        # rollouts would hold them all in the kernel, so only the `cache` last shown are kept.
        self._token_html: OrderedDict[int, str] = OrderedDict()
        self._cache = cache
        self._quiet = False

        envs = sorted({t.env or "?" for t in self.trajectories})
        rewards = [t.reward for t in self.trajectories if has_value(t.reward)]
        low, high = (min(rewards), max(rewards)) if rewards else (0.0, 0.0)
        wide = {"description_width": "initial"}
        narrow = w.Layout(width="200px")
        self.env = w.Dropdown(
            options=[ALL, *envs], value=ALL, description="env", style=wide, layout=narrow
        )
        self.outcome = w.Dropdown(
            options=[ALL, *OUTCOMES], value=ALL, description="outcome", style=wide, layout=narrow
        )
        self.reward = w.FloatRangeSlider(
            value=(low, high),
            min=low,
            max=high if high > low else low + 1.0,
            step=max((high - low) / 100, 1e-3),
            description="reward",
            readout_format=".3g",
            disabled=not rewards or high == low,
            continuous_update=False,
            style=wide,
            layout=w.Layout(width="320px"),
        )
        self.rollout = w.Dropdown(description="rollout", style=wide, layout=w.Layout(width="auto"))
        tokens = tokenizer is not None and any(t.input_ids for t in self.trajectories)
        self.view = w.ToggleButtons(
            options=list(VIEWS) if tokens else ["chat"],
            value="tokens" if tokens else "chat",
            style={"button_width": "70px"},
        )
        self.turn = w.IntSlider(value=0, min=0, max=0, description="env state", style=wide)
        self.summary = w.HTML()
        self.body = w.HTML()
        self.state = w.HTML()
        # Stable CSS classes: the browser test (and user CSS) find each part by name.
        for name in "env outcome reward rollout view turn summary body state".split():
            getattr(self, name).add_class(f"kit-inspector-{name}")

        self.widget = w.VBox(
            [
                w.HBox([self.env, self.outcome, self.reward]),
                w.HBox([self.rollout, self.view]),
                self.summary,
                self.body,
                self.turn,
                self.state,
            ]
        )
        self.widget.add_class("kit-inspector")
        for control in (self.env, self.outcome, self.reward):
            control.observe(self._refilter, names="value")
        self.rollout.observe(self._show, names="value")
        self.view.observe(self._show, names="value")
        self.turn.observe(self._show_state, names="value")
        self._refilter()

    def matching(self) -> list[int]:
        """Indices of the trajectories that pass the env, outcome and reward filters."""
        low, high = self.reward.value
        slack = self.reward.step / 2  # the front end snaps the ends to steps, with float error
        keep = []
        for i, trajectory in enumerate(self.trajectories):
            if self.env.value != ALL and (trajectory.env or "?") != self.env.value:
                continue
            if self.outcome.value != ALL and outcome(trajectory) != self.outcome.value:
                continue
            if not self.reward.disabled and (
                not has_value(trajectory.reward)
                or not low - slack <= trajectory.reward <= high + slack
            ):
                continue
            keep.append(i)
        return keep

    def _label(self, i: int) -> str:
        trajectory = self.trajectories[i]
        reward = f"{trajectory.reward:+.3g}" if has_value(trajectory.reward) else "–"
        return f"#{i} · {trajectory.env or '?'} · {outcome(trajectory)} · reward {reward}"

    def _refilter(self, _change: Any = None) -> None:
        keep = self.matching()
        current = self.rollout.value
        # Setting options fires value changes (differently in 7 and 8): render once, at the end.
        self._quiet = True
        try:
            self.rollout.options = [(self._label(i), i) for i in keep]
            self.rollout.value = current if current in keep else (keep[0] if keep else None)
        finally:
            self._quiet = False
        self._show()

    def _show(self, _change: Any = None) -> None:
        if self._quiet:
            return
        i = self.rollout.value
        if i is None:
            self.summary.value = "<b>no rollout matches the filters</b>"
            self.body.value = self.state.value = ""
            self.turn.max, self.turn.disabled = 0, True
            return
        trajectory = self.trajectories[i]
        self.summary.value = f"<b>#{i}</b> · {_html.escape(summary(trajectory))}"
        if self.view.value == "tokens" and not trajectory.input_ids:
            body = "<i>no token ids for this rollout: its chat view</i>" + chat_view(trajectory)
        elif self.view.value == "tokens":
            body = self._token_html.pop(i, None) or frame(
                legend() + token_view(trajectory, self.tokenizer)
            )
            self._token_html[i] = body  # the most recent last
            while len(self._token_html) > self._cache:
                self._token_html.popitem(last=False)
        else:
            body = chat_view(trajectory)
        # A scroll box of its own keeps the env state below in sight, whatever the episode length.
        self.body.value = f'<div style="max-height:560px;overflow:auto">{body}</div>'
        self.turn.disabled = not trajectory.states
        self.turn.max = max(len(trajectory.states) - 1, 0)  # clamps the value: both versions do
        self._show_state()

    def _show_state(self, _change: Any = None) -> None:
        i = self.rollout.value
        if i is None:
            return
        trajectory = self.trajectories[i]
        if not trajectory.states:
            self.state.value = "<i>no env states recorded for this rollout</i>"
            return
        self.state.value = state_view(trajectory, self.turn.value)


def inspector(
    trajectories: Sequence[Trajectory], tokenizer: Any = None, cache: int = Inspector.CACHE
) -> ipywidgets.VBox:
    """An ipywidgets inspector over ``trajectories``: filters, token/chat views, env states.

    ``tokenizer`` decodes the token view; without one (or for episodes without token ids, such
    as an endpoint model's) the inspector shows the chat view.

    ``cache``: how many rendered token views the kernel keeps, the most recently shown.
    """
    if isinstance(trajectories, Trajectory):
        trajectories = [trajectories]
    return Inspector(trajectories, tokenizer, cache).widget
