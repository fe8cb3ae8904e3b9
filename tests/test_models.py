"""kit.models: the tiny offline model TRL accepts, and the loading path GPU users take."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from trl.chat_template_utils import add_response_schema, supports_tool_calling  # noqa: E402

from kit.models import (  # noqa: E402
    SPECIAL_TOKENS,
    load,
    save,
    tiny_config,
    tiny_model,
    tiny_tokenizer,
    trl_chat_template,
)

CONVERSATION = [
    {"role": "user", "content": "Play."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "guess", "arguments": {"guess": "crane"}}}
        ],
    },
    {"role": "tool", "name": "guess", "content": "X X Y X G"},
]


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


def test_trl_recognises_the_tiny_tokenizer(tiny):
    _, tokenizer = tiny
    assert supports_tool_calling(tokenizer)
    parsed = add_response_schema(tokenizer)  # raises "Unrecognized chat template" otherwise
    assert getattr(parsed, "response_template", None) or getattr(parsed, "response_schema", None)


def test_special_tokens_are_single_ids_and_eos_ends_a_turn(tiny):
    _, tokenizer = tiny
    for token in SPECIAL_TOKENS:
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token
    assert tokenizer.eos_token == "<|im_end|>"
    text = tokenizer.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    assert "<tool_call>" in text and "<tool_response>\nX X Y X G\n</tool_response>" in text
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_every_catch_board_row_is_one_token(tiny):
    """Why the tokenizer keeps Catch's rows whole: with GPT-2's split ("..", "o", "..") the
    2-layer model never learnt which column the ball is in (docs/results.md, "Does it learn?")."""
    from kit.games import make

    _, tokenizer = tiny
    game = make("catch")
    rows = set()
    for column in range(game.columns):
        for moves in (["LEFT"] * 4, ["RIGHT"] * 4):
            rows.update(game.reset(ball_col=column).splitlines())
            for move in moves:
                rows.update(game.step(move).observation.splitlines())
    assert len(rows) == 2 * game.columns + 1  # the ball's rows, the paddle's, the empty one
    for row in sorted(rows):
        ids = tokenizer.encode(f"The board:\n{row}\n", add_special_tokens=False)
        assert tokenizer.convert_ids_to_tokens(ids)[-2:] == [row, "Ċ"], row
    # Only a whole line is kept whole: a row followed by other text is split as before.
    assert "..o.." not in tokenizer.convert_ids_to_tokens(
        tokenizer.encode("..o.. is the ball's row", add_special_tokens=False)
    )
    text = "Move the paddle (x) so the ball (o) lands on it... ok.\n..o..x\n"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


@pytest.mark.parametrize("name", ["catch", "echo", "sudoku", "wordle"])
def test_a_game_prompt_is_words_not_bytes(tiny, name):
    """The prompt every GRPO turn prefills again: the template's text, the tools' schemas and a
    board. Before the tokenizer learnt from rendered prompts it spelt their words out a few
    bytes at a time (about 2 characters per token; a Catch prompt was 716 tokens, now 382)."""
    from kit.episode import tool_schemas, with_observation
    from kit.registry import game
    from kit.tasks import prompt

    _, tokenizer = tiny
    env_cls = game(name).env
    messages = with_observation(prompt(name), env_cls().reset(seed=3))
    text = tokenizer.apply_chat_template(
        messages, tools=tool_schemas(env_cls), tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(text) / len(ids) > 3.0, (name, len(ids), len(text))


def test_tiny_model_is_deterministic_and_small(tiny):
    model, tokenizer = tiny
    again, _ = tiny_model()
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    assert model.config.vocab_size == len(tokenizer)


def test_the_tiny_model_comes_in_other_sizes_and_refuses_impossible_ones():
    model, _ = tiny_model(hidden_size=64, num_layers=1)
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (64, 1)
    assert model.config.head_dim * model.config.num_attention_heads == 64
    for size, layers, message in (
        (12, 2, "hidden_size must be a positive multiple of 8, got 12"),  # heads of width 3
        (0, 2, "hidden_size must be a positive multiple of 8, got 0"),
        (128.0, 2, "hidden_size must be a positive multiple of 8, got 128.0"),
        (128, 0, "num_layers must be a positive integer, got 0"),
        (128, True, "num_layers must be a positive integer, got True"),
    ):
        with pytest.raises(ValueError, match=message):
            tiny_config(size, layers)
    with pytest.raises(ValueError, match="tie_word_embeddings must be True or False, got 0"):
        tiny_config(128, 2, 0)


def test_untied_embeddings_give_the_output_layer_weights_of_its_own(tmp_path):
    """The default: the same model as the tied one but for the output layer, every shared
    weight as the tied model's at the same seed, and an output layer that neither is the input
    embedding nor moves with it, also after a save and a load."""
    from kit.models import save

    tied, _ = tiny_model(tie_word_embeddings=True)
    assert tied.get_input_embeddings().weight is tied.get_output_embeddings().weight
    model, tokenizer = tiny_model()
    assert model.config.tie_word_embeddings is False
    vocab, width = model.config.vocab_size, model.config.hidden_size
    extra = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in tied.parameters())
    assert extra == vocab * width
    shared = tied.state_dict()
    for name, weight in model.state_dict().items():
        if name != "lm_head.weight":
            assert torch.equal(weight, shared[name]), name
    save(model, tokenizer, tmp_path / "untied")
    loaded, _ = load(tmp_path / "untied")
    embedding, output = loaded.get_input_embeddings().weight, loaded.get_output_embeddings().weight
    assert not torch.equal(embedding, output)
    assert torch.equal(output, model.get_output_embeddings().weight)
    with torch.no_grad():
        embedding.add_(1.0)
    assert torch.equal(output, model.get_output_embeddings().weight)  # not the same tensor


def test_load_round_trips_a_local_folder(tiny, tmp_path):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, loaded_tokenizer = load(str(tmp_path), dtype=torch.float32)
    ids = torch.tensor([tokenizer.encode("[crane]", add_special_tokens=False)])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, loaded(ids).logits)
    assert loaded_tokenizer.chat_template == tokenizer.chat_template


def test_load_puts_trls_template_on_an_unrecognised_tokenizer(tiny, tmp_path):
    model, _ = tiny
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"  # SmolLM2-like
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    _, plain = load(str(tmp_path))
    with pytest.raises(ValueError, match="Unrecognized chat template"):
        add_response_schema(plain)
    _, fixed = load(str(tmp_path), chat_template="qwen3_instruct_2507")
    assert fixed.chat_template == trl_chat_template("qwen3_instruct_2507")
    add_response_schema(fixed)


def test_unknown_template_name_is_refused():
    with pytest.raises(ValueError, match="unknown chat template"):
        trl_chat_template("llama9")


# --- checkpoints: written at once, refused when incomplete -----------------------------------


def _same_outputs(model, loaded, tokenizer) -> bool:
    ids = torch.tensor([tokenizer.encode("[crane]", add_special_tokens=False)])
    with torch.no_grad():
        return torch.allclose(model(ids).logits, loaded(ids).logits)


def test_save_writes_a_checkpoint_load_reads(tiny, tmp_path):
    model, tokenizer = tiny
    path = save(model, tokenizer, tmp_path / "runs" / "ck")  # parents are created
    assert path == tmp_path / "runs" / "ck"
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert [p.name for p in path.parent.iterdir()] == ["ck"]  # no partial folder left beside it
    loaded, loaded_tokenizer = load(path, dtype=torch.float32)
    assert _same_outputs(model, loaded, tokenizer)
    assert len(loaded_tokenizer) == len(tokenizer) > 500
    assert loaded_tokenizer.chat_template == tokenizer.chat_template
    empty = tmp_path / "empty"
    empty.mkdir()
    assert save(model, tokenizer, empty) == empty  # an empty folder is taken over
    assert {p.name for p in empty.iterdir()} == names


def test_load_refuses_a_folder_with_the_model_only(tiny, tmp_path):
    model, _ = tiny
    model.save_pretrained(tmp_path)
    # transformers alone loads this as a tokenizer with a vocabulary of 1, without a word.
    with pytest.raises(ValueError, match=r"incomplete checkpoint: no tokenizer \(tokenizer.json"):
        load(str(tmp_path))


def test_load_refuses_a_folder_with_the_tokenizer_only(tiny, tmp_path):
    _, tokenizer = tiny
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="no model config .*; no model weights") as error:
        load(tmp_path)
    assert "no tokenizer" not in str(error.value)
    (tmp_path / "model.safetensors").unlink(missing_ok=True)
    (tmp_path / "config.json").write_text("{}")  # a config without weights is no better
    with pytest.raises(ValueError, match="no model weights"):
        load(tmp_path)


def test_load_still_takes_a_hub_id_that_is_no_local_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OSError) as error:  # offline: transformers' own error, not ours
        load("no-such-org/no-such-model")
    assert "incomplete checkpoint" not in str(error.value)


def _folder_of_notes(path):
    """A folder of the user's that is no checkpoint: one file of notes."""
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    return path


def test_save_refuses_an_occupied_path_and_leaves_it_alone(tiny, tmp_path):
    model, tokenizer = tiny
    folder = _folder_of_notes(tmp_path / "ck")
    with pytest.raises(ValueError, match="not empty"):
        save(model, tokenizer, folder)
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "mine"
    file = tmp_path / "model.bin"
    file.write_text("not a folder")
    with pytest.raises(ValueError, match="is a file"):
        save(model, tokenizer, file)
    assert file.read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck", "model.bin"]


def test_a_failed_save_leaves_nothing_behind(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(tokenizer, "save_pretrained", disk_full)  # after the model was written
    with pytest.raises(OSError, match="No space left"):
        save(model, tokenizer, tmp_path / "ck")
    assert list(tmp_path.iterdir()) == []
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OSError, match="No space left"):
        save(model, tokenizer, empty)
    assert list(tmp_path.iterdir()) == [empty] and list(empty.iterdir()) == []


def test_replace_swaps_a_checkpoint_for_a_new_one(tiny, tmp_path):
    model, tokenizer = tiny
    path = save(model, tokenizer, tmp_path / "ck")
    other, _ = tiny_model(seed=1)
    with pytest.raises(ValueError, match="not empty; name a new one .*replace=True"):
        save(other, tokenizer, path)  # without replace, even a checkpoint stays
    assert _same_outputs(model, load(path, dtype=torch.float32)[0], tokenizer)
    assert save(other, tokenizer, path, replace=True) == path
    loaded, _ = load(path, dtype=torch.float32)
    assert _same_outputs(other, loaded, tokenizer)
    assert not _same_outputs(model, loaded, tokenizer)
    assert [p.name for p in tmp_path.iterdir()] == ["ck"]  # no old or partial folder left
    # an absent or empty folder is simply written, as without replace
    assert save(model, tokenizer, tmp_path / "new", replace=True) == tmp_path / "new"


def test_replace_refuses_anything_but_a_checkpoint(tiny, tmp_path):
    model, tokenizer = tiny
    folder = _folder_of_notes(tmp_path / "mine")
    with pytest.raises(ValueError, match="not a checkpoint .*name a new folder"):
        save(model, tokenizer, folder, replace=True)
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    half = tmp_path / "half"  # the model without its tokenizer is no checkpoint either
    model.save_pretrained(half)
    before = sorted(p.name for p in half.iterdir())
    with pytest.raises(ValueError, match=r"not a checkpoint \(no tokenizer"):
        save(model, tokenizer, half, replace=True)
    assert sorted(p.name for p in half.iterdir()) == before
    file = tmp_path / "model.bin"
    file.write_text("not a folder")
    with pytest.raises(ValueError, match="is a file"):
        save(model, tokenizer, file, replace=True)
    assert file.read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["half", "mine", "model.bin"]


def test_a_failed_replace_keeps_the_old_checkpoint(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    path = save(model, tokenizer, tmp_path / "ck")
    other, _ = tiny_model(seed=1)

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(tokenizer, "save_pretrained", disk_full)
    with pytest.raises(OSError, match="No space left"):
        save(other, tokenizer, path, replace=True)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["ck"]
    assert _same_outputs(model, load(path, dtype=torch.float32)[0], tokenizer)
    # renaming the new folder in fails after the old one was moved aside: the old one is back
    import kit.models

    real = kit.models.os.replace
    calls = []

    def second_rename_fails(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:
            raise OSError("rename failed")
        return real(src, dst)

    monkeypatch.setattr(kit.models.os, "replace", second_rename_fails)
    with pytest.raises(OSError, match="rename failed"):
        save(other, tokenizer, path, replace=True)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["ck"]
    assert _same_outputs(model, load(path, dtype=torch.float32)[0], tokenizer)
