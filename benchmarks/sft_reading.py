"""Does an SFT warm-up teach a model to read Catch's board? Teacher-forced decisions on the
held-out solver games, every few SFT steps.

    python benchmarks/sft_reading.py --model smollm2 --steps 60 --every 20
    python benchmarks/sft_reading.py --model smollm2 --steps 100 --every 25 --first-turns
    python benchmarks/sft_reading.py --model smollm2 --steps 100 --every 25 --first-turns --spaced
    python benchmarks/sft_reading.py --model smollm2 --steps 40 --every 20 --reasoning
    python benchmarks/sft_reading.py --steps 500 --every 250       # the tiny model's warm-up

Why: a warmed-up model that wins only what staying put wins could have learnt the format and
not the board, or the board and not the format; a held-out win rate does not say which, and it
costs minutes a measurement on a CPU. Here one forward pass per held-out game (the solver's game
on each of Catch's 10 eval tasks: boards of 8 and 10 rows, every ball column) reads, at every
point where the solver decided, the model's probabilities of its choices:

* the first move, where the paddle is always in the centre: on the 8 boards whose ball is off
  centre, right when P(move) > 0.5 and P(the solver's direction | move) > 0.5; on the 2 centre
  boards, when P(stay) > 0.5. ``p_first`` is the mean P(the solver's direction) on the 8: 0.5 is
  a model that does not read the ball's column there. A strict test: a model can wait and read
  the board lower down (the tiny model's runbook warm-up wins 0.56 of the held-out games and
  scores 0.51 here);
* the later moves and stays, judged the same way (there the previous moves are in context, so
  a model can copy them);
* with ``--reasoning`` (the solver states "The ball is in column 3 and the paddle in column 2"
  before each call), how often the most likely column digit is the true one: the ball's on the
  first turn (reading the board) and later (where the first turn's can be copied), the
  paddle's. The decisions are then read after the stated reason, which names the direction.

The same probe runs on 10 training-task games (``training boards``): a model that reads those
and not the held-out ones has learnt the training boards, not the reading. The warm-up is
``kit.train.sft_trainer`` with the model's recipe (``kit.train.recipe``: LoRA for
a pretrained model) on the game's shipped SFT set, or on the solver's games with its reasons. No
score is asserted: ``tests/test_benchmarks.py`` runs this with tiny counts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# the checkout this file is in, not whichever one an editable install points at
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.builtin.catch.engine import Catch  # noqa: E402  (after the path above)

_DECISION = re.compile(r'"name": "(move|stay)"|"direction": "(LEFT|RIGHT)"')
_COLUMN = re.compile(r"column (\d)")
_OTHER = {"move": "stay", "stay": "move", "LEFT": "RIGHT", "RIGHT": "LEFT"}
_ROW = re.compile(rf"^{Catch.LINE_PATTERN}$", re.M)  # a board row, as the engine draws it


def _spaced(row: dict[str, Any]) -> dict[str, Any]:
    """The conversation with every board row drawn a cell to a token: ``. . o . .``."""
    return {
        "messages": [
            {**message, "content": _ROW.sub(lambda m: " ".join(m.group(0)), message["content"])}
            if message["role"] in ("user", "tool") and message["content"]
            else message
            for message in row["messages"]
        ]
    }


def _choice(
    tokenizer: Any, text: str, encoding: Any, start: int, options: list[str]
) -> tuple[int, list[int]]:
    """The index of the token where ``text[start:]`` begins one of ``options``, and the first
    token of each option written there instead: the model's choice among them is one logit."""
    index = encoding.char_to_token(start)
    head = text[encoding.offset_mapping[index][0] : start]  # what the token holds before it
    ids = [tokenizer(head + option, add_special_tokens=False)["input_ids"][0] for option in options]
    if len(set(ids)) < len(ids) or encoding.input_ids[index] not in ids:
        raise ValueError(f"the tokenizer does not split {options} into distinct first tokens")
    return index, ids


def _probability(
    tokenizer: Any, text: str, encoding: Any, logits: Any, start: int, options: list[str]
) -> float:
    """The model's probability of ``options[0]`` against the others at ``text[start:]``."""
    import torch

    index, ids = _choice(tokenizer, text, encoding, start, options)
    return torch.softmax(logits[index - 1][ids], 0)[0].item()


def probe(model: Any, tokenizer: Any, games: Any, columns: int = 5) -> dict[str, Any]:
    """The teacher-forced decisions of ``model`` on ``games`` (solver conversations), as the
    module docstring says."""
    import torch

    # in the order the docstring reads them; a key no game reached is left out
    right: dict[str, list[int]] = {
        key: [0, 0]
        for key in (
            "first move, ball off centre",
            "first move, ball in the centre",
            "later moves",
            "later stays",
            "ball's column stated, first turn",
            "ball's column stated, later turns",
            "paddle's column stated",
        )
    }
    first_direction: list[float] = []

    def count(key: str, ok: bool) -> None:
        right[key][0] += ok
        right[key][1] += 1

    model.eval()
    with torch.no_grad():
        for game in games:
            text = tokenizer.apply_chat_template(
                game["messages"], tools=game["tools"], tokenize=False
            )
            encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
            logits = model(input_ids=torch.tensor([encoding.input_ids])).logits[0].float()
            begin = text.index("<|im_start|>assistant")  # the tools' schema names them too
            read = (tokenizer, text, encoding, logits)
            calls = list(_DECISION.finditer(text, begin))
            first = True
            for n, match in enumerate(calls):
                if match.group(1) is None:
                    continue  # a direction: read with its move
                name = match.group(1)
                p_name = _probability(*read, match.start(1), [name, _OTHER[name]])
                ok, p_direction = p_name > 0.5, None
                if name == "move":
                    direction = calls[n + 1]
                    p_direction = _probability(
                        *read, direction.start(2), [direction.group(2), _OTHER[direction.group(2)]]
                    )
                    ok = ok and p_direction > 0.5
                if first:
                    where = "ball off centre" if name == "move" else "ball in the centre"
                    count(f"first move, {where}", ok)
                    if p_direction is not None:
                        first_direction.append(p_direction)
                else:
                    count(f"later {'moves' if name == 'move' else 'stays'}", ok)
                first = False
            for k, match in enumerate(_COLUMN.finditer(text, begin)):
                truth = match.group(1)
                others = [str(c) for c in range(1, columns + 1) if str(c) != truth]
                index, ids = _choice(tokenizer, text, encoding, match.start(1), [truth, *others])
                # the ball's column never changes: after the first turn a model can copy it
                turn = "first turn" if k == 0 else "later turns"
                stated = f"ball's column stated, {turn}" if k % 2 == 0 else "paddle's column stated"
                count(stated, int(logits[index - 1][ids].argmax()) == 0)
    model.train()
    return {
        **{key: f"{a}/{b}" for key, (a, b) in right.items() if b},
        "p_first": round(sum(first_direction) / max(len(first_direction), 1), 3),
    }


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Warm up for ``--steps`` steps, probing before and every ``--every`` steps; print each
    probe as a JSON line and return them."""
    parser = argparse.ArgumentParser(prog="python benchmarks/sft_reading.py")
    parser.add_argument("--model", default="tiny", help="tiny, smollm2 or a model's folder")
    parser.add_argument("--steps", type=int, default=100, help="SFT steps")
    parser.add_argument("--every", type=int, default=20, help="probe every this many steps")
    parser.add_argument("--learning-rate", type=float, help="default: the model's recipe's")
    parser.add_argument(
        "--reasoning", action="store_true", help="the solver's games with its stated reasons"
    )
    parser.add_argument(
        "--first-turns",
        action="store_true",
        help="each game cut after its first call: every example is a reading of a fresh board",
    )
    parser.add_argument(
        "--spaced",
        action="store_true",
        help="train and probe on boards redrawn a cell to a token (. . o . .): not OpenSpiel's text",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/sft-reading"))
    args = parser.parse_args(argv)

    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import TrainerCallback

    from kit.demo import _model_folder
    from kit.models import tiny_model
    from kit.registry import game
    from kit.runs import pin_threads, quiet_libraries
    from kit.sft import first_turns, load_sft, sft_dataset
    from kit.train import SFT, recipe, sft_trainer, train

    quiet_libraries()
    pin_threads(args.threads)
    if args.model == "tiny":
        model, tokenizer = tiny_model(seed=args.seed, tie_word_embeddings=False)
        settings: dict[str, Any] = dict(SFT)
        peft_config = None
    else:
        r = recipe(_model_folder(args.model), "catch", lora=True)
        model, tokenizer = r.load_model(args.seed)
        settings, peft_config = dict(r.sft), r.peft_config
    if args.learning_rate is not None:
        settings["learning_rate"] = args.learning_rate
    # the shipped set, or the same games played now with the solver's reasons
    shipped = game("catch").sft
    data = (
        sft_dataset("catch", **{**shipped, "reasoning": True})
        if args.reasoning
        else load_sft("catch")
    )
    if args.first_turns:
        data = first_turns(data)
    held_out = sft_dataset("catch", num_games=10, split="eval", reasoning=args.reasoning)
    seen = sft_dataset("catch", num_games=10, reasoning=args.reasoning)
    if args.spaced:
        data, held_out, seen = (games.map(_spaced) for games in (data, held_out, seen))
    probes: list[dict[str, Any]] = []
    clock = time.perf_counter()

    def record(step: int, model: Any, loss: float | None) -> None:
        seconds = round(time.perf_counter() - clock)
        trained = probe(model, tokenizer, seen)
        probes.append(
            {
                "step": step,
                "loss": loss,
                "seconds": seconds,
                **probe(model, tokenizer, held_out),
                "training boards: first move, ball off centre": trained[
                    "first move, ball off centre"
                ],
                "training boards: p_first": trained["p_first"],
            }
        )
        print(json.dumps(probes[-1]), flush=True)

    class Probe(TrainerCallback):
        def on_step_end(self, _args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % args.every == 0:
                losses = [entry["loss"] for entry in state.log_history if "loss" in entry]
                record(state.global_step, kwargs["model"], losses[-1] if losses else None)

    settings["logging_steps"] = 1
    trainer = sft_trainer(
        model,
        tokenizer,
        data,
        args.steps,
        args.seed,
        args.out,
        peft_config,
        **settings,
    )
    trainer.add_callback(Probe())
    record(0, trainer.model, None)
    train(trainer)
    return probes


if __name__ == "__main__":
    main()
