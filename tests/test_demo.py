"""`python -m kit.demo` runs end to end as a researcher runs it, and what it writes adds up.

Tiny settings (5 SFT steps, 1 GRPO step, 2 episodes per task): the point is the pipeline and
the bookkeeping, not the learning, whose figures docs/results.md reports with their command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytestmark = pytest.mark.slow  # every test runs the runbook, or shares its module run

from kit.demo import main  # noqa: E402
from kit.evaluate import evaluate  # noqa: E402
from kit.models import load, tiny_model  # noqa: E402
from kit.tasks import HELD_OUT, TaskProvider  # noqa: E402
from kit.train import GRPO  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 96  # tokens per episode: short, so the untrained model's rambling ends soon


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(
        [sys.executable, "-m", "kit.demo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


ARGS = ("--sft-steps", "5", "--grpo-steps", "1", "--eval-generations", "2", "--temperature", "0.5")


def _measure(model, tokenizer):
    """The runbook's evaluation, as a user would repeat it on a checkpoint."""
    return evaluate(
        model,
        "catch",
        tokenizer,
        num_generations=2,
        greedy=False,
        temperature=0.5,
        seed=3,
        max_completion_length=BUDGET,
    ).records()[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "run"
    done = _run(*ARGS, "--max-completion-length", str(BUDGET), "--seed", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stdout, json.loads((out / "summary.json").read_text())


def test_the_demo_writes_every_output_and_says_where(demo):
    out, stdout, summary = demo
    command = (
        "python -m kit.demo --game catch --sft-steps 5 --no-tie-word-embeddings --grpo-steps 1 "
        f"--eval-generations 2 --temperature 0.5 --max-completion-length {BUDGET} --seed 3 "
        "--threads 2"
    )
    assert summary["command"] == command and summary["seed"] == 3
    # the default tiny model, its embeddings untied (and said so in the command)
    assert summary["model"] == {"hidden_size": 128, "layers": 2, "tie_word_embeddings": False}
    assert stdout.rstrip().endswith(f"reproduce: {command}")
    html = Path(summary["html"])
    assert html == out / "trajectory.html" and str(html) in stdout
    page = html.read_text(encoding="utf-8")
    # the last captured batch: one group of eight rollouts, each token view present
    assert page.count("rollout ") == GRPO["per_device_train_batch_size"]  # the whole batch
    assert "model: sampled, trained" in page
    lines = ("base (catch)", "SFT (catch)", "SFT + GRPO (catch)", "games finished")
    for line in (*lines, "Win rate by ball_col, the same held-out episodes:"):
        assert line in stdout
    assert f"held out: {HELD_OUT['catch']}" in stdout
    assert summary["checkpoints"] == {
        "sft": str(out / "sft-model"),
        "grpo": str(out / "grpo-model"),
    }


def test_the_figures_are_coherent(demo):
    _, _, summary = demo
    records = summary["evaluation"]
    assert [r["player"] for r in records] == ["base", "SFT", "SFT + GRPO"]
    for record in records:
        assert record["game"] == "catch" and record["seed"] == 3
        assert record["episodes"] == 2 * len(TaskProvider("catch", "eval"))
        assert record["decoding"] == "sampled x2, T=0.5"
        assert 0 < record["tokens"] <= BUDGET
        assert 0 <= record["valid_calls"] <= record["executed_calls"]
        if record["executed_calls"] == 0:
            assert record["valid_call_rate"] is None  # undefined, written as null, not NaN
        assert record["win_rate_low"] <= record["win_rate"] <= record["win_rate_high"]
    sft, grpo = records[1], records[2]
    compared = {c["metric"]: c for c in summary["grpo_vs_sft"]}
    assert set(compared) == {"win_rate", "finished", "mean_reward"}
    for metric, comparison in compared.items():
        # equal episodes per task: the mean of task means is the pooled figure of the table
        assert comparison["sft"] == pytest.approx(sft[metric])
        assert comparison["grpo"] == pytest.approx(grpo[metric])
        assert comparison["difference"] == pytest.approx(grpo[metric] - sft[metric])
        assert 0 <= comparison["p_value"] <= 1
    breakdown = summary["breakdown"]  # win rate per ball column: Catch's GameSpec.breakdown
    assert breakdown["column"] == "ball_col" and breakdown["metric"] == "win_rate"
    assert [row["ball_col"] for row in breakdown["rows"]] == [0, 1, 2, 3, 4]
    for record in (sft, grpo):  # the columns' wins add up to the model's pooled win rate
        won = sum(row[record["player"]] * row["episodes"] for row in breakdown["rows"])
        assert won == pytest.approx(record["win_rate"] * record["episodes"])
    losses = summary["sft"]["losses"]
    assert [entry["step"] for entry in losses] == [1, 2, 3, 4, 5]
    assert losses[-1]["loss"] < losses[0]["loss"]  # five steps of SFT already lower the loss
    (step,) = summary["grpo"]["log"]
    assert step["step"] == 1 and {"loss", "reward", "tools/call_frequency"} <= set(step)
    assert 0 <= step["flat_groups"] <= 1  # counted on the captured rewards, not TRL's log
    seconds = summary["seconds"]
    assert seconds["total"] >= seconds["SFT"] + seconds["GRPO"] + seconds["evaluate SFT"]


def test_the_figures_reproduce_from_the_seed_and_the_checkpoints(demo):
    """Each row comes from what the run left: the seed's tiny model, then each checkpoint."""
    out, _, summary = demo
    base, sft, grpo = summary["evaluation"]
    rows = [(base, _measure(*tiny_model(seed=3)))]
    rows += [(sft, _measure(*load(out / "sft-model"))), (grpo, _measure(*load(out / "grpo-model")))]
    for recorded, fresh in rows:
        for key in ("win_rate", "finished", "executed_calls", "valid_calls", "tokens"):
            assert recorded[key] == pytest.approx(fresh[key]), (recorded["player"], key)


def test_bad_options_are_refused_with_a_reason(capsys, tmp_path):
    from kit.demo import main

    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    config = tmp_path / "run.yaml"  # TrlParser's --config: the options as a file
    config.write_text("sft_steps: 0\n")
    for argv, message in (
        (["--sft-steps", "0"], "--sft-steps must be at least 1"),
        (["--eval-generations", "0"], "--eval-generations must be at least 1"),
        (["--sft-control", "-1"], "--sft-control must be 0 (no control) or more"),
        (["--sft-noise", "1.5"], "--sft-noise must be between 0 (the solver) and 1"),
        (["--sft-habit"], "--sft-habit: give the habit's rate with --sft-noise EPSILON"),
        (
            ["--game", "wordle", "--sft-noise", "0.6", "--sft-habit"],
            "--sft-habit: wordle has no habit move",
        ),
        (
            ["--sft-noise", "0.6", "--sft-habit", "right"],
            "--sft-habit: catch has no habit 'right': its habits are both, left",
        ),
        (["--threads", "0"], "--threads must be at least 1"),
        (["--layers", "0"], "--layers must be at least 1"),
        (["--hidden-size", "12"], "hidden_size must be a positive multiple of 8, got 12"),
        (["--temperature", "0"], "--temperature must be a positive number"),
        (["--game", "chess"], "and importing module chess registered no game"),
        (["--max-completion-length", "-4"], "--max-completion-length must be at least 1"),
        (["--out", str(a_file)], "is a file, not a folder"),
        (["--where", "ball_col"], "--where: 'ball_col' is not KEY=VALUE"),
        (["--where", "ball_col=0", "--where", "ball_col=1"], "'ball_col' is given twice"),
        (["--where", "column=0"], "not a catch task column"),
        (["--where", "rows=8"], "no catch train task has {'rows': 8}"),  # a held-out height
        (["--where", "ball_col=7"], "no catch train task"),
        (["--game", "echo", "--where", "x=1"], "drawn afresh"),
        (["--sft-turns", "0"], "--sft-turns must be at least 1"),
        (["--sft", "lr=1e-3"], "--sft: 'lr' is not a trl.SFTConfig field"),
        (["--sft", "max_steps=3"], "--sft: max_steps is set with --sft-steps"),
        (["--sft", "learning_rate=fast"], "--sft: learning_rate must be float, got 'fast'"),
        (["--grpo", "beta"], "--grpo: 'beta' is not KEY=VALUE"),
        (["--grpo", "lr=1e-4"], "'lr' is not a trl.GRPOConfig field"),
        (["--grpo", "learning_rat=1e-4"], "did you mean learning_rate?"),
        (["--grpo", "temperature=1"], "temperature is set with --temperature"),
        (["--grpo", "seed=1"], "seed is set with --seed"),
        (["--grpo", "learning_rate=fast"], "learning_rate must be float, got 'fast'"),
        (["--grpo", "learning_rate=Infinity"], "learning_rate must be a finite number, got inf"),
        (["--grpo", "num_iterations=1.5"], "num_iterations must be int, got 1.5"),
        (["--grpo", "beta=true"], "beta must be float, got True"),
        (  # TRL's own check, run before anything trains
            ["--grpo", "per_device_train_batch_size=30"],
            "generation_batch_size (30) must be divisible by num_generations (8)",
        ),
        (["--sft-from", str(tmp_path)], f"--sft-from: {tmp_path} is not a kit.demo run"),
        (  # a hub id, offline here: neither cached nor fetched
            ["--model", "no-such/model"],
            "--model no-such/model: not tiny, smollm2 or a model's folder, and as a hub id",
        ),
        (["--thinking"], "--thinking and --vllm are a pretrained model's"),
        (["--vllm"], "--thinking and --vllm are a pretrained model's"),
        (["--trackio-space-id", "me/runs"], "--report-to: a trackio Space ('me/runs')"),
        (["--grpo", "report_to=trackio"], "report_to is set with --report-to"),
        (["--config", str(config)], "--sft-steps must be at least 1"),  # a config file's value
        (["--model", str(tmp_path)], "not a whole checkpoint: no tokenizer (tokenizer.json or "),
        (["--model", str(tmp_path), "--layers", "2"], "--layers is the tiny model's"),
        (["--grpo-where", "rows=8"], "--grpo-where: no catch train task has {'rows': 8}"),
        (["--grpo-where", "rows=[8,10]"], "no catch train task has {'rows': [8, 10]}"),
        (
            ["--where", "ball_col=0", "--grpo-where", "ball_col=1"],
            "--grpo-where: ['ball_col'] already set by --where",
        ),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert a_file.read_text() == "mine"
    assert not (tmp_path / "runs").exists()  # refused before any run folder was made


def test_a_bare_sft_habit_is_the_games_first_and_the_command_names_it(tmp_path):
    """``--sft-habit`` alone (the documented runs before habits had names, and a config file's
    ``sft_habit: true``) is Catch's first habit, "both"; the printed command names it."""
    from kit.demo import _parse

    config = tmp_path / "run.yaml"
    config.write_text("sft_noise: 0.7\nsft_habit: true\n")
    for argv in (["--sft-noise", "0.7", "--sft-habit"], ["--config", str(config)]):
        args = _parse([*argv, "--out", str(tmp_path / f"run{len(argv)}")])
        assert args.sft_habit == "both" and args.command.endswith(
            "--sft-noise 0.7 --sft-habit both"
        )
    args = _parse(["--sft-noise", "0.7", "--sft-habit", "left", "--out", str(tmp_path / "left")])
    assert args.sft_habit == "left" and args.command.endswith("--sft-habit left")


def test_only_a_hub_id_lifts_the_runs_offline_default(monkeypatch):
    """huggingface_hub reads HF_HUB_OFFLINE once, when it is imported: the run decides from
    --model alone, before its parser imports it, and a user's own setting wins."""
    from kit.demo import _offline

    for argv, offline in (
        ([], "1"),
        (["--model", "smollm2"], "1"),
        (["--game", "wordle", "--model=tiny"], "1"),
        (["--model", "Qwen/Qwen3-0.6B"], None),
    ):
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        _offline(argv)
        assert os.environ.get("HF_HUB_OFFLINE") == offline, argv
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    _offline([])
    assert os.environ["HF_HUB_OFFLINE"] == "0"


def test_a_warm_up_to_start_from_is_checked_before_anything_runs(capsys, tmp_path):
    """--sft-from takes a run folder with its whole SFT checkpoint, and its game, warm-up and
    model size: an option that contradicts them is refused, not silently overruled."""
    from kit.models import save

    run = tmp_path / "earlier"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"game": "catch", "sft": {"steps": 7}}))
    (run / "sft-model").mkdir()
    (run / "sft-model" / "config.json").write_text("{}")
    with pytest.raises(SystemExit):
        main(["--sft-from", str(run)])
    assert f"{run} has no whole SFT checkpoint: no tokenizer" in capsys.readouterr().err
    shutil.rmtree(run / "sft-model")
    save(*tiny_model(hidden_size=64, num_layers=1), run / "sft-model")
    for argv, message in (
        (["--sft-steps", "7"], f"--sft-steps: the warm-up is {run}'s (7 SFT steps on its model)"),
        (["--hidden-size", "64"], "--hidden-size: the warm-up is"),
        (["--layers", "1"], "--layers: the warm-up is"),
        (["--tie-word-embeddings"], "--tie-word-embeddings: the warm-up is"),
        (["--no-tie-word-embeddings"], "--no-tie-word-embeddings: the warm-up is"),
        (["--game", "wordle"], f"--game wordle: {run} warmed up a model on catch"),
        (["--sft-noise", "0.3"], f"--sft-noise: the warm-up is {run}'s"),
        (["--sft-habit"], f"--sft-habit: the warm-up is {run}'s"),
        (["--sft-turns", "1"], f"--sft-turns: the warm-up is {run}'s"),
        (["--sft", "learning_rate=1e-3"], f"--sft: the warm-up is {run}'s"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["--sft-from", str(run), *argv])
        assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["sft-model", "summary.json"]
    # a run that itself started from another's warm-up has no SFT model of its own
    chained = tmp_path / "chained"
    chained.mkdir()
    (chained / "summary.json").write_text(
        json.dumps({"game": "catch", "sft": {"steps": 7, "from": str(run)}})
    )
    with pytest.raises(SystemExit):
        main(["--sft-from", str(chained)])
    assert f"{chained} trained no SFT model; its warm-up is {run}" in capsys.readouterr().err


def test_grpo_from_an_earlier_warm_up_repeats_that_run(demo, tmp_path):
    """--sft-from trains GRPO from an earlier run's SFT checkpoint and leaves that run as it was;
    at that run's seed and recipe it repeats its SFT and GRPO rows and its GRPO log exactly."""
    source, _, earlier = demo
    files = {path: path.stat().st_mtime_ns for path in source.rglob("*")}
    out = tmp_path / "again"
    budget = ("--max-completion-length", str(BUDGET))
    done = _run("--sft-from", str(source), *ARGS[2:], *budget, "--seed", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert {path: path.stat().st_mtime_ns for path in source.rglob("*")} == files

    assert summary["command"] == (
        f"python -m kit.demo --game catch --sft-from {source} --grpo-steps 1 --eval-generations 2 "
        f"--temperature 0.5 --max-completion-length {BUDGET} --seed 3 --threads 2"
    )
    records = summary["evaluation"]
    assert [r["player"] for r in records] == ["SFT", "SFT + GRPO"]  # no base model to evaluate
    assert records == earlier["evaluation"][1:]
    assert summary["grpo"]["log"] == earlier["grpo"]["log"]
    assert summary["grpo"]["changed"] == {}
    assert summary["sft"] == {**earlier["sft"], "from": str(source)}
    assert summary["model"] == earlier["model"]
    assert summary["checkpoints"] == {
        "sft": str(source / "sft-model"),
        "grpo": str(out / "grpo-model"),
    }


def test_the_control_runs_from_an_earlier_warm_up_too(demo, tmp_path):
    """--sft-from with --sft-control: the control trains the earlier run's SFT checkpoint further
    with the same recipe (this once failed: the recipe was only set when the run warmed up)."""
    source, _, _ = demo
    out = tmp_path / "control"
    budget = ("--max-completion-length", str(BUDGET))
    options = ("--sft-from", str(source), "--sft-control", "1", "--out", str(out))
    done = _run(*options, *ARGS[2:], *budget, "--seed", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [r["player"] for r in summary["evaluation"]] == ["SFT", "SFT + GRPO", "SFT + more SFT"]
    assert summary["sft_control"]["steps"] == 1
    load(out / "sft-control-model")


def test_a_changed_grpo_recipe_reaches_the_trainer(demo, tmp_path):
    """--grpo sets GRPOConfig fields: at learning rate 0 the GRPO model is the SFT model weight
    for weight, and beta > 0 makes TRL log its KL term; the rest of the recipe stays."""
    import torch

    source = demo[0]
    out = tmp_path / "ablation"
    recipe = ("--grpo", "learning_rate=0", "--grpo", "beta=0.1")
    budget = ("--max-completion-length", str(BUDGET))
    done = _run("--sft-from", str(source), *ARGS[2:], *budget, *recipe, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["command"].endswith("--grpo learning_rate=0.0 --grpo beta=0.1")
    grpo = summary["grpo"]
    assert grpo["changed"] == {"learning_rate": 0.0, "beta": 0.1}
    assert (grpo["learning_rate"], grpo["beta"]) == (0.0, 0.1)
    assert grpo["num_generations"] == GRPO["num_generations"]
    assert all("kl" in entry for entry in grpo["log"])
    sft_model, grpo_model = load(source / "sft-model")[0], load(out / "grpo-model")[0]
    for (name, before), after in zip(
        sft_model.state_dict().items(), grpo_model.state_dict().values(), strict=True
    ):
        assert torch.equal(before, after), name
    # --table: a column for GRPO's recipe, as the two runs' recipes differ
    header, _, first, second = main(
        ["--table", str(source / "summary.json"), str(out / "summary.json")]
    )["table"].splitlines()
    assert header.startswith("| seed | GRPO | SFT win rate |")
    assert first.split(" | ")[1] == "1 step"
    assert second.split(" | ")[1] == "1 step; learning_rate=0; beta=0.1"


def test_where_and_the_sft_control_are_in_every_evaluation_and_in_the_command(tmp_path):
    """One run with both options: --where narrows GRPO and every evaluation; --sft-control
    trains the saved SFT checkpoint (not the GRPO model) further, and compares it. On a tiny
    model of another size, untied, which the summary, the command, the checkpoints and the
    table record."""
    out = tmp_path / "left"
    size = ("--hidden-size", "64", "--layers", "1", "--no-tie-word-embeddings")
    options = ("--where", "ball_col=0", "--sft-control", "3", *size)
    done = _run(*ARGS, "--max-completion-length", str(BUDGET), *options, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["where"] == {"ball_col": 0}
    warm_up = "--sft-steps 5 --hidden-size 64 --layers 1 --no-tie-word-embeddings --grpo-steps 1 "
    assert warm_up in summary["command"]
    assert summary["command"].endswith("--seed 0 --threads 2 --where ball_col=0 --sft-control 3")
    assert summary["model"] == {"hidden_size": 64, "layers": 1, "tie_word_embeddings": False}
    for checkpoint in summary["checkpoints"].values():
        config = load(checkpoint)[0].config
        assert (config.hidden_size, config.num_hidden_layers) == (64, 1)
        assert config.tie_word_embeddings is False
    held_out = len(TaskProvider("catch", "eval", where={"ball_col": 0}))
    assert held_out == 2  # heights 8 and 10
    records = summary["evaluation"]
    assert [r["player"] for r in records] == ["base", "SFT", "SFT + GRPO", "SFT + more SFT"]
    assert [r["episodes"] for r in records] == [2 * held_out] * 4
    assert all(c["tasks"] == held_out for c in summary["grpo_vs_sft"])

    control = summary["sft_control"]
    assert summary["checkpoints"]["sft_control"] == str(out / "sft-control-model")
    assert control["steps"] == 3 and [e["step"] for e in control["losses"]] == [1, 2, 3]
    more, sft, grpo = records[3], records[1], records[2]
    assert control["more_sft_vs_sft"]["difference"] == pytest.approx(
        more["win_rate"] - sft["win_rate"]
    )
    assert control["grpo_vs_more_sft"]["difference"] == pytest.approx(
        grpo["win_rate"] - more["win_rate"]
    )
    assert "more SFT against SFT: win rate" in done.stdout
    # --table prints the results row of this run, the control's columns included.
    header, rule, row = main(["--table", str(out / "summary.json")])["table"].splitlines()
    assert header.split(" | ")[3:] == [
        "SFT + more SFT",
        "GRPO − SFT",
        "more SFT − SFT",
        "GRPO − more SFT",
        "wall time",
        "peak memory |",
    ]
    cells = row.strip("| ").split(" | ")
    assert cells[0] == "0" and len(cells) == 9 and rule.count("---") == 9
    # beside a run of the default model, a column says which warm-up each row's is
    default = {**summary, "model": {"hidden_size": 128, "layers": 2}}  # a summary before the option
    (tmp_path / "default.json").write_text(json.dumps(default))
    table = main(["--table", str(out / "summary.json"), str(tmp_path / "default.json")])["table"]
    header, _, mine, theirs = table.splitlines()
    assert header.startswith("| seed | warm-up | SFT win rate |")
    assert mine.split(" | ")[1] == "5 SFT steps; 64 wide, 1 layers; untied embeddings"
    assert theirs.split(" | ")[1] == "5 SFT steps; tied embeddings"  # as every run before it
    assert cells[3].startswith(f"{more['win_rate']:.2f} [{more['win_rate_low']:.2f}, ")
    difference = control["grpo_vs_more_sft"]["difference"]
    assert cells[6].startswith("0.00" if abs(difference) < 0.005 else f"{difference:+.2f}"[1:])
    # The control is the SFT checkpoint trained 3 more steps, weight for weight.

    from kit.train import warm_up

    _assert_control_is_more_sft(out, "catch", 3, tmp_path / "again")


def test_a_warm_up_on_openings_at_its_own_rate_is_recorded_and_its_control_matches(tmp_path):
    """--sft-turns 1 --sft learning_rate=...: the warm-up and the more-SFT control both train on
    each shipped game's first turn (kit.sft.first_turns) at that rate; the summary, the command
    and the table say so."""
    from kit.sft import first_turns, load_sft

    out = tmp_path / "openings"
    options = ("--sft-turns", "1", "--sft", "learning_rate=1e-3", "--sft-control", "2")
    options += ("--where", "ball_col=0")
    done = _run(*ARGS, "--max-completion-length", str(BUDGET), *options, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    sft = summary["sft"]
    assert (sft["turns"], sft["changed"], sft["learning_rate"]) == (
        1,
        {"learning_rate": 1e-3},
        1e-3,
    )
    assert sft["data"] == "the first 1 turn(s) of each game of kit.sft.load_sft('catch')"
    assert " --sft-turns 1 --sft learning_rate=0.001 " in summary["command"]
    default = {**summary, "sft": {"steps": 5}}  # the same run without the options
    (tmp_path / "default.json").write_text(json.dumps(default))
    table = main(["--table", str(out / "summary.json"), str(tmp_path / "default.json")])["table"]
    _, _, mine, theirs = table.splitlines()
    label = "5 SFT steps, first 1 turn(s), learning_rate=0.001; untied embeddings"
    assert mine.split(" | ")[1] == label
    assert theirs.split(" | ")[1] == "5 SFT steps; untied embeddings"
    openings = first_turns(load_sft("catch"), 1)
    _assert_control_is_more_sft(out, openings, 2, tmp_path / "again", learning_rate=1e-3)


@pytest.mark.parametrize("habit", [False, "left"])
def test_a_noisy_demonstrator_is_imitated_evaluated_and_compared(tmp_path, habit):
    """--sft-noise: the warm-up and the more-SFT control both imitate the solver's games with
    random moves in them (the same set; with --sft-habit left, Catch's one-sided habit),
    the demonstrator is evaluated on the same held-out tasks as the models, and GRPO is compared
    with it, paired; the command and the table say so."""

    from kit.sft import sft_dataset
    from kit.solvers.policies import noisy_policy

    out = tmp_path / "noisy"
    options = ("--sft-noise", "0.5", "--sft-control", "2", "--where", "ball_col=4")
    options += ("--sft-habit", habit) if habit else ()
    done = _run(*ARGS, "--max-completion-length", str(BUDGET), *options, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    records = summary["evaluation"]
    players = ["demonstrator", "base", "SFT", "SFT + GRPO", "SFT + more SFT"]
    assert [r["player"] for r in records] == players
    assert summary["sft"]["noise"] == 0.5 and "--sft-noise 0.5" in summary["command"]
    assert summary["sft"].get("habit", False) == habit
    assert ("--sft-habit left" in summary["command"]) is bool(habit)
    # the demonstrator's figures are the noisy solver's own play on those tasks
    tasks = [t.row() for t in TaskProvider("catch", "eval", where={"ball_col": 4})]
    player = noisy_policy(0.5, habit=habit)
    alone = evaluate(player, "catch", tasks=tasks, num_generations=2, seed=0)
    assert records[0]["win_rate"] == alone.records()[0]["win_rate"]
    taught = summary["grpo_vs_demonstrator"]
    assert taught["difference"] == pytest.approx(records[3]["win_rate"] - records[0]["win_rate"])
    assert "GRPO against the demonstrator it was warmed up on" in done.stdout
    header = main(["--table", str(out / "summary.json")])["table"].splitlines()[0]
    assert header.startswith("| seed | demonstrator | SFT win rate |")
    assert "| GRPO − demonstrator |" in header
    # the control trained the SFT checkpoint further on the demonstrator's set, not the solver's
    data = sft_dataset("catch", num_games=200, seed=0, noise=0.5, reasoning=False, habit=habit)
    _assert_control_is_more_sft(out, data, 2, tmp_path / "again")
    # --evaluate plays the demonstrator and the control anew too, and compares them as the run did
    again = main(["--evaluate", str(out), "--eval-generations", "2", "--seed", "5"])
    rates = {r["player"]: r["win_rate"] for r in again["evaluation"]}
    assert list(rates) == ["demonstrator", "SFT", "SFT + GRPO", "SFT + more SFT"]
    fresh = evaluate(player, "catch", tasks=tasks, num_generations=2, seed=5)
    assert rates["demonstrator"] == fresh.records()[0]["win_rate"]
    model, tokenizer = load(out / "sft-control-model")
    fresh = evaluate(model, "catch", tokenizer, tasks=tasks, num_generations=2, greedy=False,
                     temperature=0.5, seed=5, max_completion_length=BUDGET)  # fmt: skip
    assert rates["SFT + more SFT"] == pytest.approx(fresh.records()[0]["win_rate"])
    for key, first, second in (
        ("more_sft_vs_sft", "SFT", "SFT + more SFT"),
        ("grpo_vs_more_sft", "SFT + more SFT", "SFT + GRPO"),
        ("grpo_vs_demonstrator", "demonstrator", "SFT + GRPO"),
    ):
        assert again[key]["difference"] == pytest.approx(rates[second] - rates[first]), key
    assert [row["ball_col"] for row in again["breakdown"]["rows"]] == [4]


def test_the_table_of_runs_reads_their_summaries(demo, tmp_path, capsys):
    """``--table`` trains nothing: one Markdown row per summary.json, with each model's win
    rate and interval, GRPO − SFT as the run measured it, its wall time and peak memory (a
    summary from before they were measured has neither column); a missing file is refused."""
    out, _, summary = demo
    runs = sorted((ROOT / "runs" / "demo").glob("*"))
    table = main(["--table", str(out / "summary.json"), str(out / "summary.json")])["table"]
    header, _, *rows = table.splitlines()
    # no control in this run
    assert header == "| seed | SFT win rate | SFT + GRPO | GRPO − SFT | wall time | peak memory |"
    sft, grpo = summary["evaluation"][1:]
    (win,) = [c for c in summary["grpo_vs_sft"] if c["metric"] == "win_rate"]
    cells = rows[0].strip("| ").split(" | ")
    assert len(rows) == 2 and cells[0] == "3"
    assert (
        cells[1] == f"{sft['win_rate']:.2f} [{sft['win_rate_low']:.2f}, {sft['win_rate_high']:.2f}]"
    )
    assert cells[2].startswith(f"{grpo['win_rate']:.2f} ")
    p = win["p_value"]
    assert p < 0.0005 or cells[3].endswith(f"p {p:.3f}" if p < 0.1 else f"p {p:.2f}")
    minutes, memory = summary["seconds"]["total"] / 60, max(summary["peak_rss_gb"].values())
    assert cells[4:] == [f"{minutes:.0f} min (2 threads)", f"{memory:.1f} GB"]
    assert table in capsys.readouterr().out
    older = {k: v for k, v in summary.items() if k != "peak_rss_gb"}
    (tmp_path / "older.json").write_text(json.dumps(older))
    header = main(["--table", str(out / "summary.json"), str(tmp_path / "older.json")])["table"]
    assert header.splitlines()[0] == "| seed | SFT win rate | SFT + GRPO | GRPO − SFT |"
    assert sorted((ROOT / "runs" / "demo").glob("*")) == runs  # it made no run folder
    with pytest.raises(SystemExit) as refused:
        main(["--table", str(tmp_path / "nothing.json")])
    assert refused.value.code == 2 and "no such file" in capsys.readouterr().err


def test_the_demo_never_overwrites_an_earlier_run(demo):
    out, _, summary = demo
    again = _run("--sft-steps", "1", "--out", str(out))
    assert again.returncode == 2 and "is not empty" in again.stderr
    assert json.loads((out / "summary.json").read_text()) == summary


def test_the_trend_of_a_run_leaves_out_steps_that_did_not_sample():
    """With num_iterations=2 TRL samples every other step and logs the rollouts' figures only
    then: a tenth's mean is over the steps that logged a figure, not a mean with zeros."""
    from kit.demo import trend

    log = []
    for step in range(1, 21):
        entry = {"step": step, "loss": 0.1}
        if step % 2:  # a sampling step
            entry |= {"reward": step / 10, "flat_groups": 0.5, "tools/call_frequency": 8.0}
        log.append(entry)
    lines = trend(log)
    assert len(lines) == 10
    assert lines[0] == "steps       1-2  reward 0.100  flat_groups 0.500  call_frequency 8.000"
    assert lines[-1].startswith("steps     19-20  reward 1.900  ")
    assert trend(log, parts=1) == [
        "steps      1-20  reward 1.000  flat_groups 0.500  call_frequency 8.000"
    ]


def test_a_pretrained_model_trains_with_its_recipe_and_grpo_alone_plays_the_chosen_tasks(tmp_path):
    """``--model FOLDER``: a saved model goes through the runbook as a pretrained one (LoRA
    adapters, the recipe's batch, learning rate and sampling, no base evaluation); ``--grpo-where``
    narrows GRPO's tasks and leaves every held-out task to the evaluations; the summary records
    the model, the peak memory and kit.masks.build against every trajectory GRPO trained on."""
    from kit.defaults import CPU_GRPO, CPU_TURN_TOKENS, LORA
    from kit.models import save
    from kit.train import recipe

    folder = tmp_path / "pretrained"
    save(*tiny_model(seed=5), folder)
    out = tmp_path / "run"
    done = _run(
        "--model", str(folder), "--sft-steps", "2", "--grpo-steps", "1", "--eval-generations", "1",
        "--max-completion-length", str(BUDGET), "--grpo-where", "rows=[5,6]", "--out", str(out),
        "--grpo", "learning_rate=3e-4",  # a field the recipe sets too: the option wins
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    r = recipe(str(folder), "catch", lora=True)
    assert summary["model"] == {"name": str(folder), "parameters": r.parameters, **r.load,
                                "lora": LORA}  # fmt: skip
    assert [e["player"] for e in summary["evaluation"]] == ["SFT", "SFT + GRPO"]
    assert all(e["episodes"] == len(TaskProvider("catch", "eval")) for e in summary["evaluation"])
    assert summary["grpo_where"] == {"rows": [5, 6]}
    assert summary["sft"]["learning_rate"] == r.sft["learning_rate"]
    grpo = summary["grpo"]
    assert grpo["temperature"] == CPU_GRPO["temperature"] == summary["temperature"]
    for key in ("per_device_train_batch_size", "num_generations"):
        assert grpo[key] == r.grpo[key], key
    assert grpo["learning_rate"] == 3e-4 != r.grpo["learning_rate"]
    # the CPU recipe's turn cap reached GRPO and the evaluations alike
    cap = {"max_new_tokens": CPU_TURN_TOKENS}
    assert grpo["generation_kwargs"] == summary["generation_kwargs"] == cap
    assert grpo["gradient_checkpointing"] is False
    masks = summary["masks"]
    assert masks["trajectories"] == CPU_GRPO["per_device_train_batch_size"]
    assert masks["exact"] + len(masks["other"]) == masks["trajectories"]
    assert masks["tokens"] > 0 and summary["peak_rss_gb"]["total"] > 0.1
    assert f"kit.masks.build against the trainer: {masks['exact']} of " in done.stdout
    assert "--model " + str(folder) in summary["command"]
    assert "--grpo-where rows=[5,6] " in summary["command"]
    assert summary["command"].endswith("--grpo learning_rate=0.0003")
    # the rollouts GRPO trained on were on the chosen boards only, 8 of them
    played = summary["grpo"]["tasks"]
    assert sum(played.values()) == 8 and {json.loads(t)["rows"] for t in played} <= {5, 6}


def test_a_run_is_evaluated_again_anew_and_nothing_of_it_is_overwritten(demo, capsys):
    """``--evaluate RUN``: both checkpoints played again as the run played them, at another
    seed and episode count, compared, written beside the run; the figures are those of
    evaluating each checkpoint by hand; a second time, the run's own seed, or an option that
    would change the evaluation is refused, and the run's files are untouched."""
    out, _, summary = demo
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    record = main(["--evaluate", str(out), "--eval-generations", "3", "--seed", "5"])
    written = out / "evaluation-seed5-3-per-task.json"
    assert json.loads(written.read_text()) == json.loads(json.dumps(record))
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p != written} == before
    held_out = len(TaskProvider("catch", "eval"))
    sft, grpo = record["evaluation"]
    assert (sft["player"], grpo["player"]) == ("SFT", "SFT + GRPO")
    assert sft["episodes"] == grpo["episodes"] == 3 * held_out
    for recorded, folder in ((sft, "sft-model"), (grpo, "grpo-model")):
        model, tokenizer = load(out / folder)
        fresh = evaluate(model, "catch", tokenizer, num_generations=3, greedy=False,
                         temperature=0.5, seed=5, max_completion_length=BUDGET).records()[0]  # fmt: skip
        for key in ("win_rate", "finished", "executed_calls", "tokens"):
            assert recorded[key] == pytest.approx(fresh[key]), (folder, key)
    (win,) = [c for c in record["grpo_vs_sft"] if c["metric"] == "win_rate"]
    assert win["difference"] == pytest.approx(grpo["win_rate"] - sft["win_rate"])
    assert record["run_grpo_vs_sft"] == summary["grpo_vs_sft"]
    assert "played anew" in capsys.readouterr().out
    for argv, message in (
        (["--seed", "5", "--eval-generations", "3"], "exists; it is not overwritten"),
        (["--seed", "3"], "sampled with seed 3; give another --seed"),
        (["--seed", "6", "--temperature", "1"], "--temperature would not be the run's"),
        (["--seed", "6", "--eval-generations", "0"], "--eval-generations must be at least 1"),
    ):
        with pytest.raises(SystemExit) as refused:
            main(["--evaluate", str(out), *argv])
        assert refused.value.code == 2 and message in capsys.readouterr().err, argv
    assert json.loads(written.read_text()) == json.loads(json.dumps(record))


def _assert_control_is_more_sft(
    out: Path, data: Any, steps: int, folder: Path, **overrides: Any
) -> None:
    """The run's control checkpoint is its SFT checkpoint warmed up ``steps`` more on ``data``
    (with the recipe's ``overrides``), bit for bit."""
    import torch

    from kit.demo import THREADS
    from kit.runs import pin_threads
    from kit.train import warm_up

    model, tokenizer = load(out / "sft-model")
    threads = torch.get_num_threads()
    pin_threads(THREADS)  # the demo's: sums split across threads differ in the last bit
    try:
        warm_up(model, tokenizer, data, steps, 0, folder, **overrides)
    finally:
        torch.set_num_threads(threads)
    control_model, _ = load(out / "sft-control-model")
    for (name, mine), theirs in zip(
        model.state_dict().items(), control_model.state_dict().values(), strict=True
    ):
        assert torch.equal(mine, theirs), name
