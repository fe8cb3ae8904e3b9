"""Record what a running ``GRPOTrainer`` trains on, batch by batch, as trajectories.

Why a module of its own: ``kit.masks`` rebuilds the ids and mask of a finished conversation
outside the trainer; this one reads them from inside a real run: the ids and masks the trainer
built, its rewards and advantages, the envs' states after every turn. :class:`Capture` wraps
three methods of one trainer instance; TRL itself is not modified. ``tests/test_masks.py``
checks the two against each other, token for token.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kit.envs import env_name
from kit.rewards import flat_groups
from kit.trajectory import Trajectory, is_truncated, tool_calls

Message = dict[str, Any]


# The TRL releases whose private GRPOTrainer methods (``Capture._HOOKED``) and what they return
# Capture was checked against: pyproject.toml pins the same range.
TRL_RANGE = ">=1.16.0,<1.17"


def check_trl(version: str | None = None) -> None:
    """Refuse a TRL release outside :data:`TRL_RANGE` (default: the installed one), naming the
    range: a private method that changed would otherwise record wrong tokens without an error."""
    from packaging.specifiers import SpecifierSet

    if version is None:
        import trl

        version = trl.__version__
    if version not in SpecifierSet(TRL_RANGE, prereleases=True):
        raise RuntimeError(
            f"kit.capture.Capture supports trl{TRL_RANGE} (it wraps private GRPOTrainer "
            f"methods); trl {version} is installed: pip install 'trl{TRL_RANGE}'"
        )


@dataclass
class Batch:
    """One generation batch of a ``GRPOTrainer``: the step it was made at, and its episodes."""

    step: int
    mode: str  # "train" or "eval"
    trajectories: list[Trajectory] = field(default_factory=list)

    def flat_groups(self, num_generations: int) -> float:
        """The share of this batch's groups (``num_generations`` consecutive rollouts, as TRL
        groups them) whose rewards are all equal: the groups that give no gradient
        (``kit.rewards.flat_groups``, which TRL's ``frac_reward_zero_std`` under-counts)."""
        rewards = [t.reward for t in self.trajectories]
        if num_generations < 1 or not rewards or len(rewards) % num_generations:
            raise ValueError(
                f"{len(rewards)} rollouts do not split into groups of {num_generations}"
            )
        if any(r is None for r in rewards):
            raise ValueError("a rollout of this batch has no reward: it was not scored")
        return flat_groups(
            [rewards[i : i + num_generations] for i in range(0, len(rewards), num_generations)]
        )


class Capture:
    """Record what a ``GRPOTrainer`` trains on, one :class:`Batch` per generation batch.

    ::

        trainer = GRPOTrainer(..., environment_factory=WordleEnv)
        capture = Capture(trainer)
        trainer.train()
        capture.trajectories[0].spans(tokenizer)

    Each trajectory holds the trainer's own tensors, unpadded: ``prompt_ids`` (left padding
    removed), ``completion_ids`` and ``completion_mask`` (right padding removed), ``tool_mask``
    as built by the tool loop (with ``mask_truncated_completions`` the trainer also zeroes it
    for a cut completion; here that shows in ``completion_mask`` only, so the loss mask is the
    trainer's and the provenance stays true), plus the messages, each reward function's value (``rewards``), the weighted ``reward`` and
    the ``advantage``; and, from the env instance, ``states`` (``states[k - 1]``: its
    ``transcript`` after turn ``k``'s tool calls), ``done``, ``won`` and ``task`` (the row's
    columns).

    It wraps ``_generate_and_score_completions``, ``_generate`` and ``_calculate_rewards`` on
    this trainer instance (TRL is not modified); :meth:`close` puts them back. ``keep`` bounds
    memory on long runs: only the last ``keep`` batches are kept.
    """

    _HOOKED = ("_generate_and_score_completions", "_generate", "_calculate_rewards")

    def __init__(self, trainer: Any, keep: int | None = None) -> None:
        check_trl()
        if keep is not None and keep < 1:
            raise ValueError(f"keep must be at least 1 (or None for every batch), got {keep}")
        missing = [name for name in self._HOOKED if not callable(getattr(trainer, name, None))]
        if missing:
            raise ValueError(
                f"{type(trainer).__name__} has no {missing}: Capture needs TRL 1.16's GRPOTrainer"
            )
        self.trainer = trainer
        self.keep = keep
        self.batches: list[Batch] = []
        self._pending: dict[str, Any] = {}
        self._originals = {name: getattr(trainer, name) for name in self._HOOKED}
        # a capture already installed on this trainer is restored by close(), not removed
        self._shadowed = {
            name: trainer.__dict__[name] for name in self._HOOKED if name in trainer.__dict__
        }
        trainer._generate_and_score_completions = self._generate_and_score_completions
        trainer._generate = self._generate
        trainer._calculate_rewards = self._calculate_rewards

    @property
    def trajectories(self) -> list[Trajectory]:
        """Every captured episode, batch after batch."""
        return [t for batch in self.batches for t in batch.trajectories]

    def close(self) -> None:
        """Stop capturing: the trainer's own methods are restored."""
        for name in self._originals:
            if name in self._shadowed:
                self.trainer.__dict__[name] = self._shadowed[name]
            else:
                self.trainer.__dict__.pop(name, None)
        self._originals = {}

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the hooks
    def _generate(self, prompts: list[Any]) -> Any:
        trainer = self.trainer
        environments = getattr(trainer, "environments", None) or []
        states = [_state(env) for env in environments]
        logs: list[list[str | None]] = [[] for _ in prompts]
        originals: list[dict[str, Any]] = []
        if getattr(trainer, "tools", None):
            originals = trainer._sync_tool_dicts
            trainer._sync_tool_dicts = [
                {name: _logged(tool, logs[i], environments, i) for name, tool in tools.items()}
                for i, tools in enumerate(originals)
            ]
        try:
            result = self._originals["_generate"](prompts)
        finally:
            if originals:
                trainer._sync_tool_dicts = originals
        prompt_ids_list, completion_ids_list, tool_masks, completions = result[:4]
        self._pending = {
            "tool_masks": tool_masks,
            "prompts": copy.deepcopy(prompts),
            "completions": copy.deepcopy(completions),
            "prompt_lengths": [len(ids) for ids in prompt_ids_list],
            "completion_lengths": [len(ids) for ids in completion_ids_list],
            "states": states,
            "logs": logs,
            "known": [set(tools) for tools in originals],
        }
        return result

    def _calculate_rewards(self, *args: Any, **kwargs: Any) -> Any:
        rewards = self._originals["_calculate_rewards"](*args, **kwargs)
        self._pending["rewards_per_func"] = rewards.detach().float().cpu()
        return rewards

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        trainer = self.trainer
        self._pending = {}
        output = self._originals["_generate_and_score_completions"](inputs)
        pending, self._pending = self._pending, {}
        mode = "train" if trainer.model.training else "eval"
        batch = Batch(step=trainer.state.global_step, mode=mode)
        batch.trajectories = self._trajectories(inputs, output, pending)
        self.batches.append(batch)
        if self.keep is not None:
            del self.batches[: -self.keep]
        return output

    def _trajectories(
        self, inputs: list[dict[str, Any]], output: dict[str, Any], pending: dict[str, Any]
    ) -> list[Trajectory]:
        trainer = self.trainer
        stop = {*trainer.eos_token_ids, trainer._tokenizer.pad_token_id}
        environments = getattr(trainer, "environments", None) or [None] * len(inputs)
        weights = trainer.reward_weights.float().cpu()
        start = trainer.accelerator.process_index * len(inputs)
        rewards_per_func = pending["rewards_per_func"][start : start + len(inputs)]
        cap = trainer.max_tool_calling_iterations
        trajectories = []
        for i, row in enumerate(inputs):
            n = pending["completion_lengths"][i]
            p = pending["prompt_lengths"][i]
            prompt_row = output["prompt_ids"][i]
            completion_ids = output["completion_ids"][i][:n].tolist()
            # provenance before `mask_truncated_completions` zeroes a cut completion's tool_mask;
            # that zeroing reaches the loss through completion_mask, which is kept as trained
            tool_masks = pending["tool_masks"]
            tool_mask = list(tool_masks[i]) if tool_masks is not None else [1] * n
            messages = pending["prompts"][i] + pending["completions"][i]
            env = environments[i]
            calls = tool_calls(messages)
            func_rewards = rewards_per_func[i]
            scored = ~func_rewards.isnan()
            trajectories.append(
                Trajectory(
                    messages=messages,
                    prompt_ids=prompt_row[prompt_row.numel() - p :].tolist(),
                    completion_ids=completion_ids,
                    tool_mask=tool_mask,
                    completion_mask=output["completion_mask"][i][:n].tolist(),
                    env=None if env is None else env_name(type(env)),
                    task={k: v for k, v in row.items() if k != "prompt"},
                    tool_calls=calls,
                    states=_turn_states(
                        messages, pending["states"][i], pending["logs"][i], pending["known"][i]
                    )
                    if env is not None and pending["known"] and pending["states"][i] is not None
                    else [],
                    reward=float((func_rewards[scored] * weights[scored]).sum())
                    if bool(scored.any())
                    else math.nan,
                    rewards=dict(
                        zip(trainer.reward_func_names, func_rewards.tolist(), strict=True)
                    ),
                    advantage=float(output["advantages"][i]),
                    done=bool(getattr(env, "done", False)),
                    won=bool(getattr(env, "won", False)),
                    truncated=is_truncated(completion_ids, stop) or _dropped(messages, cap),
                )
            )
        return trajectories


def _dropped(messages: list[Message], cap: int) -> bool:
    """Whether the length budget dropped the last turn's tool results.

    A last turn that called tools but got no answer ended either at the tool-call cap (then
    exactly ``cap`` turns were answered) or because its results would overflow the budget.
    """
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not assistants or not messages[assistants[-1]].get("tool_calls"):
        return False
    if messages[-1]["role"] == "tool":
        return False
    answered = sum(
        1 for i in assistants if i + 1 < len(messages) and messages[i + 1]["role"] == "tool"
    )
    return answered < cap


def _state(env: Any) -> str | None:
    return getattr(env, "transcript", None)


def _logged(
    tool: Callable[..., Any], log: list[str | None], environments: list[Any], index: int
) -> Callable[..., Any]:
    """``tool``, noting the env's state after every call, whether it returns or raises."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return tool(*args, **kwargs)
        finally:
            log.append(_state(environments[index]) if index < len(environments) else None)

    call.__name__ = tool.__name__
    return call


def _turn_states(
    messages: list[Message], initial: str | None, log: list[str | None], known: set[str]
) -> list[str | None]:
    """``states[k - 1]``: the env's state after turn ``k``'s tool calls (``initial``: after reset).

    The trainer calls a turn's tools in order, so the per-call log is consumed turn by turn;
    an unknown tool name never reaches the env, and the calls of a turn the tool-call cap cut
    off never run (the log is exhausted by then).
    """
    states = [initial]
    cursor = 0
    for message in messages:
        if message["role"] != "assistant":
            continue
        state = states[-1]
        for call in message.get("tool_calls") or []:
            name = call.get("function", call).get("name")
            if name in known and cursor < len(log):
                state = log[cursor]
                cursor += 1
        states.append(state)
    return states[1:]
