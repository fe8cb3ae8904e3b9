"""save_html: a batch of trajectories as one standalone page that opens in seconds at any size.

Why not the notebook view once per rollout, as before: that view spends about 230 bytes and
3 to 4 DOM nodes on every token (inline styles and a tooltip on each), so a GRPO batch of 64
rollouts of 10,000 tokens made a 150 MB page of about 2 M nodes that Chromium took 1.5 to 2
minutes to open (GitHub issue 10). This page, for the same batch, is 2.9 MB of 36,000 nodes and
opens in under a second; switching rollouts takes a fraction of one. It:

* shows one rollout at a time, picked in a selector or with previous / next, as the inspector
  does: the browser holds the DOM of one rollout, whatever the batch;
* stores every rollout's tokens once, as JSON in the page (``_encode``): the batch's distinct
  (id, text) pairs once, most frequent first, each rollout as indices into them, its provenance
  as runs; ``page.js``, inline, renders the picked rollout from it on demand;
* writes a token as its classes, text and tooltip only, the colours once in a <style> block
  (a standalone file keeps it, unlike a notebook output): ``token_view(..., inline=False)``;
* is one file that works offline: no CDN, no request of any kind;
* shows the first rollout with scripts off too: Python renders it into the page, and a notice
  says that the others need scripts. A single trajectory is that view alone, with no script.

``python benchmarks/viz.py`` measures it: size, nodes and Chromium's time to open and switch.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kit.trajectory import Trajectory
from kit.viz.render import (
    FONT,
    RULES,
    call_mark,
    check_view_inputs,
    end_mark,
    escape_attribute,
    frame,
    has_value,
    legend,
    outcome,
    prompt_mark,
    summary,
    summary_line,
    token_texts,
    token_view_of_texts,
)

SCRIPT = (Path(__file__).parent / "page.js").read_text(encoding="utf-8")
# content-visibility: the turns out of sight are neither laid out nor painted until scrolled to,
# which halves the time to open a 50k-token rollout and to switch to a 10k-token one.
CSS = "".join(f".{name}{{{rule}}}" for name, rule in RULES.items()) + (
    f".kit-nav{{position:sticky;top:0;z-index:1;padding:6px 0;background:Canvas;{FONT}}}"
    ".kit-nav select{max-width:70vw}"
    ".kit-page .kit-turn{content-visibility:auto;contain-intrinsic-size:auto 300px}"
)


def _kinds(trajectory: Trajectory) -> list[int]:
    """Each token's kind as ``page.js``'s ``KINDS`` codes it: 0 prompt, 1 model (trained), 2 env,
    3 untrained (sampled, masked by ``completion_mask``); ``loss_mask`` is 1 exactly on 1."""
    completion_mask = trajectory.completion_mask or [1] * len(trajectory.completion_ids)
    return [0] * len(trajectory.prompt_ids) + [
        (1 if trained else 3) if sampled else 2
        for sampled, trained in zip(trajectory.tool_mask, completion_mask, strict=True)
    ]


def _runs(codes: list[int]) -> list[list[int]]:
    """``[[code, count], ...]``: a rollout's provenance changes only at turn boundaries."""
    runs: list[list[int]] = []
    for code in codes:
        if runs and runs[-1][0] == code:
            runs[-1][1] += 1
        else:
            runs.append([code, 1])
    return runs


def _encode(items: list[Trajectory], texts: list[list[str]]) -> dict[str, Any]:
    """The page's data: ``vocab`` and, per rollout, what ``page.js`` needs to render it."""
    pairs = [
        list(zip(map(int, t.input_ids), shown, strict=True))
        for t, shown in zip(items, texts, strict=True)
    ]
    # Most frequent first: the indices of common tokens, most of any rollout, are 1 or 2 digits.
    order = [pair for pair, _ in Counter(p for rollout in pairs for p in rollout).most_common()]
    index = {pair: n for n, pair in enumerate(order)}
    vocab = [
        [token_id, text] if repr(text) == f"'{text}'" else [token_id, text, repr(text)]
        for token_id, text in order
    ]
    rollouts = []
    for trajectory, rollout in zip(items, pairs, strict=True):
        calls: dict[int, list[tuple[str, str, str]]] = {}
        for call in trajectory.tool_calls:
            calls.setdefault(call.turn or 0, []).append(call_mark(call))
        rollouts.append(
            {
                "summary": summary(trajectory),
                "prompt": prompt_mark(trajectory),
                "end": end_mark(trajectory),
                "tokens": [index[pair] for pair in rollout],
                "runs": _runs(_kinds(trajectory)),
                "calls": calls,
            }
        )
    return {"vocab": vocab, "rollouts": rollouts}


def _label(i: int, trajectory: Trajectory) -> str:
    reward = f"{trajectory.reward:+.3g}" if has_value(trajectory.reward) else "–"
    return (
        f"rollout {i} · {trajectory.env or '?'} · {outcome(trajectory)} · reward {reward} · "
        f"{len(trajectory.input_ids)} tokens"
    )


def _page(trajectories: Trajectory | Iterable[Trajectory], tokenizer: Any) -> str:
    """The standalone HTML page of one trajectory or a batch (see the module docstring)."""
    items = [trajectories] if isinstance(trajectories, Trajectory) else list(trajectories)
    if not items:
        raise ValueError("save_html needs at least one trajectory")
    for trajectory in items:
        check_view_inputs(trajectory, tokenizer)
    texts = [token_texts(t.input_ids, tokenizer) for t in items]
    first = token_view_of_texts(items[0], texts[0], inline=False)
    view = frame(f'{summary_line(items[0])}{legend()}<div class="kit-tokens">{first}</div>')
    body = f'<div class="kit-page">{view}</div>'
    if len(items) > 1:
        options = "".join(
            f'<option value="{i}">{escape_attribute(_label(i, t))}</option>'
            for i, t in enumerate(items)
        )
        nav = (
            '<nav class="kit-nav" hidden><button type="button" id="kit-prev">◀ previous</button> '
            f'<select id="kit-pick">{options}</select> '
            '<button type="button" id="kit-next">next ▶</button></nav>'
        )
        notice = (
            f'<noscript><p style="{FONT}"><b>Scripts are off:</b> this is the first of '
            f"{len(items)} rollouts. The others are in this file as data; open it with "
            "JavaScript on to page through them.</p></noscript>"
        )
        data = json.dumps(_encode(items, texts), ensure_ascii=False, separators=(",", ":"))
        # "<" as \u003c, still JSON: no token text can end the script element or open a comment.
        data = data.replace("<", "\\u003c")
        body = (
            f'<div class="kit-page">{nav}{notice}{view}</div>'
            f'<script type="application/json" id="kit-data">{data}</script>'
            f"<script>{SCRIPT}</script>"
        )
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>kit trajectories</title>'
        f'<meta name="color-scheme" content="light dark"><style>{CSS}</style></head>'
        f'<body style="margin:16px">{body}</body></html>\n'
    )


def save_html(
    trajectories: Trajectory | Iterable[Trajectory], tokenizer: Any, path: str | Path
) -> Path:
    """Write one trajectory, or a batch to page through, to a standalone HTML file."""
    target = Path(path)
    target.write_text(_page(trajectories, tokenizer), encoding="utf-8")
    return target
