"""The shipped data files: ``data/splits`` and ``data/sft``, their cards, and the command that
rebuilds them byte for byte.

Why: a result is only reproducible if its data are, so the splits (``kit.tasks``) and the
solver-played SFT sets (``kit.sft``) are files in the repository, each with a card that says how
it was made, and ``python -m kit.data --write data/`` rebuilds every one of them exactly
(``--check data/`` compares, and ``tests/test_data.py`` runs it). ``write`` refuses to ship an
SFT set that shows an eval task (``kit.tasks.leaks``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kit import registry
from kit.envs import ENVS
from kit.sft import sft_examples, validate_example
from kit.tasks import HELD_OUT, leaks, load_split, make_splits

# The shipped SFT sets: how ``python -m kit.data --write`` makes each (see the dataset cards).
SHIPPED_SFT = registry.View("sft")


def jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows as JSON lines, one per row, in a byte-stable form."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def sft_command(game: str) -> str:
    options = SHIPPED_SFT[game]
    args = ", ".join(f"{key}={value!r}" for key, value in options.items())
    return f"kit.sft.sft_dataset({game!r}, {args})"


def _noise_text(noise: float) -> str:
    if not noise:
        return "\n  Every move is the solver's own (`noise=0.0`): no blunders, no recoveries."
    return f"""
  With probability {noise} per move the noisy solver blunders (plays the random
  policy's well-formed move) and then plays on from the real state: the set shows recoveries
  from states a perfect player never reaches, at the cost of also training on the blunders
  (their reasoning text, where there is one, reads "Let me try ...")."""


def _sft_card(game: str, rows: Sequence[Mapping[str, Any]]) -> str:
    options = SHIPPED_SFT[game]
    turns = sum(sum(m["role"] == "assistant" for m in row["messages"]) for row in rows)
    won = sum(validate_example(row).won for row in rows)
    size = len(jsonl(rows).encode("utf-8"))
    held_out, guesses = registry.game(game).card_notes(rows)
    turn_text = "a short reasoning text" if options.get("reasoning", True) else "no text"
    return f"""# kit SFT warm-up set: {game}

Solver-played {game} games through `kit.envs.{ENVS[game].__name__}`, in the exact conversation
format `GRPOTrainer(environment_factory={ENVS[game].__name__})` renders: system + user prompt
with the reset observation appended, assistant turns with {turn_text} and one tool
call, tool results as TRL formats them (`{{'error': ...}}` for errors), and a closing message.

- File: `train.jsonl` ({len(rows)} games, {turns} assistant turns, {size:,} bytes); columns
  `messages`, `tools` (the tools' JSON schemas), `environment`, `task` (the reset columns).
- Made by: `{sft_command(game)}`.{_noise_text(options["noise"])}
- Regenerate: `python -m kit.data --write data/` (byte-identical; `--check` compares).
- Tasks: the train split only{held_out}; see `data/splits/README.md`.{guesses}
- Validation: every example was replayed in a fresh env and every tool result matched.
- Games ending in a win: {won} of {len(rows)}.
- Load: `kit.sft.load_sft({game!r})`; train: `SFTTrainer(..., args=kit.train.sft_config(...))`.
- Licence: Apache-2.0, like the kit. The games' texts follow TextArena / OpenSpiel / OpenEnv
  (Apache-2.0); Wordle's words come from NLTK's Basic English list and word corpus.
"""


_SPLITS_CARD = """# Fixed task splits

Made by `kit.tasks.make_splits()`; regenerate with `python -m kit.data --write data/`.

{games}

What each eval split holds out (`kit.tasks.HELD_OUT`; `kit.tasks.leaks(game, rows)` lists any
training row that shows an eval task, and `tests/test_heldout.py` runs it on every set):

{held_out}

Licence: Apache-2.0. The secrets are Ogden's Basic English nouns as TextArena selects them.
"""


def write(root: Path) -> list[Path]:
    """Write ``data/splits`` and ``data/sft`` under ``root``; return the files written."""
    splits = make_splits()
    written = []
    folder = root / "splits"
    folder.mkdir(parents=True, exist_ok=True)
    for name, split in splits.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(split, indent=1) + "\n", encoding="utf-8")
        written.append(path)
    specs = [registry.game(game) for game in registry.BUILTIN]
    card = _SPLITS_CARD.format(
        games="\n".join(
            f"- {spec.split_card(splits.get(spec.name))}" for spec in specs if spec.split_card
        ),
        held_out="\n".join(
            textwrap.fill(f"- {game}: {HELD_OUT[game]}.", width=96, subsequent_indent="  ")
            for game in registry.BUILTIN
        ),
    )
    (folder / "README.md").write_text(card, encoding="utf-8")
    written.append(folder / "README.md")
    load_split.cache_clear()
    for game in registry.BUILTIN:
        rows = sft_examples(game, **SHIPPED_SFT[game])
        found = leaks(game, rows)
        if found:  # a shipped training set must never show an eval task
            raise ValueError(f"the {game} SFT set shows eval tasks: {found[:3]}")
        folder = root / "sft" / game
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "train.jsonl").write_text(jsonl(rows), encoding="utf-8")
        (folder / "README.md").write_text(_sft_card(game, rows), encoding="utf-8")
        written += [folder / "train.jsonl", folder / "README.md"]
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kit.data", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--write", type=Path, metavar="DIR", help="write the splits and SFT sets under DIR"
    )
    group.add_argument("--check", type=Path, metavar="DIR", help="regenerate and compare with DIR")
    args = parser.parse_args(argv)
    if args.write:
        for path in write(args.write):
            print(path)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = write(Path(tmp))
        stale = [
            str(path.relative_to(tmp))
            for path in fresh
            if not (args.check / path.relative_to(tmp)).is_file()
            or (args.check / path.relative_to(tmp)).read_bytes() != path.read_bytes()
        ]
    if stale:
        print("differs from a fresh build:", *stale, sep="\n  ")
        return 1
    print("all files match a fresh build")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
