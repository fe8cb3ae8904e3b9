"""Play episodes of a ``kit.envs`` environment with a model, exactly as ``GRPOTrainer`` plays them.

Why not just call the trainer: evaluating a checkpoint, looking at what a model does before
training, or building a baseline needs the *same* episodes training would see (same prompt
rendering, same tool loop, same stopping rules, same token ids and loss mask) without an
optimiser, a dataset or a reward function. This module is TRL 1.16's ``_generate`` /
``_tool_call_loop`` for one env class, outside the trainer:

* the prompt is the row's ``prompt`` (TRL's empty user message when the row has none) with the
  env's ``reset(**row)`` text appended, rendered with the env's tool schemas;
* each turn is generated in a batch (left padding), cut after its first EOS, parsed with the
  tokenizer's response parser; the tool calls run on the episode's own env instance (an
  exception comes back as ``{'error': '...'}``, an unknown tool as ``Tool X not found.``);
* ids are built by concatenation: the sampled tokens are never re-tokenised, the tool results go
  in as TRL's suffix ids (``tool_mask`` 0); a tool block that would overflow
  ``max_completion_length`` is dropped (its side effects stay) and ends the episode, a turn that
  overflows it is cut; the episode stops when the model calls no tool, or after
  ``max_tool_calling_iterations`` rounds of tool calls (the last calls are left unexecuted).

Groups and tasks follow ``GRPOTrainer``: each task (a dataset row, or an int as
``{"seed": n}``) is played ``num_generations`` times in a row, each episode on its own env
instance; :class:`TaskSampler` draws rows in a seeded, per-epoch shuffled order. Everything is
seeded: the same call gives the same episodes.

Play 4 episodes (2 tasks x 2 generations) of Catch with the tiny offline model::

    from kit.envs import CatchEnv
    from kit.models import tiny_model
    from kit.rollout import rollout

    model, tokenizer = tiny_model()
    episodes = rollout(model, CatchEnv, tokenizer, tasks=[{"ball_col": 0}, {"ball_col": 4}],
                       num_generations=2, max_completion_length=64, seed=0)
    episodes[0].counts()            # tokens per source: prompt / model / env
    episodes[0].spans(tokenizer)    # the same provenance the loss uses

With vLLM installed and a GPU, pass a ``vllm.LLM`` as ``model`` to generate with it (the path is
small and not covered by the CPU test suite).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kit.envs import env_name, env_tools
from kit.episode import Message, Policy, call_tool, runs_tools, start
from kit.masks import chat_template, prompt_ids, tool_suffix_ids
from kit.tasks import check_seed
from kit.trajectory import Trajectory, is_truncated, tool_calls


class TaskSampler:
    """Dataset rows in a seeded order, reshuffled every epoch (AgileRL's ``TaskAssigner`` idea).

    ``take(n)`` returns the next ``n`` rows, crossing into the next epoch (and its new order)
    when the current one runs out; each epoch's order depends only on ``seed`` and the epoch
    number, so a sampler rebuilt with the same seed replays the same tasks. Pair it with
    :func:`rollout`, which plays every row ``num_generations`` times::

        sampler = TaskSampler([{"secret": w} for w in words], seed=0)
        episodes = rollout(model, WordleEnv, tokenizer, sampler.take(8), num_generations=4)
    """

    def __init__(
        self, rows: Sequence[dict[str, Any] | int], seed: int = 0, shuffle: bool = True
    ) -> None:
        self.rows = [_task_row(row) for row in rows]
        if not self.rows:
            raise ValueError("TaskSampler needs at least one row")
        self.seed = check_seed(seed)
        self.shuffle = shuffle
        self.epoch = 0
        self.position = 0  # rows of the current epoch already handed out

    def order(self, epoch: int) -> list[int]:
        """The row indices of ``epoch``, in the order they are handed out."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        indices = list(range(len(self.rows)))
        if self.shuffle:
            random.Random(f"kit.TaskSampler/{self.seed}/{epoch}").shuffle(indices)
        return indices

    def take(self, n: int) -> list[dict[str, Any]]:
        """The next ``n`` rows (copies)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        taken = []
        while len(taken) < n:
            order = self.order(self.epoch)
            step = min(n - len(taken), len(order) - self.position)
            taken += [self.rows[i] for i in order[self.position : self.position + step]]
            self.position += step
            if self.position == len(order):
                self.epoch, self.position = self.epoch + 1, 0
        return copy.deepcopy(taken)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            yield self.take(1)[0]


@dataclass
class _Episode:
    """One episode in flight: its env, its ids so far and its messages."""

    task: dict[str, Any]
    env: Any
    tools: list[Any]
    prompt: list[Message]
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    tool_mask: list[int] = field(default_factory=list)
    completions: list[Message] = field(default_factory=list)
    initial: str | None = None  # the env's transcript after the reset
    states: list[str] = field(default_factory=list)  # ... and after each turn
    dropped: bool = False
    by_name: dict[str, Any] = field(init=False)  # the tools, by name, as call_tool looks them up

    def __post_init__(self) -> None:
        self.by_name = {tool.__name__: tool for tool in self.tools}

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


def rollout(
    model: Any,
    env_cls: type | str,
    tokenizer: Any,
    tasks: Sequence[dict[str, Any] | int],
    *,
    num_generations: int = 1,
    max_completion_length: int = 256,
    max_tool_calling_iterations: int | None = 8,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = 0,
    min_p: float | None = None,
    repetition_penalty: float = 1.0,
    greedy: bool = False,
    seed: int = 0,
    batch_size: int = 32,
    mask_truncated_completions: bool = False,
    chat_template_kwargs: dict[str, Any] | None = None,
    generation_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
) -> list[Trajectory]:
    """Play ``num_generations`` episodes of every task; return them in order, group by group.

    ``env_cls``: a tool-method env class (or a ``kit.envs.ENVS`` name). ``tasks``: dataset rows
    (task columns such as ``secret`` or ``seed``, and optionally ``prompt``), or ints meaning
    ``{"seed": n}``. The settings mean what the ``GRPOConfig`` fields of the same names mean;
    the defaults are ``kit.train.grpo_config``'s; ``max_tool_calling_iterations=None`` lifts
    the cap, as in TRL. ``generation_kwargs`` go to the backend on top of everything else, as
    ``GRPOConfig.generation_kwargs`` do (``GenerationConfig`` fields, or ``vllm.SamplingParams``
    ones).

    Tokens are sampled as ``GRPOTrainer`` samples them: ``temperature``, ``top_p``, ``top_k``,
    ``min_p`` and ``repetition_penalty`` mean what the ``GRPOConfig`` fields do and default to
    theirs (1.0, 1.0, 0: no top-k, None, 1.0), and every one of them is passed to the backend
    explicitly, so that the model's own generation config (Qwen3 ships top_k 20, top_p 0.95,
    T 0.6; a bare ``GenerationConfig`` means top_k 50) cannot fill them in: an evaluation of
    what training does must sample from the distribution training samples from. As in TRL,
    ``min_p=None`` sets none, so transformers applies the model's own ``min_p`` if it has one
    (vLLM gets 0.0: off). ``top_k=None`` also means no top-k (TRL's 0), never the model's.
    ``greedy=True`` decodes greedily instead (only ``repetition_penalty`` still applies).
    ``batch_size`` episodes are generated together; ``seed`` fixes the sampling (the global
    torch RNG is left as it was). ``mask_truncated_completions=True`` gives a completion the
    budget cut mid-turn a ``completion_mask`` of zeros, as the trainer does. Like
    ``GRPOTrainer``, it gives a tokenizer without a response parser TRL's (``add_response_schema``).

    Each :class:`~kit.trajectory.Trajectory` carries the messages, ``prompt_ids``,
    ``completion_ids``, ``tool_mask`` (0 for env tokens) and ``completion_mask``, the env name
    and task, ``tool_calls`` (see :func:`kit.trajectory.tool_calls`), ``states`` (``states[k - 1]``:
    the env's ``transcript`` after turn ``k``'s tool calls), and the env's ``reward``,
    ``done`` and ``won``. ``truncated`` is True when the length budget cut the episode: a turn
    that ends without EOS (TRL's ``is_truncated``) or tool results dropped.
    """
    env_cls = _env_class(env_cls)
    rows = [_task_row(task) for task in tasks]
    sampling = sampling_settings(temperature, top_p, top_k, min_p, repetition_penalty)
    _check_settings(
        rows,
        num_generations,
        max_completion_length,
        max_tool_calling_iterations,
        sampling,
        greedy,
        batch_size,
    )
    _ensure_response_parser(tokenizer)
    generate = _generator(
        model, tokenizer, max_completion_length, sampling, greedy, seed, generation_kwargs
    )
    template = chat_template(tokenizer, uses_tools=bool(env_tools(env_cls())))
    settings = (template, chat_template_kwargs or {})
    group = [row for row in rows for _ in range(num_generations)]
    trajectories: list[Trajectory] = []
    with _progress(len(group), progress, env_name(env_cls)) as bar, generate.seeded():
        for start in range(0, len(group), batch_size):
            episodes = [
                _start(env_cls, row, tokenizer, settings)
                for row in group[start : start + batch_size]
            ]
            _play(
                episodes,
                generate,
                tokenizer,
                settings,
                max_completion_length,
                max_tool_calling_iterations,
                bar.update,
            )
            trajectories += [
                _trajectory(episode, env_cls, generate.stop, mask_truncated_completions)
                for episode in episodes
            ]
            for episode in episodes:  # a served env's session is freed now, not at GC
                if hasattr(episode.env, "__exit__"):
                    episode.env.__exit__(None, None, None)
    return trajectories


# -- the episode loop: TRL's `_generate` + `_tool_call_loop` for one batch ------------------------


def _start(env_cls: type, row: dict[str, Any], tokenizer: Any, settings: tuple) -> _Episode:
    template, kwargs = settings
    env = env_cls()
    prompt = start(env, row)
    tools = env_tools(env)
    ids = prompt_ids(tokenizer, prompt, tools, template, kwargs)
    task = {k: v for k, v in row.items() if k != "prompt"}
    return _Episode(task, env, tools, prompt, ids, initial=getattr(env, "transcript", None))


def _play(
    episodes: list[_Episode],
    generate: _Generate,
    tokenizer: Any,
    settings: tuple,
    budget: int,
    cap: int | None,
    finished: Callable[[int], Any],
) -> None:
    """Play a batch of episodes to their end; ``finished(n)`` hears of episodes as they end.

    ``kit.episode.run_episode``'s loop, a batch at a time and token by token: each round, the
    episodes whose last turn ``runs_tools`` run their calls, and those whose tool results still
    fit the budget generate their next turn together."""
    template, kwargs = settings
    for episode, ids in zip(episodes, generate([e.prompt_ids for e in episodes]), strict=True):
        episode.completion_ids = ids
        episode.tool_mask = [1] * len(ids)
        episode.completions = [_parse(tokenizer, ids, episode.prompt_ids, episode.tools)]
    active, rounds = episodes, 0
    while active:
        running = [e for e in active if runs_tools(e.completions[-1], rounds, cap)]
        finished(len(active) - len(running))
        extended = []
        for episode in running:
            replies = [
                call_tool(episode.env, call, episode.by_name)
                for call in episode.completions[-1]["tool_calls"]
            ]
            if episode.initial is not None:
                episode.states.append(episode.env.transcript)
            suffix = tool_suffix_ids(tokenizer, replies, template, kwargs)
            if (
                len(episode.completion_ids) + len(suffix) > budget
                or len(episode.input_ids) + len(suffix) >= generate.max_length
            ):
                episode.dropped = True  # TRL rolls the results back; the tools' side effects stay
                continue
            episode.completions += replies
            episode.completion_ids += suffix
            episode.tool_mask += [0] * len(suffix)
            extended.append(episode)
        finished(len(running) - len(extended))
        active = []
        turns = generate([e.input_ids for e in extended]) if extended else []
        for episode, ids in zip(extended, turns, strict=True):
            ids = ids[: max(0, budget - len(episode.completion_ids))]
            prefix = episode.input_ids
            episode.completion_ids += ids
            episode.tool_mask += [1] * len(ids)
            if ids:  # TRL appends nothing for a turn the budget cut to zero tokens
                episode.completions.append(_parse(tokenizer, ids, prefix, episode.tools))
                active.append(episode)
            else:
                finished(1)
        rounds += 1
    for episode in episodes:
        # only the last turn can lack a state: one that called no tool, or one the cap left unrun
        turns = sum(m["role"] == "assistant" for m in episode.completions)
        if episode.initial is not None and len(episode.states) < turns:
            episode.states.append(episode.states[-1] if episode.states else episode.initial)


def _parse(tokenizer: Any, ids: list[int], prefix: list[int], tools: list[Any]) -> Message:
    from trl.chat_template_utils import parse_response

    return parse_response(tokenizer, ids, prefix=prefix, tools=tools)


def _trajectory(episode: _Episode, env_cls: type, stop: set[int], mask_cut: bool) -> Trajectory:
    messages = episode.prompt + episode.completions
    ids = episode.completion_ids
    cut = is_truncated(ids, stop)
    env = episode.env
    reward = getattr(env, "reward", None)
    return Trajectory(
        messages=messages,
        prompt_ids=episode.prompt_ids,
        completion_ids=ids,
        tool_mask=episode.tool_mask,
        completion_mask=[0 if cut and mask_cut else 1] * len(ids),
        env=env_name(env_cls),
        task=episode.task,
        tool_calls=tool_calls(messages),
        states=episode.states,
        reward=None if reward is None else float(reward),
        done=bool(getattr(env, "done", False)),
        won=bool(getattr(env, "won", False)),
        truncated=episode.dropped or cut,
    )


# -- one model turn at a time, for the message-level loop ------------------------------------------


def model_policy(
    model: Any,
    tokenizer: Any,
    max_new_tokens: int = 256,
    temperature: float | None = 1.0,
    *,
    top_p: float = 1.0,
    top_k: int | None = 0,
    min_p: float | None = None,
    repetition_penalty: float = 1.0,
) -> Callable[[type, int], Policy]:
    """A model as a policy factory for ``kit.episode.run_episode``, so that ``kit.diagnostics``
    can rank it beside the scripted players: each turn is rendered from the conversation so far
    with TRL's template and the env's tools, generated by :func:`rollout`'s backend and parsed
    with TRL's response parser.

    Unlike :func:`rollout`, each turn re-renders the whole conversation and nothing counts a
    token budget: for episodes token for token as GRPO plays them, use :func:`rollout`.
    ``temperature=None`` (or 0) decodes greedily; the sampling settings are :func:`rollout`'s (GRPO's
    defaults, passed explicitly over the model's generation config). Turn ``k`` of the episode
    with seed ``s`` samples from a generator seeded with ``(s, k)``; the caller's RNG state is
    left as it was.
    """
    _ensure_response_parser(tokenizer)
    greedy = not temperature  # None or 0: greedy, as generate reads a temperature of 0
    sampling = sampling_settings(temperature or 1.0, top_p, top_k, min_p, repetition_penalty)
    _check_sampling(sampling, greedy)

    def factory(env_cls: type, seed: int) -> Policy:
        tools = env_tools(env_cls())
        template = chat_template(tokenizer, uses_tools=bool(tools))
        turns = 0

        def act(messages: list[Message]) -> Message:
            nonlocal turns
            ids = prompt_ids(tokenizer, messages, tools, template)
            turn_seed = seed * 1_000 + turns
            turns += 1
            generate = _generator(
                model, tokenizer, max_new_tokens, sampling, greedy, turn_seed, None
            )
            with generate.seeded():
                (completion,) = generate([ids])
            return _parse(tokenizer, completion, ids, tools)

        return act

    return factory


# -- generation backends --------------------------------------------------------------------------


class _Generate:
    """Turn a batch of token-id prompts into completions cut after their first EOS (TRL's rule)."""

    max_length: float = float("inf")  # the backend's context ceiling (TRL's `max_model_len`)
    stop: set[int]  # EOS and pad ids: a completion ending on one was not cut by the budget

    def __call__(self, prompts: list[list[int]]) -> list[list[int]]:
        raise NotImplementedError

    def seeded(self) -> contextlib.AbstractContextManager[None]:
        """A context in which generation is reproducible; the caller's RNG state survives it."""
        raise NotImplementedError


class _TransformersGenerate(_Generate):
    """``model.generate`` that keeps a batch's KV cache for the next turn of the same episodes.

    Why: an episode's next prompt is its last prompt, the turn it wrote and the tool results, and
    TRL's transformers path reads all of it again every turn. On a CPU that re-reading is most of
    an evaluation's time (SmolLM2-135M: 1.4 ms a prompt token on 2 cores, so a 10-turn Catch game
    of about 800 tokens re-reads some 4,000). Here each call keeps its tokens, which of them are
    real (the prompt and the completion up to its EOS), and the cache; a prompt that extends a kept
    row's real tokens reuses that row's cache and the model reads only the new tokens. The gaps
    (left padding, tokens after an EOS, the padding that aligns the new tokens) are masked, and
    positions come from the mask's running count (``generate``'s rule), so a reused row sees the
    tokens and positions a fresh read would: the same completion, up to floating-point rounding
    (``tests/test_rollout.py`` compares the two token for token). A batch with any prompt that
    extends no kept row is read afresh."""

    def __init__(self, model: Any, config: Any, eos: list[int], pad: int, seed: int) -> None:
        self.model, self.config, self.eos, self.pad, self.seed = model, config, eos, pad, seed
        self.stop = {*eos, pad}
        self.max_length = getattr(model.config, "max_position_embeddings", None) or float("inf")
        self.prompt_tokens = 0  # tokens the model has read as prompts, for benchmarks
        self._kept: tuple[Any, Any, Any, dict[tuple[int, ...], int]] | None = None

    def forget(self) -> None:
        """Drop the kept cache (the weights changed, or the episodes are over)."""
        self._kept = None

    @contextlib.contextmanager
    def seeded(self) -> Iterator[None]:
        import torch

        devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(self.seed)
            yield

    def __call__(self, prompts: list[list[int]]) -> list[list[int]]:
        import torch

        device = self.model.device
        kept, self._kept = self._kept, None  # a failed call leaves no cache behind
        rows = self._extended_rows(kept, prompts)
        if rows is None:
            cache, width = growing_cache(self.model.config), max(map(len, prompts))
            ids, mask = _left_padded(prompts, self.pad, device)
            self.prompt_tokens += self._read_once(prompts, ids, mask, cache)
        else:
            tokens, real, cache, _ = kept
            index = torch.tensor([row for row, _ in rows], device=device)
            cache.batch_select_indices(index)
            new, new_mask = _left_padded(
                [p[n:] for p, (_, n) in zip(prompts, rows, strict=True)], self.pad, device
            )
            ids = torch.cat([tokens[index], new], dim=1)
            mask = torch.cat([real[index], new_mask], dim=1)
            width = ids.shape[1]
            self.prompt_tokens += int(new_mask.sum())
        with torch.no_grad():
            output = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                generation_config=self.config,
                **{cache_kwarg(self.model): cache},
            )
        completions = [_cut_at_eos(row.tolist(), self.eos) for row in output[:, width:].cpu()]
        written = torch.zeros(output.shape[0], output.shape[1] - width, dtype=mask.dtype)
        for i, completion in enumerate(completions):
            written[i, : len(completion)] = 1
        real = torch.cat([mask, written.to(device)], dim=1)
        index = {tuple(p + c): i for i, (p, c) in enumerate(zip(prompts, completions, strict=True))}
        self._kept = (output, real, cache, index)
        return completions

    def _read_once(self, prompts: list[list[int]], ids: Any, mask: Any, cache: Any) -> int:
        """Read each distinct prompt of a fresh batch but its last token into ``cache``, once, and
        copy its keys and values to the rows that repeat it; return the prompt tokens read.

        Why: GRPO plays each task ``num_generations`` times, so a first turn's batch holds each
        prompt that many times, and ``generate`` would read every copy. With the cache holding
        all but the last column, ``generate`` reads only that column, as it reads a kept row's
        new tokens: positions are the mask's running count, as ``generate`` gives them."""
        import torch

        distinct: dict[tuple[int, ...], int] = {}
        copy_of = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
        if len(distinct) == len(prompts) or ids.shape[1] < 2 or not full_cache(cache):
            return int(mask.sum())
        firsts = [copy_of.index(i) for i in range(len(distinct))]
        head, head_mask = ids[firsts, :-1], mask[firsts, :-1]
        positions = (head_mask.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            self.model(
                input_ids=head,
                attention_mask=head_mask,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **{cache_kwarg(self.model): cache},
            )
        cache.batch_select_indices(torch.tensor(copy_of, device=ids.device))
        return int(head_mask.sum()) + int(mask[:, -1].sum())

    @staticmethod
    def _extended_rows(
        kept: tuple[Any, Any, Any, dict[tuple[int, ...], int]] | None, prompts: list[list[int]]
    ) -> list[tuple[int, int]] | None:
        """For each prompt, the kept row its start repeats and that row's length; None unless
        every prompt extends one (by at least one token)."""
        if kept is None:
            return None
        index = kept[3]
        lengths = sorted({len(key) for key in index}, reverse=True)
        rows = []
        for prompt in prompts:
            n = next((n for n in lengths if n < len(prompt) and tuple(prompt[:n]) in index), None)
            if n is None:
                return None
            rows.append((index[tuple(prompt[:n])], n))
        return rows


def growing_cache(config: Any) -> Any:
    """A ``transformers.DynamicCache`` for ``config`` whose full-attention layers write each
    token's keys and values into room kept at their end (:class:`_GrowingLayer`)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    if full_cache(cache):
        cache.layers = [_growing_layer()() for _ in cache.layers]
    return cache


@functools.cache
def _growing_layer() -> type:
    from transformers.cache_utils import DynamicLayer

    class _GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` that writes new keys and values into room kept after its last
        position, and hands out views of its filled part.

        Why: ``DynamicLayer`` concatenates, so every token generated copies the layer's whole
        cache; on a CPU, where a decoding step of a small model is memory traffic, that copy
        was a third of the step (the tiny model, 32 rows of 600 tokens: 7.3 ms a step against
        5.4 to 6.7 ms here, the same logits). The room grows by half when full; keys replaced
        by another method (``batch_select_indices`` after a turn) are copied into new room."""

        room: tuple[Any, Any] | None = None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            used, new = self.get_seq_length(), key_states.shape[-2]
            room = self.room
            if (
                room is None
                or room[0].shape[:-2] != key_states.shape[:-2]
                or (used and room[0].data_ptr() != self.keys.data_ptr())
                or used + new > room[0].shape[-2]
            ):
                size = used + new + max(64, (used + new) // 2)
                shape = (*key_states.shape[:-2], size, key_states.shape[-1])
                room = (key_states.new_empty(shape), value_states.new_empty(shape))
                if used:
                    room[0][..., :used, :] = self.keys
                    room[1][..., :used, :] = self.values
                self.room = room
            room[0][..., used : used + new, :] = key_states
            room[1][..., used : used + new, :] = value_states
            self.keys, self.values = room[0][..., : used + new, :], room[1][..., : used + new, :]
            return self.keys, self.values

    return _GrowingLayer


def cache_kwarg(model: Any) -> str:
    """The name ``model``'s forward pass takes its KV cache by: transformers renamed
    ``past_key_values`` to ``cache`` (5.25 takes both), and a name a model does not take is
    dropped without a word, and the cache with it."""
    import inspect

    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    taken = inspect.signature(type(decoder).forward).parameters
    return "cache" if "cache" in taken else "past_key_values"


def full_cache(cache: Any) -> bool:
    """Whether every layer of ``cache`` keeps every position (no sliding window)."""
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) in (DynamicLayer, _growing_layer()) for layer in cache.layers)


def _left_padded(rows: list[list[int]], pad: int, device: Any) -> tuple[Any, Any]:
    """``rows`` as one left-padded tensor of ids and its attention mask."""
    import torch

    width = max(map(len, rows))
    ids = torch.tensor(
        [[pad] * (width - len(r)) + r for r in rows], dtype=torch.long, device=device
    )
    mask = torch.tensor(
        [[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long, device=device
    )
    return ids, mask


def reuse_turn_caches(trainer: Any) -> None:
    """Make ``trainer`` (a TRL 1.16 ``GRPOTrainer``) keep each rollout's KV cache from one turn of
    the tool loop to the next, as :class:`_TransformersGenerate` does for the kit's own episodes.

    Why: TRL's transformers path generates a tool loop's next turn from the whole conversation
    again, and on a CPU that re-reading is much of a step (benchmarks/grpo_step.py: later turns
    read 40,558 prompt tokens a step for about 2,200 written, SmolLM2-135M on Catch). Only the
    plain path is taken over (no vLLM, no continuous batching, no images, no
    ``pad_to_multiple_of`` or ``cache_implementation``); any other call goes to TRL's own ``_generate_single_turn``. The
    sampler draws as many tokens per call as TRL's would, so a run's episodes are TRL's up to
    floating-point rounding (``tests/test_rollout.py`` compares a GRPO step both ways). The kept
    cache is dropped at every optimizer step: it was computed with the weights before it."""
    from trl.models import unwrap_model_for_generation

    trl_turn = trainer._generate_single_turn
    tokenizer = trainer.processing_class
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else trainer.eos_token_ids[0]
    generate = _TransformersGenerate(trainer.model, None, list(trainer.eos_token_ids), pad, 0)
    kept_at = [trainer.state.global_step]

    def turn(
        prompt_ids: list[list[int]],
        images: Any,
        multimodal_fields: dict[str, Any],
        num_generations: int,
        has_tool_images: bool = False,
    ) -> tuple[list[list[int]], None]:
        plain = not (trainer.use_vllm or trainer.use_transformers_continuous_batching)
        if not plain or images is not None or multimodal_fields or has_tool_images:
            return trl_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        if trainer.pad_to_multiple_of is not None or trainer.generation_config.cache_implementation:
            return trl_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        if trainer.state.global_step != kept_at[0]:
            generate.forget()
            kept_at[0] = trainer.state.global_step
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                generation_kwargs=trainer.generation_kwargs,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as model,
            trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False),
        ):
            generate.model, generate.config = model, trainer.generation_config
            return generate(prompt_ids), None

    trainer._generate_single_turn = turn


_SUFFIXES_KEPT = 4096


def render_tools_once(trainer: Any) -> None:
    """Make ``trainer`` (a TRL 1.16 ``GRPOTrainer`` with ``environment_factory``) describe each
    tool once and render each distinct tool block once.

    Why: TRL reads an env's tools from their docstrings again for every prompt it renders and
    every turn it parses (``get_json_schema``, most of ``parse_response``'s time), and tokenises
    every tool result by rendering the chat template twice around it (``_get_tool_suffix_ids``):
    together about 12% of a runbook step (benchmarks/grpo_step.py). The schemas never change,
    and a game answers with few distinct texts (a Catch run draws a few hundred distinct
    boards). So the tools an env's prompts are rendered and parsed with become their JSON
    schemas, which the chat template and the parser read just as they read the schema of a
    method (the env instances' own methods still run the calls), and a tool block's ids, which
    depend on its messages alone (the trainer's template and kwargs are fixed), are kept the
    first time (at most ``_SUFFIXES_KEPT`` at once: a game of free text rarely repeats one)."""
    from transformers.utils import get_json_schema

    per_env = getattr(trainer, "_env_tools", None) or {}
    for name, tools in per_env.items():
        per_env[name] = [get_json_schema(t) if callable(t) else t for t in tools]
    render = trainer._get_tool_suffix_ids
    rendered: dict[str, list[int]] = {}

    def suffix_ids(tool_messages: list[dict[str, Any]]) -> list[int]:
        key = json.dumps(tool_messages, sort_keys=True, default=repr)
        if key not in rendered:
            if len(rendered) >= _SUFFIXES_KEPT:
                rendered.clear()
            rendered[key] = list(render(tool_messages))
        return list(rendered[key])

    trainer._get_tool_suffix_ids = suffix_ids


class _VLLMSeeds:
    """Per-request seeds for vLLM: one of its own for every prompt of every call.

    vLLM seeds each request's sampler with the request's ``seed``: one seed for a whole batch
    would make the ``num_generations`` identical prompts of a task sample identical episodes.
    The seeds depend only on ``seed`` and the call's rank, so a replay draws the same ones."""

    def __init__(self, seed: int) -> None:
        self.seed, self.calls = seed, 0

    def take(self, n: int) -> list[int]:
        rng = random.Random(f"kit.rollout.vllm/{self.seed}/{self.calls}")
        self.calls += 1
        return [rng.getrandbits(63) for _ in range(n)]


class _VLLMGenerate(_Generate):
    """Generation with a ``vllm.LLM`` (GPU only; not exercised by the CPU test suite)."""

    def __init__(self, llm: Any, fields: dict[str, Any], eos: list[int], pad: int, seed: int):
        self.llm, self.fields, self.eos, self.stop = llm, fields, eos, {*eos, pad}
        self.seeds = _VLLMSeeds(seed)
        self.max_length = llm.llm_engine.model_config.max_model_len

    def seeded(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # the seeds travel in each request's SamplingParams

    def __call__(self, prompts: list[list[int]]) -> list[list[int]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        # a seed in generation_kwargs wins, as every other field there does
        params = [
            SamplingParams(**{"seed": s, **self.fields}) for s in self.seeds.take(len(prompts))
        ]
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False
        )
        return [_cut_at_eos(list(o.outputs[0].token_ids), self.eos) for o in outputs]


SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


def sampling_settings(
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = 0,
    min_p: float | None = None,
    repetition_penalty: float = 1.0,
) -> dict[str, Any]:
    """The five sampling settings as ``GRPOConfig`` names them, ``top_k=None`` read as TRL's 0
    (no top-k): what :func:`rollout` passes to the backend and ``kit.evaluate`` records."""
    return {
        "temperature": temperature,
        "top_p": top_p,
        "top_k": 0 if top_k is None else top_k,
        "min_p": min_p,
        "repetition_penalty": repetition_penalty,
    }


def _generator(
    model: Any,
    tokenizer: Any,
    max_new_tokens: int,
    sampling: dict[str, Any],
    greedy: bool,
    seed: int,
    generation_kwargs: dict[str, Any] | None,
) -> _Generate:
    eos = _eos_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    if type(model).__module__.startswith("vllm"):
        fields = _vllm_sampling(
            **sampling,
            greedy=greedy,
            max_new_tokens=max_new_tokens,
            eos=eos,
            generation_kwargs=generation_kwargs,
        )
        return _VLLMGenerate(model, fields, eos, pad, seed)
    from transformers import GenerationConfig

    # GRPOTrainer's GenerationConfig (TRL 1.16, transformers path): every sampling setting set,
    # so that none is taken from the model's generation config (transformers fills in only the
    # fields left None), then generation_kwargs on top. Greedy decoding applies no warper, only
    # the repetition penalty, which is therefore still passed.
    settings = {"repetition_penalty": sampling["repetition_penalty"]} if greedy else sampling
    config = GenerationConfig(
        **{
            "max_new_tokens": max_new_tokens,
            "do_sample": not greedy,
            "pad_token_id": pad,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": eos,
            **settings,
            "disable_compile": True,
        }
        | (generation_kwargs or {})
    )
    return _TransformersGenerate(model, config, eos, pad, seed)


def _vllm_sampling(
    *,
    temperature: float,
    top_p: float,
    top_k: int,
    min_p: float | None,
    repetition_penalty: float,
    greedy: bool,
    max_new_tokens: int,
    eos: list[int],
    generation_kwargs: dict[str, Any] | None,
) -> dict[str, Any]:
    """``vllm.SamplingParams`` fields as TRL 1.16's colocated vLLM generation sets them
    (``vllm_generation.py``): ``top_k`` as given (0: vLLM's "all tokens"), ``min_p`` None as
    0.0; greedy is temperature 0; the stop ids are TRL's EOS ids; ``generation_kwargs`` on top.
    The per-request seed is added by :class:`_VLLMGenerate`."""
    fields = {
        "n": 1,
        "repetition_penalty": repetition_penalty,
        "temperature": 0.0 if greedy else temperature,
        "top_p": top_p,
        "top_k": top_k,
        "min_p": 0.0 if min_p is None else min_p,
        "max_tokens": max_new_tokens,
        "stop_token_ids": eos,
    }
    return fields | (generation_kwargs or {})


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """TRL's stop ids: every EOS the model's generation config declares, and the tokenizer's."""
    declared = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if declared is None:
        declared = []
    elif isinstance(declared, int):
        declared = [declared]
    declared = list(declared)
    if tokenizer.eos_token_id not in declared:
        declared = [tokenizer.eos_token_id, *declared]
    return declared


def _cut_at_eos(ids: list[int], eos: list[int]) -> list[int]:
    """Keep everything up to and including the first EOS; all of it when there is none."""
    for i, token in enumerate(ids):
        if token in eos:
            return ids[: i + 1]
    return ids


# -- checks and small helpers ---------------------------------------------------------------------


def _env_class(env_cls: type | str) -> type:
    from kit.envs import ENVS

    if isinstance(env_cls, str):
        if env_cls not in ENVS:
            raise ValueError(f"unknown env {env_cls!r}; choose one of {sorted(ENVS)}")
        return ENVS[env_cls]
    if not isinstance(env_cls, type) or not callable(getattr(env_cls, "reset", None)):
        raise ValueError(
            f"env_cls must be an env class with a reset method (e.g. kit.envs.WordleEnv) or an env "
            f"name; got {env_cls!r:.80}"
        )
    return env_cls


def _task_row(task: dict[str, Any] | int) -> dict[str, Any]:
    if isinstance(task, bool) or not isinstance(task, (dict, int)):
        raise ValueError(f"a task is a dataset row (dict) or an int seed; got {task!r:.80}")
    return {"seed": task} if isinstance(task, int) else dict(task)


def _check_settings(
    rows: list[dict[str, Any]],
    num_generations: int,
    max_completion_length: int,
    max_tool_calling_iterations: int | None,
    sampling: dict[str, Any],
    greedy: bool,
    batch_size: int,
) -> None:
    if not rows:
        raise ValueError("tasks is empty: give at least one dataset row or seed")
    for name, value in (
        ("num_generations", num_generations),
        ("max_completion_length", max_completion_length),
        ("batch_size", batch_size),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if max_tool_calling_iterations is not None and (
        not isinstance(max_tool_calling_iterations, int) or max_tool_calling_iterations < 0
    ):
        raise ValueError(
            f"max_tool_calling_iterations must be an int >= 0 or None, got {max_tool_calling_iterations!r}"
        )
    _check_sampling(sampling, greedy)


def _check_sampling(sampling: dict[str, Any], greedy: bool) -> None:
    """GRPOConfig's documented ranges, checked before anything is generated (GRPOConfig checks
    none of them; transformers or vLLM would fail later, or quietly sample something else)."""
    temperature, top_p, top_k = sampling["temperature"], sampling["top_p"], sampling["top_k"]
    min_p, penalty = sampling["min_p"], sampling["repetition_penalty"]
    if not greedy and not temperature > 0:
        raise ValueError(
            f"temperature must be > 0 for sampled play (or pass greedy=True), got {temperature}"
        )
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
        raise ValueError(f"top_k must be an int >= 0 (0: no top-k), got {top_k!r}")
    if min_p is not None and not 0 <= min_p <= 1:
        raise ValueError(f"min_p must be in [0, 1] or None, got {min_p}")
    if not penalty > 0:
        raise ValueError(f"repetition_penalty must be > 0 (1.0: none), got {penalty}")


def _ensure_response_parser(tokenizer: Any) -> None:
    """Give the tokenizer TRL's response parser, as ``GRPOTrainer`` does at construction."""
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    if not supports_tool_calling(tokenizer):
        raise ValueError(
            f"the chat template of {getattr(tokenizer, 'name_or_path', 'this tokenizer')} cannot "
            "render a tool-calling conversation (user -> assistant with tool_calls -> tool)"
        )
    if (
        getattr(tokenizer, "response_template", None) is None
        and getattr(tokenizer, "response_schema", None) is None
    ):
        add_response_schema(tokenizer)


def _progress(total: int, enabled: bool, name: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=f"rollout {name}", unit="episode")
