"""kit.viz on real episodes: the HTML shows every token once, with its true id, text and mask.

Two sources of trajectories, both real: episodes played on the envs and tokenized by
``kit.masks.build`` (TRL's own construction of ids and ``tool_mask``, NOTES §1) with the tiny
model's tokenizer, and a batch captured by ``kit.capture.Capture`` from a real ``GRPOTrainer``
step on CPU (only the model's sampling is scripted). The HTML is read back with the standard
library's parser, so an unescaped ``<tool_call>`` or a lost token fails the tests.
"""

from __future__ import annotations

import collections
import dataclasses
import html as _html
import itertools
import json
import math
import re
from html.parser import HTMLParser
from typing import Any

import pytest

pytest.importorskip("trl")

import kit.viz as viz  # noqa: E402
from kit.envs import ENVS  # noqa: E402
from kit.masks import build  # noqa: E402
from kit.models import tiny_tokenizer  # noqa: E402
from kit.trajectory import Trajectory  # noqa: E402
from tests.scripted import tool_call  # noqa: E402

PROMPT = "Play the game with the tools.\n\n"
_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


def play_episode(
    tokenizer: Any,
    env: str,
    task: dict[str, Any],
    replies: list[str],
    budget: int | None = None,
    advantage: float | None = None,
) -> Trajectory:
    """Play ``replies`` on ``ENVS[env]``; ids and masks as ``GRPOTrainer`` builds them.

    With ``budget`` the episode gets TRL's length budget (``max_completion_length``) and, as
    with ``mask_truncated_completions=True``, a cut episode is not trained at all.
    """
    game = ENVS[env]()
    messages = [{"role": "user", "content": PROMPT + game.reset(**task)}]
    states = []
    for reply in replies:
        calls = [json.loads(text) for text in _CALL.findall(reply)]
        messages.append(
            {
                "role": "assistant",
                "content": _CALL.sub("", reply).strip(),
                "tool_calls": [{"type": "function", "function": call} for call in calls],
            }
        )
        for call in calls:
            try:
                result = getattr(game, call["name"])(**call["arguments"])
            except ValueError as error:  # what TRL shows the model for a failing tool
                result = {"error": str(error)}
            messages.append({"role": "tool", "name": call["name"], "content": str(result)})
        states.append(game.transcript)  # as Capture records it: after each turn's calls
        if not calls:
            break
    built = build(tokenizer, messages, game, max_completion_length=budget)
    turns = sum(message["role"] == "assistant" for message in built.messages)
    return dataclasses.replace(
        built,
        completion_mask=[0] * len(built.completion_ids) if built.truncated else None,
        env=env,
        task=dict(task),
        states=states[:turns],
        reward=game.reward,
        rewards={"env_reward": game.reward},
        advantage=advantage,
        done=game.done,
        won=game.won,
    )


# Four ways to play Catch with the ball in column 0, one per rollout of the captured group.
STAY = "".join(tool_call("stay") for _ in range(7))
CATCH_SCRIPTS = [
    [tool_call("move", direction="LEFT") + tool_call("move", direction="LEFT"), STAY, "Caught."],
    ["Right! " + tool_call("move", direction="RIGHT") * 2, STAY, "Missed."],
    [tool_call("move", direction="UP"), "I give up."],
    [tool_call("stay"), "Let me think about the ball. " * 120],  # runs past the budget
]


def captured_batch() -> tuple[list[Trajectory], Any]:
    """One real ``GRPOTrainer`` step through ``CatchEnv`` on CPU, captured: ``(batch, tokenizer)``.

    Four rollouts of one task; each plays one of ``CATCH_SCRIPTS`` (won, lost, a failed call,
    cut by the length budget with ``mask_truncated_completions``), so rewards and advantages
    differ within the group.
    """
    import tempfile

    from datasets import Dataset
    from trl import GRPOTrainer

    from kit.capture import Capture
    from kit.models import tiny_model
    from kit.train import grpo_config
    from tests.scripted import ScriptedGeneration

    model, tokenizer = tiny_model()
    fresh = itertools.cycle(CATCH_SCRIPTS)

    def script(text: str) -> list[str]:
        # A rollout's first reply names its script; a rollout with none yet takes the next one.
        return next((s for s in CATCH_SCRIPTS if s[0] in text), None) or next(fresh)

    ScriptedGeneration(tokenizer, script).install(model)
    rows = [{"prompt": [{"role": "user", "content": PROMPT}], "ball_col": 0}]

    def env_reward(environments: list[Any], **_: Any) -> list[float]:
        return [env.reward for env in environments]

    trainer = GRPOTrainer(
        model=model,
        args=grpo_config(
            tempfile.mkdtemp(prefix="kit-viz-"),
            max_steps=1,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=1024,
            mask_truncated_completions=True,
        ),
        reward_funcs=env_reward,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=ENVS["catch"],
    )
    with Capture(trainer) as capture:
        trainer.train()
    return capture.trajectories, tokenizer


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return tiny_tokenizer()


def sample_batch(tokenizer: Any) -> list[Trajectory]:
    """Won, lost, unfinished (with a failed call and split UTF-8 characters) and truncated."""
    won = play_episode(tokenizer, "catch", {"ball_col": 0}, CATCH_SCRIPTS[0], advantage=1.0)
    lost = play_episode(tokenizer, "catch", {"ball_col": 0}, CATCH_SCRIPTS[1], advantage=-1.0)
    echo = play_episode(
        tokenizer,
        "echo",
        {},
        [
            tool_call("echo", message='a <b> & "c"\n\ttab é 😀'),
            tool_call("echo", message=42),
            "Bye <&> héllo 😀",
        ],
    )
    cut = play_episode(
        tokenizer,
        "catch",
        {"ball_col": 4},
        [tool_call("move", direction="RIGHT"), tool_call("move", direction="UP"), "I will stay."],
        budget=120,
    )
    return [won, lost, echo, cut]


@pytest.fixture(scope="module")
def batch(tokenizer: Any) -> list[Trajectory]:
    return sample_batch(tokenizer)


_VOID = ("br", "wbr", "meta")  # elements without an end tag, in the views and the page


class _Tokens(HTMLParser):
    """Collects every token span of a view: its classes, title and drawn text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tokens: list[dict[str, str]] = []
        self.marks: list[str] = []
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            return
        classes = dict(attrs).get("class") or ""
        if "kit-tok" in classes.split():
            self.tokens.append({"class": classes, "title": dict(attrs)["title"] or "", "text": ""})
            self._stack.append("tok")
        elif "kit-mark" in classes.split():
            self.marks.append("")
            self._stack.append("mark")
        else:
            self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag not in _VOID:
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        if "tok" in self._stack:
            self.tokens[-1]["text"] += data
        elif "mark" in self._stack:
            self.marks[-1] += data


def _parse(markup: str) -> _Tokens:
    parser = _Tokens()
    parser.feed(markup)
    parser.close()
    assert parser._stack == [], "unbalanced tags"
    return parser


def _undraw(text: str) -> str:
    """The token text the drawn text stands for (the view draws whitespace visibly)."""
    if text == "◌":
        return ""
    return text.replace("↵", "\n").replace("·", " ").replace("⇥", "\t").replace("␍", "\r")


_TITLE = re.compile(r"^id (\d+) · (.*) · (prompt|model|env) · (loss on|loss off.*)$", re.S)


def test_token_texts_join_to_the_decode_and_split_characters_land_on_their_last_token(
    tokenizer, batch
):
    for trajectory in batch:
        ids = trajectory.input_ids
        texts = viz.token_texts(ids, tokenizer)
        assert len(texts) == len(ids)
        assert "".join(texts) == tokenizer.decode(ids, skip_special_tokens=False)
        for token_id, text in zip(ids, texts, strict=True):
            alone = tokenizer.decode([token_id], skip_special_tokens=False)
            if "\ufffd" not in alone:
                assert text == alone
    # The emoji is four byte-level tokens, each U+FFFD alone: the first three add nothing, the
    # last adds the whole character.
    ids = tokenizer.encode("x😀", add_special_tokens=False)
    assert [tokenizer.decode([i]) for i in ids] == ["x"] + ["\ufffd"] * 4
    assert viz.token_texts(ids, tokenizer) == ["x", "", "", "", "😀"]


def _assert_every_token_shown(
    trajectory: Trajectory, tokenizer: Any, markup: str | None = None
) -> None:
    """The view (``viz.html``'s unless given) holds each token once, in order, with its id, text,
    source and loss mask."""
    parsed = _parse(viz.html(trajectory, tokenizer) if markup is None else markup)
    assert len(parsed.tokens) == len(trajectory.input_ids)
    texts = viz.token_texts(trajectory.input_ids, tokenizer)
    completion_mask = trajectory.completion_mask or [1] * len(trajectory.completion_ids)
    loss = [0] * len(trajectory.prompt_ids) + trajectory.loss_mask
    for i, token in enumerate(parsed.tokens):
        match = _TITLE.match(token["title"])
        assert match, token["title"]
        token_id, text, source, mask = match.groups()
        assert int(token_id) == trajectory.input_ids[i]
        assert text == repr(texts[i])
        assert source == trajectory.sources[i]
        assert mask.startswith("loss on" if loss[i] else "loss off")
        assert _undraw(token["text"]) == texts[i]
        untrained = source == "model" and not completion_mask[i - len(trajectory.prompt_ids)]
        kind = "untrained" if untrained else source
        assert f"kit-{kind}" in token["class"].split()


def test_html_shows_every_token_once_with_its_id_text_source_and_mask(tokenizer, batch):
    for trajectory in batch:
        _assert_every_token_shown(trajectory, tokenizer)


def test_html_is_self_contained_escaped_and_has_a_legend(tokenizer, batch):
    echo = batch[2]
    markup = viz.html(echo, tokenizer)
    assert "<tool_call>" not in markup and "<|im_end|>" not in markup  # escaped, never live tags
    for banned in ("<script", "<style", "<link", "http://", "https://", "<iframe"):
        assert banned not in markup
    parsed = _parse(markup)
    shown = "".join(_undraw(token["text"]) for token in parsed.tokens)
    assert 'a <b> & \\"c\\"\\n\\ttab' in shown  # the tool call's JSON, as templated
    assert "Bye <&> héllo 😀" in shown
    for label in viz.render.LEGEND.values():
        assert _html.escape(label) in markup


def test_turn_marks_name_each_call_its_error_and_the_reward(tokenizer, batch):
    won, _, echo, cut = batch
    marks = _parse(viz.html(won, tokenizer)).marks
    assert marks[0] == f"prompt · {len(won.prompt_ids)} tokens (click to unfold)"
    assert [m for m in marks if m.startswith("turn")] == ["turn 1", "turn 2", "turn 3"]
    calls = [m for m in marks if m[:1] in "✓✗"]
    assert calls == ["✓ move(direction='LEFT')"] * 2 + ["✓ stay()"] * 7
    assert marks[-1] == "reward +1 · env_reward +1 · advantage +1 · won"

    echo_marks = _parse(viz.html(echo, tokenizer)).marks
    assert [m for m in echo_marks if m[:1] in "✓✗"] == [
        "✓ echo(message='a <b> & \"c\"\\n\\ttab é 😀')",
        "✗ echo(message=42)",
    ]
    assert 'title="error: message must be a string, not a number."' in viz.html(echo, tokenizer)

    cut_marks = _parse(viz.html(cut, tokenizer)).marks
    assert cut_marks[-1].endswith("truncated")


def test_truncated_model_tokens_are_drawn_as_untrained_not_as_env(tokenizer, batch):
    cut = batch[3]
    assert cut.truncated and sum(cut.loss_mask) == 0
    tokens = _parse(viz.html(cut, tokenizer)).tokens
    untrained = [t for t in tokens if "kit-untrained" in t["class"].split()]
    env = [t for t in tokens if "kit-env" in t["class"].split()]
    assert len(untrained) == cut.counts()["model"] > 0
    assert len(env) == cut.counts()["env"] > 0
    assert all(t["title"].endswith("· model · loss off (completion_mask 0)") for t in untrained)
    # A trained episode has no untrained token.
    assert "kit-untrained" not in viz.html(batch[0], tokenizer)


def _data(page: str) -> dict[str, Any]:
    """The JSON a page stores its rollouts in."""
    (data,) = re.findall(r'<script type="application/json" id="kit-data">(.*?)</script>', page)
    return json.loads(data)


def test_save_html_writes_one_offline_page_that_shows_the_first_rollout_without_scripts(
    tokenizer, batch, tmp_path, capsys
):
    path = viz.save_html(batch, tokenizer, tmp_path / "batch.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    for outside in ("http://", "https://", "<link", " src=", "<iframe", "@import", "url("):
        assert outside not in page  # one file, offline: nothing to fetch
    # One view, the first rollout's, rendered into the page: with scripts off, it is all there,
    # every token with its tooltip, with a notice that the other rollouts need scripts.
    assert page.count('class="kit-viz"') == 1 and page.count("<script") == 2
    _assert_every_token_shown(batch[0], tokenizer, page)
    assert viz.render.summary_line(batch[0]) in page and viz.render.legend() in page
    (notice,) = re.findall(r"<noscript>(.*?)</noscript>", page)
    assert f"the first of {len(batch)} rollouts" in notice
    # Its colours come from the page's <style> block, once, not from a style on each token.
    (css,) = re.findall(r"<style>(.*?)</style>", page)
    for name, rule in viz.render.RULES.items():
        assert f".{name}{{{rule}}}" in css
    assert 'class="kit-tok kit-prompt" title=' in page and 'kit-tok kit-prompt" style' not in page
    # The selector names each rollout once, and nothing else says "rollout " (the demo's test
    # counts them).
    options = re.findall(r'<option value="(\d+)">(rollout \d+ · .*?)</option>', page)
    assert [int(value) for value, _ in options] == list(range(len(batch)))
    echo = batch[2]
    label = (
        f"rollout 2 · echo · unfinished · reward {echo.reward:+.3g} · {len(echo.input_ids)} tokens"
    )
    assert options[2][1] == label
    assert page.count("rollout ") == len(batch)

    # One trajectory: its view alone, complete, with no script and nothing to page through.
    single = viz.save_html(batch[3], tokenizer, tmp_path / "one.html").read_text(encoding="utf-8")
    assert single.count('class="kit-viz"') == 1 and "<script" not in single
    assert "<select" not in single and "<noscript>" not in single
    _assert_every_token_shown(batch[3], tokenizer, single)

    view = viz.show(batch[0], tokenizer)
    assert view._repr_html_() == viz.html(batch[0], tokenizer)
    assert "TrajectoryView" in capsys.readouterr().out  # outside a notebook, display prints it


def test_the_page_data_gives_back_every_token_its_text_provenance_and_marks(
    tokenizer, batch, tmp_path
):
    hostile = play_episode(
        tokenizer, "echo", {}, [tool_call("echo", message="</script><script>alert(1)</script><!--")]
    )
    trajectories = [*batch, hostile]
    page = viz.save_html(trajectories, tokenizer, tmp_path / "batch.html").read_text("utf-8")
    assert page.count("<script") == 2 and page.count("</script>") == 2  # no text ends one
    data = _data(page)
    kinds = ("prompt", "model", "env", "untrained")  # the codes of the runs, in the page's order
    assert len(data["rollouts"]) == len(trajectories)
    for trajectory, rollout in zip(trajectories, data["rollouts"], strict=True):
        entries = [data["vocab"][index] for index in rollout["tokens"]]
        assert [entry[0] for entry in entries] == trajectory.input_ids
        texts = [entry[1] for entry in entries]
        assert texts == viz.token_texts(trajectory.input_ids, tokenizer)
        # The tooltip's repr: given where it is not the text in single quotes.
        assert [entry[2] if len(entry) == 3 else f"'{entry[1]}'" for entry in entries] == [
            repr(text) for text in texts
        ]
        assert all(len(entry) == 2 or entry[2] != f"'{entry[1]}'" for entry in entries)
        codes = [code for code, count in rollout["runs"] for _ in range(count)]
        shown = [kinds[code] for code in codes]
        assert ["model" if kind == "untrained" else kind for kind in shown] == trajectory.sources
        loss = [0] * len(trajectory.prompt_ids) + trajectory.loss_mask
        assert [int(kind == "model") for kind in shown] == loss
        # The marks are the notebook view's: summary, prompt, each turn's calls, the ending.
        marks = _parse(viz.html(trajectory, tokenizer)).marks
        assert rollout["summary"] == viz.summary(trajectory)
        assert (rollout["prompt"], rollout["end"]) == (marks[0], marks[-1])
        calls = [
            text
            for turn in sorted(rollout["calls"], key=int)
            for text, _, _ in rollout["calls"][turn]
        ]
        assert calls == [mark for mark in marks if mark[:1] in "✓✗…"]
    assert "</script><script>alert(1)</script><!--" in "".join(texts)  # the hostile one, whole
    assert any(e[1] == "" for e in data["vocab"])  # the split emoji: its leading bytes show nothing
    # One vocabulary entry per distinct (id, text), the most frequent first.
    pairs = [tuple(entry[:2]) for entry in data["vocab"]]
    assert len(set(pairs)) == len(pairs)
    counts = collections.Counter(
        pair for r in data["rollouts"] for pair in (pairs[i] for i in r["tokens"])
    )
    assert [counts[pair] for pair in pairs] == sorted(counts.values(), reverse=True)


def long_rollout(trajectory: Trajectory, tokens: int) -> Trajectory:
    """``trajectory`` with its completion repeated until it has ``tokens`` tokens in all."""
    keep = tokens - len(trajectory.prompt_ids)
    times = -(-keep // len(trajectory.completion_ids))
    mask = trajectory.completion_mask
    return dataclasses.replace(
        trajectory,
        completion_ids=(trajectory.completion_ids * times)[:keep],
        tool_mask=(trajectory.tool_mask * times)[:keep],
        completion_mask=None if mask is None else (mask * times)[:keep],
    )


def test_a_batch_page_costs_a_few_bytes_a_token_and_one_rollout_of_markup(
    tokenizer, batch, tmp_path
):
    tokens = 10_000
    big = [long_rollout(batch[i % len(batch)], tokens) for i in range(16)]
    page = viz.save_html(big, tokenizer, tmp_path / "big.html").read_text("utf-8")
    (data,) = re.findall(r'id="kit-data">(.*?)</script>', page)
    total = sum(len(t.input_ids) for t in big)
    # Every rollout as data: about a vocabulary index and a comma per token.
    assert len(data.encode()) / total < 4
    # The first rollout as markup, in classes and tooltips: a fraction of the notebook view's.
    markup = len(page.encode()) - len(data.encode())
    assert markup / tokens < 120
    assert markup < len(viz.html(big[0], tokenizer).encode()) / 2


def test_chat_view_shows_roles_tool_calls_and_escaped_text(batch):
    chat = viz.chat_view(batch[2])
    assert chat.count('class="kit-msg ') == len(batch[2].messages)
    assert "kit-msg-assistant" in chat and "kit-msg-tool" in chat and "kit-msg-user" in chat
    assert "→ echo({&quot;message&quot;: 42})" in chat
    assert "{&#x27;error&#x27;: &#x27;message must be a string, not a number.&#x27;}" in chat
    assert "&lt;b&gt;" in chat and "<b>" not in chat


def test_state_view_shows_what_each_turn_added_then_the_whole_transcript(batch):
    won = batch[0]
    first_board = ENVS["catch"]().reset(ball_col=0)
    assert won.states[0].startswith(first_board)
    added = [won.states[0][len(first_board) :]]
    added += [
        now[len(before) :] for before, now in zip(won.states[:-1], won.states[1:], strict=True)
    ]
    for index, text in enumerate(added):
        view = viz.render.state_view(won, index)
        shown = re.findall(r"<pre[^>]*>(.*?)</pre>", view, re.S)
        assert shown[0] == (_html.escape(text) or "(nothing new)")
        assert shown[-1] == _html.escape(won.states[index])
    assert added[-1] == ""  # the last turn called no tool


def test_bad_input_raises_a_clear_value_error(tokenizer, batch, tmp_path):
    with pytest.raises(ValueError, match="expected a kit.trajectory.Trajectory, got dict"):
        viz.html({"prompt_ids": []}, tokenizer)
    with pytest.raises(ValueError, match="tokenizer must have a decode"):
        viz.html(batch[0], object())
    with pytest.raises(ValueError, match="at least one trajectory"):
        viz.save_html([], tokenizer, tmp_path / "x.html")
    with pytest.raises(ValueError, match="at least one trajectory"):
        viz.inspector([], tokenizer)
    with pytest.raises(ValueError, match="state 9 out of range: the trajectory has 3 states"):
        viz.render.state_view(batch[0], 9)


class TestInspector:
    @pytest.fixture
    def inspector(self, tokenizer, batch):
        pytest.importorskip("ipywidgets")
        return viz.Inspector(batch, tokenizer)

    def test_returns_a_widget_box_with_its_css_class(self, tokenizer, batch):
        widgets = pytest.importorskip("ipywidgets")
        box = viz.inspector(batch, tokenizer)
        assert isinstance(box, widgets.VBox) and "kit-inspector" in box._dom_classes

    def test_picking_a_rollout_shows_its_tokens_summary_and_state(
        self, inspector, tokenizer, batch
    ):
        assert [value for _, value in inspector.rollout.options] == [0, 1, 2, 3]
        assert inspector.rollout.value == 0
        first = inspector.body.value
        assert len(_parse(first).tokens) == len(batch[0].input_ids)
        inspector.rollout.value = 2
        assert inspector.body.value != first
        assert len(_parse(inspector.body.value).tokens) == len(batch[2].input_ids)
        assert "#2" in inspector.summary.value and "echo" in inspector.summary.value
        assert _html.escape(batch[2].states[0]) in inspector.state.value

    def test_chat_view_toggle_and_env_state_slider(self, inspector, batch):
        inspector.view.value = "chat"
        assert 'class="kit-chat"' in inspector.body.value and "kit-tok" not in inspector.body.value
        inspector.view.value = "tokens"
        assert "kit-tok" in inspector.body.value
        won = batch[0]
        assert inspector.turn.max == len(won.states) - 1
        inspector.turn.value = 1
        assert _html.escape(won.states[1]) in inspector.state.value
        assert f"after turn 2 of {len(won.states)}" in inspector.state.value
        assert inspector.state.value.count("✓ stay()") == 7

    def test_keeps_the_token_views_of_the_last_rollouts_shown_only(
        self, tokenizer, batch, monkeypatch
    ):
        pytest.importorskip("ipywidgets")
        rendered = []
        render = viz.widgets.token_view

        def counted(trajectory: Trajectory, tokenizer: Any) -> str:
            rendered.append(next(i for i, t in enumerate(batch) if t is trajectory))
            return render(trajectory, tokenizer)

        monkeypatch.setattr(viz.widgets, "token_view", counted)
        inspector = viz.Inspector(batch, tokenizer, cache=2)
        for i in (1, 2, 3, 2):
            inspector.rollout.value = i
        assert rendered == [0, 1, 2, 3]  # 2 again: still kept
        assert len(inspector._token_html) == 2
        inspector.rollout.value = 0  # gone from the cache: rendered again, the same view
        assert rendered == [0, 1, 2, 3, 0] and len(inspector._token_html) == 2
        assert len(_parse(inspector.body.value).tokens) == len(batch[0].input_ids)
        with pytest.raises(ValueError, match="cache must be an int >= 0"):
            viz.Inspector(batch, tokenizer, cache=-1)

    def test_filters_by_env_outcome_and_reward(self, inspector, batch):
        inspector.env.value = "echo"
        assert [value for _, value in inspector.rollout.options] == [2]
        assert inspector.rollout.value == 2
        inspector.env.value = "all"
        inspector.outcome.value = "truncated"
        assert [value for _, value in inspector.rollout.options] == [3]
        inspector.outcome.value = "all"
        rewards = [t.reward for t in batch]
        inspector.reward.value = (0.5, max(rewards))
        assert [value for _, value in inspector.rollout.options] == [
            i for i, r in enumerate(rewards) if r >= 0.5
        ]
        inspector.env.value = "echo"
        inspector.outcome.value = "won"
        assert inspector.rollout.options == () and inspector.rollout.value is None
        assert "no rollout matches" in inspector.summary.value and inspector.body.value == ""


class TestPlots:
    @pytest.fixture(autouse=True)
    def _agg(self):
        matplotlib = pytest.importorskip("matplotlib")
        matplotlib.use("Agg")

    def test_token_bars_are_the_model_and_env_counts(self, batch):
        figure = viz.plot_tokens(batch)
        per_rollout, per_turn = figure.axes
        model, env = per_rollout.containers
        assert [bar.get_height() for bar in model] == [t.counts()["model"] for t in batch]
        assert [bar.get_height() for bar in env] == [t.counts()["env"] for t in batch]
        assert [bar.get_y() for bar in env] == [t.counts()["model"] for t in batch]
        # Turn 1 of every rollout: the mean of its sampled and of its env tokens.
        turns = [viz.plots.turn_counts(t) for t in batch]
        for t, counts in zip(batch, turns, strict=True):
            assert sum(m for m, _ in counts) == t.counts()["model"]
            assert sum(e for _, e in counts) == t.counts()["env"]
        turn_model, turn_env = per_turn.containers
        assert turn_model[0].get_height() == pytest.approx(sum(c[0][0] for c in turns) / len(batch))
        assert turn_env[0].get_height() == pytest.approx(sum(c[0][1] for c in turns) / len(batch))
        assert len(turn_model) == max(len(c) for c in turns)
        # It shows itself in a notebook as a PNG, with or without pyplot's inline backend.
        assert figure._repr_png_().startswith(b"\x89PNG\r\n\x1a\n")

    def test_length_bars_against_the_budget(self, batch):
        figure = viz.plot_lengths(batch, budget=120)
        (axes,) = figure.axes
        bars = axes.containers[0]
        assert [bar.get_height() for bar in bars] == [len(t.completion_ids) for t in batch]
        (line,) = axes.get_lines()
        assert list(line.get_ydata()) == [120, 120]
        truncated = [bar.get_facecolor() for bar, t in zip(bars, batch, strict=True) if t.truncated]
        others = [
            bar.get_facecolor() for bar, t in zip(bars, batch, strict=True) if not t.truncated
        ]
        assert truncated and all(colour not in others for colour in truncated)
        with pytest.raises(ValueError, match="budget must be a positive int"):
            viz.plot_lengths(batch, budget=0)

    def test_rewards_by_outcome(self, batch):
        from matplotlib.collections import PathCollection

        figure = viz.plot_rewards(batch)
        (axes,) = figure.axes
        labels = [tick.get_text() for tick in axes.get_xticklabels()]
        outcomes = [viz.outcome(t) for t in batch]
        expected = [o for o in viz.render.OUTCOMES if o in outcomes]
        assert labels == [f"{o}\n(n={outcomes.count(o)})" for o in expected]
        scatters = [c for c in axes.collections if isinstance(c, PathCollection)]
        for x, (name, points) in enumerate(zip(expected, scatters, strict=True)):
            ys = sorted(points.get_offsets()[:, 1].tolist())
            assert ys == sorted(t.reward for t in batch if viz.outcome(t) == name)
            assert all(abs(px - x) <= 0.25 for px in points.get_offsets()[:, 0])
        with pytest.raises(ValueError, match="no trajectory has a reward"):
            viz.plot_rewards(
                [Trajectory([], [1], [2], [1]), Trajectory([], [1], [2], [1], reward=math.nan)]
            )


@pytest.fixture(scope="module")
def captured() -> tuple[list[Trajectory], Any]:
    return captured_batch()


@pytest.mark.slow
def test_views_of_a_batch_captured_from_a_real_grpo_trainer(captured):
    batch, tokenizer = captured
    assert sorted(viz.outcome(t) for t in batch) == ["lost", "truncated", "unfinished", "won"]
    for trajectory in batch:
        _assert_every_token_shown(trajectory, tokenizer)
        marks = _parse(viz.html(trajectory, tokenizer)).marks
        assert f"advantage {trajectory.advantage:+.3g}" in marks[-1]
    # The cut rollout: the trainer trained none of it, and its model tokens say so.
    (cut,) = [t for t in batch if t.truncated]
    tokens = _parse(viz.html(cut, tokenizer)).tokens
    assert sum("kit-untrained" in t["class"].split() for t in tokens) == cut.counts()["model"]

    pytest.importorskip("ipywidgets")
    inspector = viz.Inspector(batch, tokenizer)
    inspector.outcome.value = "won"
    (won,) = [value for _, value in inspector.rollout.options]
    assert batch[won].won and "won" in inspector.summary.value
    inspector.turn.value = inspector.turn.max
    assert _html.escape(batch[won].states[-1]) in inspector.state.value

    pytest.importorskip("matplotlib").use("Agg")
    model, _ = viz.plot_tokens(batch).axes[0].containers
    assert [bar.get_height() for bar in model] == [t.counts()["model"] for t in batch]
    bars = viz.plot_lengths(batch, budget=1024).axes[0].containers[0]
    assert [bar.get_height() for bar in bars] == [len(t.completion_ids) for t in batch]
    assert max(bar.get_height() for bar in bars) == 1024  # the cut rollout fills the budget
