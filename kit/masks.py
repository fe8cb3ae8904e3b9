"""The loss mask of a tool-calling episode, token for token as TRL's ``GRPOTrainer`` builds it.

Why this module exists: in multi-turn GRPO the loss trains only on the tokens the model sampled
(``tool_mask == 1``); everything the chat template and the environment insert between two
sampled turns is context (``tool_mask == 0``). Where that boundary falls is decided by a few
lines deep inside TRL 1.16 (``_tokenize_prompts``, ``_get_tool_suffix_ids``,
``_tool_call_loop``), and getting it wrong by one token (the ``\\n`` after ``<|im_end|>``, a
re-tokenised turn) silently trains the model on text it never wrote. This module reproduces that
construction outside the trainer, so a notebook can show, and a test can prove, exactly what the
loss saw:

* :func:`build` turns a finished conversation into ``prompt_ids``, ``completion_ids`` and
  ``tool_mask`` (TRL's names and meanings), as a :class:`kit.trajectory.Trajectory` whose
  ``spans(tokenizer)`` give the text, ids, source and turn of every run of tokens.
* :class:`kit.capture.Capture` records what a running
  ``GRPOTrainer`` actually trained on, batch by batch: the other side of the comparison, which
  :func:`rebuild_report` makes on any run.
* :func:`chat_template`, :func:`prompt_ids` and :func:`tool_suffix_ids` are TRL's own steps,
  shared with ``kit.rollout`` (``kit.envs.env_tools`` is the one that lists an env's tools);
  :func:`assistant_ids` is the one step TRL never takes (re-encoding a finished turn);
  ``kit.trajectory.tool_calls`` pairs calls with their replies.

``tests/test_masks.py`` runs the real trainer through every env and checks both against it,
token for token.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.envs import ENVS, env_tools
from kit.trajectory import Trajectory, is_truncated, tool_calls

Message = dict[str, Any]
Tools = Sequence[Callable[..., Any] | dict[str, Any]]


# -- TRL's steps, one function each --------------------------------------------------------------


# TRL's choice of template per tokenizer, by what the choice reads (see chat_template)
_CHOSEN: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], str | None]] = (
    weakref.WeakKeyDictionary()
)


def chat_template(tokenizer: Any, uses_tools: bool = True) -> str | None:
    """The template TRL renders with: ``None`` (the tokenizer's own) or TRL's training variant.

    ``GRPOTrainer`` swaps in its ``*_training.jinja`` template when tools are in play and the
    tokenizer's template is not prefix-preserving (Qwen3's drops earlier think blocks); it raises
    ``ValueError`` for such a template it has no training variant of, and so does this.

    The trainer chooses once, when it is built; here the choice (up to five renders of TRL's
    dummy conversations) is kept per tokenizer and made anew when anything it reads changes:
    the template, the vocabulary, the special tokens the template sees.
    """
    if tokenizer.chat_template is None:
        raise ValueError(f"tokenizer {_tokenizer_name(tokenizer)} has no chat template")
    if not uses_tools:
        return None
    key = (repr(tokenizer.chat_template), str(len(tokenizer)), repr(tokenizer.special_tokens_map))
    chosen = _CHOSEN.setdefault(tokenizer, {})
    if key not in chosen:
        chosen[key] = _training_template(tokenizer)
    return chosen[key]


def _training_template(tokenizer: Any) -> str | None:
    from trl.chat_template_utils import (
        get_training_chat_template,
        is_chat_template_prefix_preserving,
    )

    if is_chat_template_prefix_preserving(tokenizer):
        return None
    try:
        return get_training_chat_template(tokenizer)
    except ValueError as error:
        raise ValueError(
            f"{_template_name(tokenizer, None)} is not prefix-preserving (a tool result changes "
            "how the assistant turn before it renders) and TRL has no training variant of it, so "
            "no token boundary between model and environment exists"
        ) from error


def prompt_ids(
    tokenizer: Any,
    prompt: list[Message],
    tools: Tools | None = None,
    template: str | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> list[int]:
    """TRL's ``_tokenize_prompts`` for one env prompt: the template with the generation prompt."""
    rendered = tokenizer.apply_chat_template(
        conversation=[prompt],
        tools=list(tools) or None,  # `or None` as TRL: Llama renders tool boilerplate for tools=[]
        chat_template=template,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        **(chat_template_kwargs or {}),
    )
    return list(rendered["input_ids"][0])


def tool_suffix_ids(
    tokenizer: Any,
    tool_messages: list[Message],
    template: str | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> list[int]:
    """TRL's ``_get_tool_suffix_ids``: the ids between the model's EOS and its next sampled token.

    A dummy conversation is rendered with and without the tool messages (and the generation
    prompt); the difference, taken after the dummy's *last EOS*, is the suffix. So the model's
    own EOS stays a sampled token while Qwen's ``\\n`` after it belongs to the environment.
    """
    if not tool_messages:
        raise ValueError("tool_suffix_ids needs at least one tool message")
    [(ids, _)] = _tool_suffixes(tokenizer, [tool_messages], template, chat_template_kwargs or {})
    if ids is None:
        raise ValueError(
            f"{_template_name(tokenizer, template)} renders a tool result after a different prefix "
            "than the assistant turn before it (TRL: 'the EOS-trimmed prefix IDs are not a prefix "
            "of the full IDs'); no token boundary between model and environment exists"
        )
    return ids


def assistant_ids(
    tokenizer: Any,
    history: list[Message],
    message: Message,
    tools: Tools | None = None,
    template: str | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> list[int]:
    """The ids a model emits for assistant ``message`` after ``history``: up to its EOS.

    This is the one step TRL never takes: the trainer keeps the tokens the model sampled, and
    never re-tokenises them. A finished conversation no longer has them, so the turn is
    rendered by the chat template (the text between the generation prompt and the turn's last
    EOS, reasoning block included) and encoded on its own, as a model emits it. The ids are
    TRL's whenever the model wrote the template's own rendering of its message, which is what a
    model trained on that template does; text the parser normalises (``"7"`` for an integer
    argument, ``\\u00e9`` escapes, spacing inside the JSON) comes back in its canonical form.
    """
    kwargs = chat_template_kwargs or {}
    tool_list = list(tools or []) or None
    [before] = _render(tokenizer, [history], template, kwargs, generation=True, tools=tool_list)
    [after] = _render(
        tokenizer, [[*history, message]], template, kwargs, generation=False, tools=tool_list
    )
    text = _turn_text(before, after, tokenizer.eos_token)
    if text is None:
        raise ValueError(
            f"{_template_name(tokenizer, template)} renders an assistant turn after a different "
            "prefix than its own generation prompt, so the boundary between prompt and "
            f"completion is not consistent: the generation prompt ends {before[-40:]!r}, the "
            f"rendered turn reads {after[len(before) - 40 : len(before) + 40]!r}"
        )
    return tokenizer.encode(text, add_special_tokens=False)


# -- building a finished conversation -------------------------------------------------------------


def build(
    tokenizer: Any,
    messages: list[Message],
    tools: Tools | type | Any | str | None = None,
    *,
    max_completion_length: int | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> Trajectory:
    """The ids and mask TRL's ``GRPOTrainer`` trains on for a finished tool-calling conversation.

    ``messages``: the prompt (every message before the first assistant turn, the env's reset
    text included), then assistant turns, each followed by the tool messages answering its
    calls; the shape TRL's ``completions`` have. ``tools``: what the prompt was rendered with,
    as TRL does per env: a list of functions or JSON schemas, an env class or instance, or a
    name in ``kit.envs.ENVS``. ``max_completion_length`` applies TRL's length budget: a tool
    block that would overflow it is dropped, a turn that overflows it is cut, and either ends
    the episode (the returned ``messages`` are the ones kept).

    The prompt and the tool blocks are built exactly as the trainer builds them (see
    :func:`prompt_ids`, :func:`tool_suffix_ids`); assistant turns are re-encoded from their
    messages (see :func:`assistant_ids`: identical to the trainer's when the model wrote the
    template's rendering of its message). ``tool_mask`` is 1 for assistant tokens, 0 for tool
    blocks. Raises ``ValueError`` for a conversation TRL cannot produce, or a template that
    gives no consistent boundary.

    Cost: the whole conversation is rendered once and cut at its message boundaries, each cut
    checked against the template's rendering of that one message, so time grows linearly with
    the turns. A template that renders some message differently inside the conversation than on
    its own is not prefix-preserving there: then every turn is rendered after its own history
    instead (:func:`assistant_ids`, quadratic in the turns), which gives the same ids wherever
    both apply, and raises where no consistent boundary exists.
    """
    messages = _checked_messages(messages)
    if max_completion_length is not None and max_completion_length < 1:
        raise ValueError(f"max_completion_length must be at least 1, got {max_completion_length}")
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    tool_list = _tool_list(tools)
    uses_tools = bool(tool_list) or any(m["role"] == "tool" for m in messages)
    template = chat_template(tokenizer, uses_tools)
    kwargs = chat_template_kwargs or {}
    sliced = _sliced_turns(tokenizer, messages, first, tool_list, template, kwargs)
    history = messages[:first]
    if sliced is not None:
        ids_prompt = sliced.prompt
    else:
        ids_prompt = prompt_ids(tokenizer, history, tool_list, template, kwargs)

    def turn_ids(index: int) -> list[int]:
        if sliced is not None:
            return sliced.turns[index]
        return assistant_ids(
            tokenizer, messages[:index], messages[index], tool_list, template, kwargs
        )

    def suffix_ids(index: int, block: list[Message]) -> list[int]:
        if sliced is not None:
            return sliced.suffixes[index]
        return tool_suffix_ids(tokenizer, block, template, kwargs)

    completion: list[int] = []
    mask: list[int] = []
    dropped = False
    i = first
    while i < len(messages):
        message = messages[i]
        ids = turn_ids(i)
        if max_completion_length is not None and len(completion) + len(ids) > max_completion_length:
            # TRL cuts the turn at the budget, and the episode ends with it (a turn cut to
            # nothing leaves no message)
            ids = ids[: max_completion_length - len(completion)]
            if ids:
                history.append(message)
                completion += ids
                mask += [1] * len(ids)
            break
        history.append(message)
        completion += ids
        mask += [1] * len(ids)
        i += 1
        block_end = i
        while block_end < len(messages) and messages[block_end]["role"] == "tool":
            block_end += 1
        block = messages[i:block_end]
        if not block:
            if i < len(messages):
                raise ValueError(
                    f"message {i} is a {messages[i]['role']!r} message after an assistant turn; "
                    "TRL's episodes continue only with the tool results of that turn's calls"
                )
            break
        if not message.get("tool_calls"):
            raise ValueError(
                f"message {i} is a tool result, but assistant message {i - 1} called no tool"
            )
        suffix = suffix_ids(i, block)
        if (
            max_completion_length is not None
            and len(completion) + len(suffix) > max_completion_length
        ):
            dropped = True  # TRL rolls the results back: the episode ends on the calling turn
            break
        history += block
        completion += suffix
        mask += [0] * len(suffix)
        i = block_end
    if not completion:
        raise ValueError("the conversation has no completion tokens")
    return Trajectory(
        messages=history,
        prompt_ids=ids_prompt,
        completion_ids=completion,
        tool_mask=mask,
        completion_mask=[1] * len(completion),
        tool_calls=tool_calls(history),
        truncated=dropped or is_truncated(completion, _stop_ids(tokenizer)),
    )


def rebuild_report(
    trained: Sequence[Trajectory],
    tokenizer: Any,
    tools: Tools | type | Any | str | None = None,
    *,
    max_completion_length: int | None = None,
) -> dict[str, Any]:
    """:func:`build` against trajectories a trainer trained on (``kit.capture.Capture``), each
    rebuilt from its messages alone: the check that this module's mask is the trainer's, on any
    tokenizer (the runbook runs it on every GRPO batch of a pretrained model).

    Returns ``trajectories``, ``tokens`` (prompt and completion, all of them), ``exact`` (prompt
    ids, completion ids and tool mask all equal) and ``other``: for each trajectory that is not,
    whether its prompt and the environment's tokens (each ``tool_mask == 0`` run) are still
    equal and the model's text is the same, and where the ids first differ. A model turn is
    rebuilt by re-encoding its message, so it comes back as sampled only where the model wrote
    the template's own rendering of it, tokenised as the tokenizer would; a sampled turn that is
    not (extra spaces in its JSON, another split of the same text) is one of ``other``.
    """
    report: dict[str, Any] = {"trajectories": 0, "tokens": 0, "exact": 0, "other": []}

    def runs(t: Trajectory, value: int) -> list[list[int]]:
        out: list[tuple[int, list[int]]] = []
        for bit, token in zip(t.tool_mask, t.completion_ids, strict=True):
            if out and out[-1][0] == bit:
                out[-1][1].append(token)
            else:
                out.append((bit, [token]))
        return [ids for bit, ids in out if bit == value]

    # A group's rollouts often play the same game word for word, and build is a pure function of
    # the messages: each distinct conversation is rendered once (most of a runbook's report).
    built_by_messages: dict[str, Trajectory | ValueError] = {}
    for sampled in trained:
        report["trajectories"] += 1
        report["tokens"] += len(sampled.prompt_ids) + len(sampled.completion_ids)
        key = json.dumps(sampled.messages, sort_keys=True, default=repr)
        if key not in built_by_messages:
            try:
                built_by_messages[key] = build(
                    tokenizer, sampled.messages, tools, max_completion_length=max_completion_length
                )
            except ValueError as error:
                built_by_messages[key] = error
        built = built_by_messages[key]
        if isinstance(built, ValueError):
            report["other"].append({"error": str(built)})
            continue
        if (built.prompt_ids, built.completion_ids, built.tool_mask) == (
            sampled.prompt_ids,
            sampled.completion_ids,
            sampled.tool_mask,
        ):
            report["exact"] += 1
            continue
        pairs = zip(built.completion_ids, sampled.completion_ids, strict=False)
        first = next(
            (i for i, (a, b) in enumerate(pairs) if a != b),
            min(len(built.completion_ids), len(sampled.completion_ids)),
        )
        report["other"].append(
            {
                "prompt_equal": built.prompt_ids == sampled.prompt_ids,
                "env_tokens_equal": runs(built, 0) == runs(sampled, 0),
                "model_text_equal": [tokenizer.decode(ids) for ids in runs(built, 1)]
                == [tokenizer.decode(ids) for ids in runs(sampled, 1)],
                "first_difference": first,
                "lengths": [len(built.completion_ids), len(sampled.completion_ids)],
                "sampled": tokenizer.decode(sampled.completion_ids[first : first + 12]),
                "rebuilt": tokenizer.decode(built.completion_ids[first : first + 12]),
            }
        )
    return report


@dataclass
class _Sliced:
    """The prompt's ids, every assistant turn's and every tool block's suffix, by message index."""

    prompt: list[int]
    turns: dict[int, list[int]]
    suffixes: dict[int, list[int]]  # by the index of the block's first tool message


def _sliced_turns(
    tokenizer: Any,
    messages: list[Message],
    first: int,
    tools: list[Any],
    template: str | None,
    kwargs: dict[str, Any],
) -> _Sliced | None:
    """:func:`build`'s pieces from one render of the whole conversation, or None where the
    template is not prefix-preserving at some message boundary of it.

    Why: rendering each turn after its whole history (what :func:`assistant_ids` does) costs
    time quadratic in the turns. A prefix-preserving template renders every history as a prefix
    of the full conversation, so each turn's text is a slice of one render: it starts where
    the generation prompt ends and ends at the turn's EOS, where TRL's tool suffix begins. To
    know where each message ends without rendering every prefix, each one is also rendered on
    its own (a turn as the last message after a dummy user turn, a tool block as TRL's
    ``_get_tool_suffix_ids`` renders it, in a few batched calls), and the pieces must then
    tile the full render exactly, one after the other. A message the template renders
    differently inside the conversation than alone (a turn marked as the last one, a tool
    result numbered by its place) is a boundary that is not prefix-preserving: None, and
    :func:`build` renders each turn after its history. TRL checks the same property on its
    dummy conversation only (``is_chat_template_prefix_preserving``).

    None also when the template raises on some message (a template may raise anything:
    ``raise_exception``, a filter's ``TypeError``) or TRL raises for a tool block: the per-turn
    renders then raise where the trainer would meet the problem, or not at all if the length
    budget ends the episode first. A conversation that is not TRL's shape gets pieces that do
    not tile, or is refused by :func:`build`'s loop where the per-turn construction refuses it.
    """
    turns = [i for i in range(first, len(messages)) if messages[i]["role"] == "assistant"]
    ends = [*turns[1:], len(messages)]
    blocks = {i: messages[i + 1 : end] for i, end in zip(turns, ends, strict=True) if end > i + 1}
    tool_list = list(tools) or None

    def render(conversations: list[list[Message]], **options: Any) -> list[str]:
        return _render(tokenizer, conversations, template, kwargs, **options)

    # a conversation that ends on tool results ends, as TRL's suffix does, on the generation prompt
    ends_on_tools = messages[-1]["role"] == "tool"
    try:
        [prompt] = render([messages[:first]], generation=True, tools=tool_list)
        [whole] = render([messages], generation=ends_on_tools, tools=tool_list)
        [opening] = render([[_DUMMY_USER]], generation=True)
        # each turn alone, as the last message: where the per-turn render cuts it
        closings = render([[_DUMMY_USER, messages[i]] for i in turns], generation=False)
        answered = _tool_suffixes(tokenizer, list(blocks.values()), template, kwargs)
        suffixes = dict(zip(blocks, answered, strict=True))
    except Exception:  # noqa: BLE001 - the template refused a message; see the docstring
        return None
    if not whole.startswith(prompt):
        return None
    eos = tokenizer.eos_token
    texts: list[str] = []
    position = len(prompt)
    for i, closing in zip(turns, closings, strict=True):
        text = _turn_text(opening, closing, eos)
        if text is None:
            return None
        if i == turns[-1] and i not in blocks:
            # the last message: the per-turn path renders exactly `whole` and cuts its end
            if _through_last_eos(whole[position:], eos) != text:
                return None
        elif not whole.startswith(text, position):
            return None
        texts.append(text)
        position += len(text)
        if i in blocks:
            ids, suffix_text = suffixes[i]
            if ids is None or suffix_text is None or not whole.startswith(suffix_text, position):
                return None
            position += len(suffix_text)
    # the prompt's ids as `prompt_ids` makes them: its render, tokenised as one text
    ids_prompt, *ids_turns = _encode(tokenizer, [prompt, *texts])
    return _Sliced(
        prompt=ids_prompt,
        turns=dict(zip(turns, ids_turns, strict=True)),
        suffixes={i + 1: suffixes[i][0] for i in blocks},
    )


_DUMMY_USER: Message = {"role": "user", "content": "dummy"}


def _tool_call_dummy(name: str) -> list[Message]:
    """TRL's dummy conversation before a tool block whose first result came from ``name``."""
    call = {"type": "function", "function": {"name": name, "arguments": {}}}
    return [_DUMMY_USER, {"role": "assistant", "content": "", "tool_calls": [call]}]


def _tool_suffixes(
    tokenizer: Any, blocks: list[list[Message]], template: str | None, kwargs: dict[str, Any]
) -> list[tuple[list[int] | None, str | None]]:
    """TRL's ``_get_tool_suffix_ids`` for every block, in two batched renders: ``(ids, text)``.

    ``ids`` is None where TRL raises (the EOS-trimmed dummy is not a prefix of the dummy with
    the block); ``text`` is the suffix as text, cut after the last EOS string where TRL cuts
    after the last EOS id (None where the text has no EOS string, or does not start with the
    dummy's): it locates the block in a render, while ``ids`` are what the trainer appends.
    """
    names = list(dict.fromkeys(block[0]["name"] for block in blocks))
    dummies = [_tool_call_dummy(name) for name in names]
    answered = [_tool_call_dummy(block[0]["name"]) + block for block in blocks]
    dummies = _render(tokenizer, dummies, template, kwargs, generation=False)
    fulls = _render(tokenizer, answered, template, kwargs, generation=True)
    encoded = _encode(tokenizer, dummies + fulls)
    eos, eos_id = tokenizer.eos_token, tokenizer.eos_token_id
    trimmed: dict[str, tuple[list[int], str | None]] = {}
    for name, text, ids in zip(names, dummies, encoded[: len(names)], strict=True):
        if eos_id in ids:
            ids = ids[: len(ids) - ids[::-1].index(eos_id)]
            cut = text.rfind(eos) if eos else -1
            text = text[: cut + len(eos)] if cut >= 0 else None
        trimmed[name] = (ids, text)
    suffixes: list[tuple[list[int] | None, str | None]] = []
    for block, full, full_ids in zip(blocks, fulls, encoded[len(names) :], strict=True):
        prefix_ids, prefix = trimmed[block[0]["name"]]
        if full_ids[: len(prefix_ids)] != prefix_ids:
            suffixes.append((None, None))
            continue
        text = full[len(prefix) :] if prefix is not None and full.startswith(prefix) else None
        suffixes.append((full_ids[len(prefix_ids) :], text))
    return suffixes


def _render(
    tokenizer: Any,
    conversations: list[list[Message]],
    template: str | None,
    kwargs: dict[str, Any],
    *,
    generation: bool,
    tools: list[Any] | None = None,
) -> list[str]:
    """Each conversation rendered as text, all in one ``apply_chat_template`` call."""
    if not conversations:
        return []
    return list(
        tokenizer.apply_chat_template(
            conversations,
            tools=tools,
            chat_template=template,
            add_generation_prompt=generation,
            tokenize=False,
            **kwargs,
        )
    )


def _encode(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Each text's ids as ``apply_chat_template(tokenize=True)`` and ``encode`` give them."""
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def _turn_text(before: str, after: str, eos: str | None) -> str | None:
    """The text a turn adds to ``before`` (rendered with the generation prompt), up to its last
    EOS; None when ``after`` (the render with the turn) does not start with ``before``."""
    if not after.startswith(before):
        return None
    return _through_last_eos(after[len(before) :], eos)


def _through_last_eos(text: str, eos: str | None) -> str:
    """``text`` up to its last EOS: the model's own EOS ends its turn, what follows is not its."""
    if eos and eos in text:
        return text[: text.rindex(eos) + len(eos)]
    return text


# -- small shared helpers ------------------------------------------------------------------------


def _tool_list(tools: Tools | type | Any | str | None) -> list[Any]:
    if tools is None:
        return []
    if isinstance(tools, str):
        if tools not in ENVS:
            raise ValueError(f"unknown env {tools!r}; choose one of {sorted(ENVS)}")
        tools = ENVS[tools]
    if isinstance(tools, type):
        tools = tools()
    if isinstance(tools, (list, tuple)):
        return list(tools)
    if callable(getattr(tools, "reset", None)):
        return env_tools(tools)
    raise ValueError(
        "tools must be a list of functions or JSON schemas, an env class or instance, or an env "
        f"name; got {type(tools).__name__}"
    )


def _checked_messages(messages: list[Message]) -> list[Message]:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of chat messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise ValueError(f"message {i} is not a chat message with a 'role': {message!r:.80}")
    roles = [m["role"] for m in messages]
    if "assistant" not in roles:
        raise ValueError("the conversation has no assistant turn: nothing was generated")
    if roles.index("assistant") == 0:
        raise ValueError("the conversation starts with an assistant turn: there is no prompt")
    first = roles.index("assistant")
    bad = [i for i, role in enumerate(roles[first:], first) if role not in ("assistant", "tool")]
    if bad:
        raise ValueError(
            f"message {bad[0]} has role {roles[bad[0]]!r} after the first assistant turn; TRL's "
            "episodes hold only assistant turns and tool results after the prompt"
        )
    return [dict(m) for m in messages]


def _stop_ids(tokenizer: Any) -> set[int]:
    return {tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}


def _template_name(tokenizer: Any, template: str | None) -> str:
    text = template if template is not None else tokenizer.chat_template
    if isinstance(text, dict):
        text = text.get("default", "")
    import trl

    for path in sorted((Path(trl.__file__).parent / "chat_templates").glob("*.jinja")):
        if path.read_text(encoding="utf-8") == text:
            return f"the chat template {path.name} (TRL's)"
    digest = hashlib.sha1(str(text).encode()).hexdigest()[:10]
    return f"the chat template of {_tokenizer_name(tokenizer)} (custom, sha1 {digest})"


def _tokenizer_name(tokenizer: Any) -> str:
    return getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
