"""kit.evaluate: the intervals are the textbook ones, players of known behaviour get the figures
they must, and the model path is real generation through kit.rollout.

Scripted models (tests/scripted.py) replace only the sampling; the tool loop, the envs, the
replay and the reward all run for real.
"""

from __future__ import annotations

import copy
import math

import pytest

pytest.importorskip("trl")

from kit.builtin.catch import CATCH_COLUMNS, CATCH_EVAL_ROWS  # noqa: E402
from kit.episode import assistant_message  # noqa: E402
from kit.evaluate import (  # noqa: E402
    METRICS,
    PUBLISHED,
    Evaluation,
    by_task,
    compare,
    evaluate,
    evaluate_in_turn,
    table,
    text_table,
)
from kit.models import tiny_model  # noqa: E402
from kit.solvers.policies import noisy_policy, random_policy, solver_policy  # noqa: E402
from kit.stats import bootstrap_mean, paired_difference, wilson  # noqa: E402
from kit.viz import plot_evaluation  # noqa: E402
from tests.sampling import (  # noqa: E402
    EXPLICIT,
    MODEL_MIN_P,
    SAMPLING,
    grpo_generation_config,
    qwen_like_model,
)
from tests.scripted import ScriptedGeneration, tool_call  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


def scripted(tiny, turns: list[str]):
    """A copy of the tiny model whose every episode plays ``turns`` (then stops calling tools)."""
    model, tokenizer = tiny
    model = copy.deepcopy(model)
    ScriptedGeneration(tokenizer, lambda text: turns).install(model)
    return model, tokenizer


STAY = tool_call("stay")
CATCH_EVAL_TASKS = CATCH_COLUMNS * len(CATCH_EVAL_ROWS)  # every column of each held-out height
# OpenSpiel's default 10 x 5 board (one of the eval heights), every starting column: each game
# takes exactly nine moves, so a script of nine stays plays every game to its end.
TEN_ROWS = [{"rows": 10, "ball_col": column} for column in range(CATCH_COLUMNS)]


# -- intervals -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        (0, 10, 0.0, 0.2775),  # published Wilson 95% bounds (Newcombe 1998, Brown et al. 2001)
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (1, 5, 0.0362, 0.6245),
    ],
)
def test_wilson_matches_published_bounds(successes, trials, low, high):
    got = wilson(successes, trials)
    assert got == pytest.approx((low, high), abs=5e-4)


def test_wilson_rejects_impossible_counts_and_is_undefined_without_trials():
    assert all(math.isnan(x) for x in wilson(0, 0))
    for successes, trials in ((3, 2), (-1, 4)):
        with pytest.raises(ValueError, match="successes"):
            wilson(successes, trials)


def test_bootstrap_resamples_tasks_and_is_seeded():
    groups = [[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]
    low, high = bootstrap_mean(groups, seed=3)
    assert (low, high) == bootstrap_mean(groups, seed=3)
    assert 0.0 <= low < 0.5 < high <= 1.0
    assert bootstrap_mean([[2.0, 2.0], [2.0]]) == (2.0, 2.0)  # no spread, no width
    assert bootstrap_mean([[0.0, 1.0]]) == (0.5, 0.5)  # one task: nothing to resample
    # the task is the unit: two tasks of many identical episodes are as uncertain as two episodes
    wide = bootstrap_mean([[0.0] * 50, [1.0] * 50], seed=0)
    assert wide[0] == 0.0 and wide[1] == 1.0


# -- policies --------------------------------------------------------------------------------------
@pytest.mark.parametrize("game", ["catch", "wordle"])
def test_the_solver_wins_every_eval_task(game):
    result = evaluate(solver_policy(), game, name="solver")
    row = result[game]
    assert row.episodes == row.tasks == {"catch": CATCH_EVAL_TASKS, "wordle": 31}[game]
    assert row.win_rate.value == 1.0 and row.win_rate.low > 0.5
    assert row.valid_call_rate.value == 1.0 and row.valid_calls == row.executed_calls > 0
    assert row.with_call.value == 1.0
    assert math.isnan(row.tokens.value)  # no tokenizer: no token ids
    won = result.trajectories
    assert all(t.won and t.env == game for t in won)
    assert row.mean_reward.low <= row.mean_reward.value <= row.mean_reward.high
    assert row.mean_reward.value > 1.0  # a win pays 1 plus its bonuses in the default reward


def test_players_rank_as_expected_and_samples_multiply_episodes():
    solver = evaluate(solver_policy(), "catch", name="solver")
    noisy = evaluate(noisy_policy(0.5), "catch", num_generations=4, name="noisy")
    floor = evaluate(random_policy(), "catch", num_generations=4, name="random")
    assert noisy["catch"].episodes == floor["catch"].episodes == 4 * CATCH_EVAL_TASKS
    assert noisy["catch"].tasks == CATCH_EVAL_TASKS
    rates = [e["catch"].win_rate.value for e in (solver, noisy, floor)]
    assert rates[0] > rates[1] > rates[2]
    assert evaluate(noisy_policy(0.5), "catch", num_generations=4).games["catch"].win_rate == (
        noisy["catch"].win_rate
    )  # seeded


def test_policy_episodes_get_token_ids_and_states_with_a_tokenizer(tiny):
    _, tokenizer = tiny
    result = evaluate(solver_policy(), "catch", tokenizer, num_tasks=2)
    row = result["catch"]
    for trajectory in row.trajectories:
        counts = trajectory.counts()
        assert counts["model"] > 0 and counts["env"] > 0 and counts["prompt"] > 0
        assert len(trajectory.states) == 9  # one per turn: the env after the turn's call
        states = trajectory.states
        assert all(a in b and a != b for a, b in zip(states, states[1:], strict=False))
        last_board = "".join(trajectory.states[-1].splitlines()[-10:])
        assert last_board.count("x") == 1 and "o" not in last_board  # caught: x covers o
    assert row.tokens.value == sum(t.counts()["model"] for t in row.trajectories) / 2


def test_finished_counts_games_that_reached_their_end():
    solver = evaluate(solver_policy(), "catch")["catch"]
    assert solver.finished.value == 1.0
    # capped at three rounds, no game of 8 or 10 rows reaches its end
    capped = evaluate(solver_policy(), "catch", max_tool_calling_iterations=3)["catch"]
    assert capped.finished.value == 0.0 and capped.finished.n == CATCH_EVAL_TASKS
    assert [sum(v) for v in capped.values["finished"]] == [0.0] * CATCH_EVAL_TASKS


def test_the_solver_wins_in_as_many_moves_as_the_boards_take_and_never_calls_wrongly():
    row = evaluate(solver_policy(), "catch")["catch"]
    # a Catch game on r rows takes r - 1 moves: the eval heights' mean, every game won
    assert row.moves_per_win.value == sum(rows - 1 for rows in CATCH_EVAL_ROWS) / 2
    assert row.moves_per_win.n == CATCH_EVAL_TASKS
    assert row.invalid_calls.value == 0.0 and row.invalid_calls.n == CATCH_EVAL_TASKS
    floor = evaluate(random_policy(), "catch", num_generations=4)["catch"]
    won = [t for t in floor.trajectories if t.won]
    assert floor.moves_per_win.n == len(won) > 0  # over won episodes only
    assert floor.moves_per_win.value == pytest.approx(
        sum(len(t.tool_calls) for t in won) / len(won)
    )


# -- paired comparison -----------------------------------------------------------------------------
def test_compare_separates_players_of_known_strength_and_not_a_player_from_itself():
    floor = evaluate(random_policy(), "catch", num_generations=4, seed=2, name="random")
    noisy = evaluate(noisy_policy(0.2), "catch", num_generations=4, seed=2, name="noisy")
    better = compare(floor, noisy, "catch", "win_rate")
    assert better.difference.value == pytest.approx(
        noisy["catch"].win_rate.value - floor["catch"].win_rate.value
    )
    assert better.difference.low > 0 and better.p_value < 0.05 and better.tasks == CATCH_EVAL_TASKS
    assert "paired bootstrap over 10 tasks" in str(better)
    worse = compare(noisy, floor, "catch", "win_rate")
    assert worse.difference.value == pytest.approx(-better.difference.value)
    assert worse.difference.high < 0
    again = evaluate(random_policy(), "catch", num_generations=8, seed=2, name="random again")
    same = compare(floor, again, "catch", "win_rate")  # the same player, more episodes
    assert same.difference.low <= 0 <= same.difference.high and same.p_value > 0.05
    assert compare(floor, noisy, "catch", "win_rate") == better  # seeded


def test_compare_refuses_unpaired_tasks_and_per_call_metrics():
    first = evaluate(random_policy(), "catch", num_generations=2, seed=0)
    other_tasks = evaluate(random_policy(), "catch", num_generations=2, seed=0, num_tasks=4)
    with pytest.raises(ValueError, match="different catch tasks"):
        compare(first, other_tasks, "catch")
    with pytest.raises(ValueError, match="metric must be one of"):
        compare(first, first, "catch", "valid_call_rate")


def stay_policy():
    """A Catch player that never moves: it wins exactly the games whose ball falls in column 2."""
    return lambda env_cls, seed: lambda messages: assistant_message("", [("stay", {})])


def test_by_task_shows_where_players_differ_column_by_column():
    players = [
        evaluate(solver_policy(), "catch", seed=1, name="solver"),
        evaluate(stay_policy(), "catch", seed=1, name="stay"),
        evaluate(random_policy(), "catch", num_generations=4, seed=1, name="random"),
    ]
    # the solver and the stayer play each task once, random play four times: the episodes column
    # is the first evaluation's, and each player's mean is over its own episodes
    rows = by_task(players, "catch", by="ball_col").to_dict("records")
    middle = CATCH_COLUMNS // 2
    assert [row["ball_col"] for row in rows] == list(range(CATCH_COLUMNS))
    assert all(row["tasks"] == len(CATCH_EVAL_ROWS) == row["episodes"] for row in rows)
    assert [row["solver"] for row in rows] == [1.0] * CATCH_COLUMNS
    assert [row["stay"] for row in rows] == [float(c == middle) for c in range(CATCH_COLUMNS)]
    for row in rows:  # random play's mean, counted from its episodes directly
        won = [t.won for t in players[2].trajectories if t.task["ball_col"] == row["ball_col"]]
        assert len(won) == 4 * len(CATCH_EVAL_ROWS)
        assert row["random"] == pytest.approx(sum(won) / len(won))
    per_task = by_task(players[:2], "catch", "finished")  # one row per task, by its reset columns
    assert len(per_task) == CATCH_EVAL_TASKS and set(per_task["tasks"]) == {1}
    assert set(per_task["solver"]) == set(per_task["stay"]) == {1.0}  # both play to the end


def test_by_task_refuses_what_it_cannot_line_up():
    first = evaluate(random_policy(), "catch", num_generations=2, seed=0, name="a")
    other_tasks = evaluate(random_policy(), "catch", seed=0, num_tasks=4, name="b")
    with pytest.raises(ValueError, match="different catch tasks"):
        by_task([first, other_tasks], "catch")
    with pytest.raises(ValueError, match="no column 'secret'; they have"):
        by_task([first], "catch", by="secret")
    with pytest.raises(ValueError, match="name the evaluations apart"):
        by_task([first, first], "catch")
    first.name = "episodes"
    with pytest.raises(ValueError, match=r"other than \['task', 'tasks', 'episodes'\]"):
        by_task([first], "catch")
    with pytest.raises(ValueError, match="metric must be one of"):
        by_task([first], "catch", "valid_call_rate")
    with pytest.raises(ValueError, match="at least one"):
        by_task([], "catch")


# -- models ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_given_tasks_without_a_prompt_get_the_games_prompt(tiny):
    """Rows with only the reset columns are played with the prompt training rows carry."""
    from kit.tasks import TaskProvider

    model, tokenizer = tiny
    rows = [t.row() for t in TaskProvider("catch", "eval", 2)]
    bare = [{k: v for k, v in row.items() if k != "prompt"} for row in rows]
    given = evaluate(model, "catch", tokenizer, tasks=rows, max_completion_length=24)
    filled = evaluate(model, "catch", tokenizer, tasks=bare, max_completion_length=24)
    first = given["catch"].trajectories[0]
    assert first.messages[1]["content"].startswith("Let's play Catch.")
    assert [t.prompt_ids for t in filled["catch"].trajectories] == [
        t.prompt_ids for t in given["catch"].trajectories
    ]


@pytest.mark.slow
def test_the_random_tiny_model_plays_for_real_and_reproducibly(tiny):
    model, tokenizer = tiny
    first = evaluate(model, "catch", tokenizer, num_tasks=2, max_completion_length=48)
    again = evaluate(model, "catch", tokenizer, num_tasks=2, max_completion_length=48)
    row = first["catch"]
    assert row.episodes == 2 and first.decoding == "greedy"
    assert 0 < row.tokens.value <= 48
    assert [t.completion_ids for t in row.trajectories] == [
        t.completion_ids for t in again["catch"].trajectories
    ]
    # a random model makes no parsed tool call: no executed call, so no valid-call rate
    assert row.with_call.value == 0.0 and row.executed_calls == 0
    assert math.isnan(row.valid_call_rate.value)
    assert row.win_rate.value == 0.0

    sampled = evaluate(
        model, "catch", tokenizer, num_tasks=2, num_generations=2, max_completion_length=24, seed=1
    )
    assert sampled["catch"].episodes == 4 and sampled.decoding == "sampled x2, T=1"
    ids = [t.completion_ids for t in sampled.trajectories]
    assert ids[0] != ids[1]  # the two samples of one task differ


def test_generation_kwargs_reach_the_model_as_grpo_s_do(tiny):
    """A turn cap GRPO trains with (``kit.train.recipe`` on a CPU: ``generation_kwargs=
    {"max_new_tokens": ...}``) caps the evaluation's turns too, so that both play one game."""
    model, tokenizer = tiny
    free = evaluate(model, "catch", tokenizer, num_tasks=2, max_completion_length=48)
    capped = evaluate(
        model,
        "catch",
        tokenizer,
        num_tasks=2,
        max_completion_length=48,
        generation_kwargs={"max_new_tokens": 5},
    )
    # the random model never stops by itself: uncapped, its one turn runs into the budget
    assert all(len(t.completion_ids) > 5 for t in free["catch"].trajectories)
    assert all(0 < len(t.completion_ids) <= 5 for t in capped["catch"].trajectories)


@pytest.mark.slow
def test_a_model_whose_calls_are_all_valid_gets_valid_rate_one(tiny):
    model, tokenizer = scripted(tiny, [STAY] * 9)
    row = evaluate(model, "catch", tokenizer, tasks=TEN_ROWS)["catch"]
    assert row.valid_call_rate.value == 1.0
    assert row.valid_calls == row.executed_calls == 45
    assert row.with_call.value == 1.0 and row.calls.value == 9.0
    assert row.turns.value == 10.0  # nine calls and the closing answer
    assert row.win_rate.value == pytest.approx(1 / 5)  # staying catches only the middle drop
    assert sorted(t.task["ball_col"] for t in row.trajectories if t.won) == [2]


@pytest.mark.slow
def test_rejected_and_unknown_calls_count_as_invalid(tiny):
    turns = [tool_call("move", direction="UP"), tool_call("jump"), *[STAY] * 9]
    model, tokenizer = scripted(tiny, turns)
    row = evaluate(model, "catch", tokenizer, tasks=TEN_ROWS)["catch"]
    assert (row.valid_calls, row.executed_calls) == (45, 55)
    assert row.valid_call_rate.value == pytest.approx(45 / 55)
    # the default reward charges each failed call
    clean, _ = scripted(tiny, [STAY] * 9)
    assert row.mean_reward.value == pytest.approx(
        evaluate(clean, "catch", tokenizer, tasks=TEN_ROWS)["catch"].mean_reward.value - 0.2
    )


@pytest.mark.slow
def test_invalid_calls_and_moves_per_win_count_per_episode(tiny):
    turns = [tool_call("move", direction="UP"), tool_call("jump"), *[STAY] * 9]
    model, tokenizer = scripted(tiny, turns)
    wasteful = evaluate(model, "catch", tokenizer, tasks=TEN_ROWS, name="wasteful")
    row = wasteful["catch"]
    assert row.invalid_calls.value == 2.0 and row.invalid_calls.n == 5
    assert row.values["invalid_calls"] == [[2.0]] * 5
    # only the middle drop is caught, after two wasted calls and nine stays
    assert (row.moves_per_win.value, row.moves_per_win.n) == (11.0, 1)
    clean, _ = scripted(tiny, [STAY] * 9)
    direct = evaluate(clean, "catch", tokenizer, tasks=TEN_ROWS, name="direct")
    assert direct["catch"].moves_per_win.value == 9.0
    assert direct["catch"].invalid_calls.value == 0.0
    paired = compare(direct, wasteful, "catch", "invalid_calls")
    assert paired.difference.value == 2.0 and paired.difference.low == 2.0
    with pytest.raises(ValueError, match="metric must be one of"):
        compare(direct, wasteful, "catch", "moves_per_win")  # won episodes only: not paired
    # no win: moves per win is undefined, shown as "-", written as NaN
    capped = evaluate(clean, "catch", tokenizer, tasks=TEN_ROWS, max_tool_calling_iterations=3)
    assert math.isnan(capped["catch"].moves_per_win.value) and capped["catch"].moves_per_win.n == 0
    assert math.isnan(capped.records()[0]["moves_per_win"])
    published = table([direct, wasteful, capped], PUBLISHED)
    assert list(published["moves / win"]) == ["9.00 [9.00, 9.00]", "11 [11, 11]", "-"]
    assert list(published.columns[-5:]) == [
        "win rate",
        "moves / win",
        "invalid calls / episode",
        "valid-call rate",
        "valid / executed",
    ]


@pytest.mark.slow
def test_calls_past_the_tool_calling_cap_are_not_run(tiny):
    model, tokenizer = scripted(tiny, [STAY] * 9)
    row = evaluate(model, "catch", tokenizer, max_tool_calling_iterations=3)["catch"]
    assert row.executed_calls == 3 * row.episodes  # three rounds per episode
    assert row.calls.value == 4.0  # the fourth turn's call was parsed, never run
    assert row.win_rate.value == 0.0  # no game reached its end
    for trajectory in row.trajectories:
        assert trajectory.tool_calls[-1].result is None and not trajectory.done


# -- output and bad input --------------------------------------------------------------------------
def test_tables_and_plot_show_every_player_and_metric():
    results = [
        evaluate(solver_policy(), ["catch", "wordle"], name="solver"),
        evaluate(random_policy(), "catch", name="random"),
    ]
    frame = table(results)
    assert list(frame["player"]) == ["solver", "solver", "random"]
    assert frame.loc[0, "win rate"] == "1.00 [0.72, 1.00]"  # 10 of 10 eval boards
    text = text_table(results)
    assert "random" in text and "95% interval" in text
    records = results[0].records()
    assert {f"{m}_low" for m in METRICS} <= set(records[0])
    figure = plot_evaluation(results)
    assert len(figure.axes) == 4 and figure._repr_png_().startswith(b"\x89PNG")
    assert len(plot_evaluation(results, PUBLISHED).axes) == 4
    published = text_table(results, metrics=PUBLISHED)
    assert "moves / win" in published and "mean reward" not in published
    with pytest.raises(ValueError, match="metrics must be some of"):
        table(results, ["wins"])
    assert isinstance(results[0], Evaluation) and str(results[0]).startswith("player")


def test_bad_input_says_what_is_wrong(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="unknown game 'chess'"):
        evaluate(solver_policy(), "chess")
    with pytest.raises(ValueError, match="needs its tokenizer"):
        evaluate(model, "catch")
    with pytest.raises(ValueError, match="num_generations must be"):
        evaluate(solver_policy(), "catch", num_generations=0)
    with pytest.raises(ValueError, match="seed must be an int"):
        evaluate(solver_policy(), "catch", seed=True)
    with pytest.raises(ValueError, match="identical episodes"):
        evaluate(model, "catch", tokenizer, num_generations=2, greedy=True)
    with pytest.raises(ValueError, match="player must be"):
        evaluate("solver", "catch")
    with pytest.raises(ValueError, match="exactly one game"):
        evaluate(solver_policy(), ["catch", "wordle"], tasks=[{"ball_col": 0}])
    with pytest.raises(ValueError, match="no result for game 'wordle'"):
        evaluate(solver_policy(), "catch")["wordle"]


# -- sampling: as GRPO samples, recorded ------------------------------------------------------------
GRPO_DEFAULTS = dict(temperature=1.0, top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0)


def _first_turns(model, tokenizer, episodes, config, seed):
    """Each episode's first turn as ``model.generate(generation_config=config)`` samples it from
    the same left-padded batch under the same seed: the reference the evaluation must match."""
    import torch

    width = max(len(t.prompt_ids) for t in episodes)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(t.prompt_ids)) + t.prompt_ids for t in episodes])
    mask = torch.tensor(
        [[0] * (width - len(t.prompt_ids)) + [1] * len(t.prompt_ids) for t in episodes]
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    turns = []
    for row in out[:, width:].tolist():
        end = row.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in row else len(row)
        turns.append(row[:end])
    return turns


@pytest.mark.parametrize("settings", [{}, EXPLICIT], ids=["grpo-defaults", "explicit"])
def test_evaluation_samples_the_settings_it_is_given_not_the_models_generation_config(settings):
    """A model whose generation config says T 0.6, top_k 20, top_p 0.95, repetition penalty 1.3,
    min_p 0.02 (Qwen3's, plus two) is evaluated token for token as ``GRPOTrainer``'s GenerationConfig
    samples it (GRPOConfig's defaults, or the settings passed), not as its own config would; the
    evaluation and its records say which settings those were."""
    from transformers import GenerationConfig

    model, tokenizer = qwen_like_model()
    model.eval()
    budget, seed = 12, 3
    result = evaluate(
        model,
        "catch",
        tokenizer,
        num_tasks=2,
        num_generations=2,
        greedy=False,
        max_completion_length=budget,
        seed=seed,
        **settings,
    )
    episodes = result.trajectories
    grpo = _first_turns(
        model, tokenizer, episodes, grpo_generation_config(tokenizer, budget, **settings), seed
    )
    own = GenerationConfig(
        max_new_tokens=budget,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=[tokenizer.eos_token_id],
    )  # every sampling setting left to the model's generation config
    # the test can tell the two apart
    assert _first_turns(model, tokenizer, episodes, own, seed) != grpo
    assert [t.completion_ids[: len(turn)] for t, turn in zip(episodes, grpo, strict=True)] == grpo
    # GRPO's min_p=None sets none: the model's own applies, and is what the evaluation records
    expected = GRPO_DEFAULTS | {"min_p": MODEL_MIN_P} | settings
    assert result.sampling == {"greedy": False, **expected}
    for record in result.records():
        assert {name: record[name] for name in SAMPLING} == expected


def test_records_say_how_a_greedy_model_and_a_policy_played(tiny):
    """Greedy decoding applies no sampling setting but the repetition penalty; a policy samples
    no tokens: its settings are recorded as None, the columns present all the same."""
    model, tokenizer = tiny
    greedy = evaluate(model, "catch", tokenizer, tasks=[{"ball_col": 1}], max_completion_length=4)
    assert greedy.sampling == {"greedy": True, "repetition_penalty": 1.0}
    (record,) = greedy.records()
    assert {name: record[name] for name in SAMPLING} == {
        "temperature": None,
        "top_p": None,
        "top_k": None,
        "min_p": None,
        "repetition_penalty": 1.0,
    }
    policy = evaluate(solver_policy(), "catch", tasks=[{"ball_col": 1}])
    assert policy.sampling == {}
    assert all(policy.records()[0][name] is None for name in SAMPLING)


# -- one model at a time ----------------------------------------------------------------------------
def test_evaluate_in_turn_frees_each_model_before_loading_the_next():
    """The second loader finds the first model gone (a weak reference to it is dead), and the
    evaluations returned, episodes included, keep no model alive; the figures are those of
    evaluating each model directly."""
    import functools
    import gc
    import weakref

    alive: list[weakref.ref] = []

    def loader(seed):
        def load():
            assert all(ref() is None for ref in alive), "the previous model is still loaded"
            model, tokenizer = tiny_model(seed=seed)
            # bind the model to its own forward, as accelerate's hooks do (device_map="auto"):
            # a reference cycle, which dropping the references alone does not free
            model.forward = functools.partial(type(model).forward, model)
            alive.append(weakref.ref(model))
            return model, tokenizer

        return load

    settings = dict(num_tasks=2, max_completion_length=8)
    results = evaluate_in_turn({"base": loader(0), "trained": loader(1)}, "catch", **settings)
    assert [r.name for r in results] == ["base", "trained"] and len(alive) == 2
    gc.collect()
    assert all(ref() is None for ref in alive)
    assert all(r["catch"].episodes == 2 for r in results)
    model, tokenizer = tiny_model(seed=1)
    direct = evaluate(model, "catch", tokenizer, name="trained", **settings)
    assert [t.completion_ids for t in direct.trajectories] == [
        t.completion_ids for t in results[1].trajectories
    ]
    assert str(direct) == str(results[1])  # the same figures, intervals included


def test_evaluate_in_turn_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="at least one"):
        evaluate_in_turn({}, "catch")
    with pytest.raises(ValueError, match="the names of players"):
        evaluate_in_turn({"base": tiny_model}, "catch", name="other")
    with pytest.raises(ValueError, match="loader"):
        evaluate_in_turn({"base": "Qwen/Qwen3-1.7B"}, "catch")


def test_a_paired_difference_of_a_side_with_itself_is_zero_and_bad_pairs_are_refused():
    # the same tasks drawn for both sides: without spread inside a task, no difference at all
    tasks = [[1.0, 1.0], [0.0], [1.0]]
    difference, p_value = paired_difference(tasks, tasks, seed=1, resamples=200)
    assert (difference.value, difference.low, difference.high, difference.n) == (0.0, 0.0, 0.0, 3)
    assert p_value == 1.0
    # episodes are drawn apart for each side, so a task's spread widens the interval around 0
    spread, _ = paired_difference([[1.0, 0.0]] * 3, [[1.0, 0.0]] * 3, seed=1, resamples=200)
    assert spread.value == 0.0 and spread.low < 0.0 < spread.high
    better, p_better = paired_difference([[0.0]] * 12, [[1.0]] * 12, resamples=200)
    assert (better.value, better.low, better.high, p_better) == (1.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="same tasks on both sides, got 3 and 2"):
        paired_difference(tasks, tasks[:2])
    with pytest.raises(ValueError, match="at least one episode on each side"):
        paired_difference(tasks, [[1.0], [], [0.0]])
