"""HTML views of a trajectory: every token coloured by where it came from and whether it is trained.

Why this exists: the failures that waste a multi-turn RL run are invisible in the logs. A tool
result that leaks into the loss, a mask that is off by one at a turn boundary, an episode cut by
the length budget: each shows at a glance when the tokens are painted by provenance (``prompt``,
``model``, ``env``) and by the loss mask, with every token's id and exact text on hover.

Where the HTML must render decides how it is written:

* inline ``style`` attributes, no ``<style>`` block and no script: JupyterLab strips ``<style>``
  from untrusted outputs (a notebook executed elsewhere, then opened), GitHub strips it always,
  while both keep inline colours, borders and ``title`` tooltips;
* translucent backgrounds over the inherited text colour, so the same markup reads on light
  pages and on JupyterLab's, VS Code's and Colab's dark themes;
* every text escaped, and whitespace drawn (``·`` for a space, ``↵`` for a newline, ``⇥`` for a
  tab), because a token boundary inside whitespace is exactly what a template bug looks like.

A standalone file keeps a <style> block and a script: ``save_html``'s page (``kit.viz.page``)
renders the same markup with its styles in one place, one rollout at a time.
"""

from __future__ import annotations

import html as _html
import json
import math
import unicodedata
from collections.abc import Sequence
from typing import Any

from kit.trajectory import ToolCall, Trajectory

# Background and border of each kind of token; alpha keeps them legible on light and dark pages.
# Blue and orange stay apart for the common colour-vision deficiencies.
COLOURS = {
    "prompt": ("rgba(128,128,128,0.16)", "rgba(128,128,128,0.55)"),
    "model": ("rgba(56,132,255,0.30)", "rgba(56,132,255,0.85)"),
    "env": ("rgba(255,150,0,0.28)", "rgba(255,150,0,0.85)"),
    "untrained": ("rgba(56,132,255,0.08)", "currentColor"),
}
LEGEND = {
    "prompt": "prompt: context, no loss",
    "model": "model: sampled, trained (loss on)",
    "env": "env: template and tool result, masked (tool_mask 0)",
    "untrained": "model, not trained (completion_mask 0, e.g. truncated)",
}
OUTCOMES = ("won", "lost", "unfinished", "truncated")

# The monospace font of every view, inline and in save_html's page styles.
FONT = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px"
_BADGE = (
    "display:inline-block;margin:0 4px 2px 0;padding:0 5px;border-radius:8px;font-size:11px;"
    "border:1px solid rgba(128,128,128,0.6);background:rgba(128,128,128,0.12)"
)
_WHITESPACE = {" ": "·", "\t": "⇥", "\r": "␍"}
# The style of each class of the token view. ``inline=True`` (every view shown in a notebook)
# writes it on each element, as the module docstring says it must; ``save_html``'s page writes it
# once, in a <style> block a standalone file keeps, and its elements carry their classes only:
# the rules are most of a token's bytes. Base rules come before the variants that override them.
RULES = {
    **{
        f"kit-{kind}": f"background:{background};"
        f"border:1px {'dashed' if kind == 'untrained' else 'solid'} {border}"
        for kind, (background, border) in COLOURS.items()
    },
    "kit-tok": "border-radius:3px;padding:0 1px",
    "kit-dim": "opacity:0.45",
    "kit-mark": _BADGE,
    "kit-mark-error": "border-color:rgba(220,53,69,0.9)",
    "kit-mark-end": "font-weight:bold",
    "kit-turn": "border-left:3px solid rgba(128,128,128,0.4);padding:2px 0 2px 6px;margin:4px 0",
}


def outcome(trajectory: Trajectory) -> str:
    """``truncated`` (cut by the budget), ``won``, ``lost`` (done, not won) or ``unfinished``."""
    if trajectory.truncated:
        return "truncated"
    if trajectory.won:
        return "won"
    return "lost" if trajectory.done else "unfinished"


def token_texts(ids: Sequence[int], tokenizer: Any) -> list[str]:
    """The text each token adds to the decoded sequence, in order; ``"".join`` gives the decode.

    Decoding tokens one at a time lies twice: a byte-level token that holds half of a UTF-8
    character decodes to U+FFFD, and SentencePiece drops a token's leading space when it
    stands alone. So decode growing windows and keep the difference, as streaming detokenizers
    do: a split character is shown on the token that completes it.
    """
    ids = list(ids)
    texts: list[str] = []
    base, shown = 0, ""  # decoding restarts at `base`; `shown` is the text already handed out
    for i in range(len(ids)):
        full = _decode(tokenizer, ids[base : i + 1])
        last = i == len(ids) - 1
        complete = full if last else full.rstrip("\ufffd")  # a split character waits for its end
        texts.append(
            complete[len(shown) :] if complete.startswith(shown) else _decode(tokenizer, [ids[i]])
        )
        shown = complete
        if complete == full:  # no character pending: restart with a little context, stay O(n)
            base = max(0, i + 1 - 2)
            shown = _decode(tokenizer, ids[base : i + 1])
    return texts


def _decode(tokenizer: Any, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _attrs(classes: str, inline: bool) -> str:
    """The ``class`` attribute and, ``inline``, a ``style`` attribute with those classes' rules."""
    if not inline:
        return f'class="{classes}"'
    return f'class="{classes}" style="{";".join(RULES[c] for c in classes.split() if c in RULES)}"'


def _visible(text: str, inline: bool = True) -> str:
    """Escaped HTML for a token's text with its whitespace and control characters drawn."""
    dim = f"<span {_attrs('kit-dim', inline)}>"
    if not text:  # the first bytes of a character that a later token completes
        return f"{dim}◌</span>"
    out = []
    for char in text:
        if char == "\n":
            out.append(f"{dim}↵</span><br>")
        elif char in _WHITESPACE:
            out.append(f"{dim}{_WHITESPACE[char]}</span>")
        elif unicodedata.category(char) == "Cc":
            out.append(f"{dim}\\x{ord(char):02x}</span>")
        else:
            out.append(_html.escape(char))
    return "".join(out)


def escape_attribute(text: str) -> str:
    """``text`` escaped for a double-quoted attribute; ``'`` as itself (in every token's
    tooltip, ``&#x27;`` twice was a tenth of its bytes)."""
    return _html.escape(text, quote=False).replace('"', "&quot;")


def has_value(value: float | None) -> bool:
    """Whether a reward or advantage was given: TRL writes "no opinion" as None or NaN."""
    return value is not None and not math.isnan(value)


def _number(value: float | None) -> str:
    return f"{value:+.3g}" if has_value(value) else "–"


def summary(trajectory: Trajectory) -> str:
    """One line: env, task, reward, advantage, outcome and token counts."""
    counts = trajectory.counts()
    trained = sum(trajectory.loss_mask)
    task = ", ".join(f"{k}={v!r}" for k, v in trajectory.task.items()) or "no task columns"
    parts = [
        trajectory.env or "env?",
        task,
        f"reward {_number(trajectory.reward)}",
        f"advantage {_number(trajectory.advantage)}",
        outcome(trajectory),
        f"{len(trajectory.input_ids)} tokens: {counts['prompt']} prompt, {counts['model']} model "
        f"({trained} trained), {counts['env']} env",
    ]
    return " · ".join(parts)


def legend() -> str:
    """The colour key, as inline HTML."""
    items = []
    for kind, label in LEGEND.items():
        background, border = COLOURS[kind]
        style = "dashed" if kind == "untrained" else "solid"
        swatch = (
            f'<span style="display:inline-block;width:2.2em;margin-right:4px;border-radius:3px;'
            f'background:{background};border:1px {style} {border}">&nbsp;</span>'
        )
        items.append(
            f'<span style="margin-right:14px;white-space:nowrap">{swatch}{escape_attribute(label)}</span>'
        )
    return f'<div class="kit-legend" style="margin:4px 0 6px 0">{"".join(items)}</div>'


def _badge(text: str, title: str = "", variant: str = "", inline: bool = True) -> str:
    tip = f' title="{escape_attribute(title)}"' if title else ""
    classes = f"kit-mark {variant}" if variant else "kit-mark"
    return f"<span {_attrs(classes, inline)}{tip}>{_html.escape(text)}</span>"


def call_mark(call: ToolCall) -> tuple[str, str, str]:
    """A tool call's badge: its text, its tooltip and its variant class (``""`` or an error)."""
    name = call.tool or "?"
    arguments = call.arguments or {}
    shown = (
        ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        if isinstance(arguments, dict)
        else str(arguments)
    )
    error, result = call.error, call.result
    if error is not None:
        return f"✗ {name}({shown})", f"error: {error}", "kit-mark-error"
    if result is None:  # the tool-call cap or the length budget ended the episode first
        return f"… {name}({shown}) not run", "the episode ended before this call ran", ""
    return f"✓ {name}({shown})", f"result: {result!r}", ""


def _call_badge(call: ToolCall, inline: bool = True) -> str:
    return _badge(*call_mark(call), inline=inline)


def _token(token_id: int, text: str, kind: str, trained: bool, inline: bool) -> str:
    source = "model" if kind == "untrained" else kind
    loss = "loss on" if trained else "loss off"
    if kind == "untrained":
        loss += " (completion_mask 0)"
    title = f"id {token_id} · {text!r} · {source} · {loss}"
    # <wbr>: the drawn whitespace leaves a line of tokens no break opportunity of its own.
    return (
        f'<span {_attrs(f"kit-tok kit-{kind}", inline)} title="{escape_attribute(title)}">'
        f"{_visible(text, inline)}</span><wbr>"
    )


def prompt_mark(trajectory: Trajectory) -> str:
    """The text of the badge that folds the prompt."""
    return f"prompt · {len(trajectory.prompt_ids)} tokens (click to unfold)"


def end_mark(trajectory: Trajectory) -> str:
    """The text of the badge after the last turn: reward, each named reward, advantage, outcome."""
    ending = [f"reward {_number(trajectory.reward)}"]
    ending += [f"{name} {_number(value)}" for name, value in trajectory.rewards.items()]
    ending += [f"advantage {_number(trajectory.advantage)}", outcome(trajectory)]
    return " · ".join(ending)


def token_view(trajectory: Trajectory, tokenizer: Any, *, inline: bool = True) -> str:
    """The tokens of ``prompt_ids + completion_ids`` in turns, each with its marks, as HTML.

    ``inline=False`` leaves the styles out (see ``RULES``), for a page that has them in a <style>
    block; ``kit/viz/page.js`` renders a rollout to the same markup.
    """
    return token_view_of_texts(trajectory, token_texts(trajectory.input_ids, tokenizer), inline)


def token_view_of_texts(trajectory: Trajectory, texts: Sequence[str], inline: bool) -> str:
    """``token_view`` from each token's text, already decoded (``token_texts``): a page that
    decodes a batch at once renders each rollout without decoding it again."""
    ids = trajectory.input_ids
    n_prompt = len(trajectory.prompt_ids)
    completion_mask = trajectory.completion_mask or [1] * len(trajectory.completion_ids)
    calls: dict[int, list[ToolCall]] = {}
    for call in trajectory.tool_calls:
        calls.setdefault(call.turn or 0, []).append(call)

    turns: list[list[str]] = [[]]
    previous = "prompt"
    for i, (token_id, text, source) in enumerate(zip(ids, texts, trajectory.sources, strict=True)):
        if source == "model" and previous != "model":
            turns.append([_badge(f"turn {len(turns)}", inline=inline)])
        if source == "env" and previous == "model":  # its tool calls ran between these two tokens
            turns[-1].extend(_call_badge(call, inline) for call in calls.get(len(turns) - 1, []))
        kind = source
        trained = False
        if i >= n_prompt and source == "model":
            trained = bool(completion_mask[i - n_prompt])
            kind = "model" if trained else "untrained"
        turns[-1].append(_token(token_id, text, kind, trained, inline))
        previous = source
    if previous == "model":  # the last turn had no env text after it (the episode stopped)
        turns[-1].extend(_call_badge(call, inline) for call in calls.get(len(turns) - 1, []))

    # The prompt (system text, tool schemas, the first observation) is most of a short episode
    # and the same across its group: folded by default, one click away, no script needed.
    prompt = _badge(prompt_mark(trajectory), inline=inline)
    blocks = [
        f'<details {_attrs("kit-turn", inline)}><summary style="cursor:pointer">{prompt}'
        f"</summary>{''.join(turns[0])}</details>"
    ]
    blocks += [f"<div {_attrs('kit-turn', inline)}>{''.join(parts)}</div>" for parts in turns[1:]]
    end = _badge(end_mark(trajectory), variant="kit-mark-end", inline=inline)
    blocks.append(f'<div class="kit-end">{end}</div>')
    return "".join(blocks)


def frame(inner: str) -> str:
    """Wrap view HTML in the kit's outer element (its font, line height and CSS class)."""
    return f'<div class="kit-viz" style="{FONT};line-height:1.9">{inner}</div>'


def html(trajectory: Trajectory, tokenizer: Any) -> str:
    """A self-contained HTML view of one trajectory: summary, legend and tokens by provenance."""
    check_view_inputs(trajectory, tokenizer)
    return frame(summary_line(trajectory) + legend() + token_view(trajectory, tokenizer))


def summary_line(trajectory: Trajectory) -> str:
    """The view's first line: ``summary(trajectory)`` in bold, as HTML."""
    line = _html.escape(summary(trajectory))
    return f'<div class="kit-summary" style="font-weight:bold">{line}</div>'


def chat_view(trajectory: Trajectory) -> str:
    """The conversation as messages (roles, text, tool calls), as HTML."""
    if not isinstance(trajectory, Trajectory):
        raise ValueError(f"expected a kit.trajectory.Trajectory, got {type(trajectory).__name__}")
    colours = {"assistant": COLOURS["model"], "tool": COLOURS["env"]}
    rows = []
    for message in trajectory.messages:
        role = str(message.get("role", "?"))
        background, border = colours.get(role, COLOURS["prompt"])
        label = role if role != "tool" else f"tool · {message.get('name', '?')}"
        body = _html.escape(_content_text(message.get("content")))
        for call in message.get("tool_calls") or []:
            function = call.get("function", call)
            arguments = json.dumps(function.get("arguments", {}), ensure_ascii=False)
            text = f"→ {function.get('name', '?')}({arguments})"
            body += f'<div style="opacity:0.85">{_html.escape(text)}</div>'
        rows.append(
            f'<div class="kit-msg kit-msg-{escape_attribute(role)}" style="background:{background};'
            f'border-left:3px solid {border};border-radius:3px;margin:4px 0;padding:3px 6px">'
            f'<div style="font-weight:bold;font-size:11px">{_html.escape(label)}</div>'
            f'<div style="white-space:pre-wrap">{body}</div></div>'
        )
    # An explicit line height: ipywidgets' HTML widget sets one meant for a single-line label.
    return f'<div class="kit-chat" style="{FONT};line-height:1.45">{"".join(rows)}</div>'


def _content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if part.get("type") == "text" else f"[{part.get('type', '?')}]"
            for part in content
            if isinstance(part, dict)
        )
    return str(content)


def state_view(trajectory: Trajectory, index: int) -> str:
    """The env's state after turn ``index + 1`` (``trajectory.states[index]``), as HTML.

    The state is the env's whole transcript so far, so the newest text sits at its end. The
    view shows what this turn added first, with the whole transcript folded below it.
    """
    if not 0 <= index < len(trajectory.states):
        raise ValueError(
            f"state {index} out of range: the trajectory has {len(trajectory.states)} states"
        )
    calls = "".join(_call_badge(call) for call in trajectory.tool_calls if call.turn == index + 1)
    head = f"<div>{_badge(f'after turn {index + 1} of {len(trajectory.states)}')}{calls}</div>"
    pre = '<pre style="margin:4px 0;white-space:pre-wrap;line-height:1.25">'
    state = trajectory.states[index]
    if state is None:
        body = f"{pre}(no state recorded)</pre>"
    else:
        before = trajectory.states[index - 1] if index else _reset_text(trajectory, state)
        added = state[len(before) :] if before and state.startswith(before) else state
        body = f"{pre}{_html.escape(added) or '(nothing new)'}</pre>"
        if added != state:
            body += (
                f'<details><summary style="cursor:pointer">{_badge("whole transcript")}</summary>'
                f"{pre}{_html.escape(state)}</pre></details>"
            )
    return f'<div class="kit-state" style="{FONT};line-height:1.45">{head}{body}</div>'


def _reset_text(trajectory: Trajectory, state: str) -> str:
    """The env's first observation: TRL appends it to the prompt's last message, and the env's
    transcript starts with it. So it is the longest end of that message that starts ``state``."""
    prompt = []
    for message in trajectory.messages:
        if message.get("role") == "assistant":
            break
        prompt.append(message)
    if not prompt:
        return ""
    text = _content_text(prompt[-1].get("content"))
    for start in range(max(0, len(text) - len(state)), len(text)):
        if state.startswith(text[start:]):
            return text[start:]
    return ""


def check_view_inputs(trajectory: Any, tokenizer: Any) -> None:
    """``ValueError`` unless ``trajectory`` is a ``Trajectory`` with token ids and ``tokenizer``
    can decode: every token view checks its inputs so, before it renders anything."""
    if not isinstance(trajectory, Trajectory):
        raise ValueError(f"expected a kit.trajectory.Trajectory, got {type(trajectory).__name__}")
    if not trajectory.input_ids:
        raise ValueError(
            "this episode has no token ids (an endpoint's, evaluated without a tokenizer): pass "
            "the served model's tokenizer to kit.evaluate.evaluate, or read it with "
            "kit.viz.chat_view or kit.viz.inspector"
        )
    if not callable(getattr(tokenizer, "decode", None)):
        raise ValueError(
            f"tokenizer must have a decode(ids) method; got {type(tokenizer).__name__}"
        )


class TrajectoryView:
    """Displays as the HTML view in any notebook front end (``_repr_html_``)."""

    def __init__(self, trajectory: Trajectory, tokenizer: Any) -> None:
        self.html = html(trajectory, tokenizer)

    def _repr_html_(self) -> str:
        return self.html


def show(trajectory: Trajectory, tokenizer: Any) -> TrajectoryView:
    """Display the HTML view of ``trajectory`` in the running notebook; return the view."""
    from IPython.display import display

    view = TrajectoryView(trajectory, tokenizer)
    display(view)
    return view
