"""kit.endpoint: the kit's games played through an OpenAI-compatible chat-completions server.

Two peers. A real server, ``transformers serve``, runs the kit's tiny model after a short SFT
warm-up on all four games: every game is played through it, and on Catch and Echo its greedy
episodes equal the in-process path's token for token. A scripted HTTP server stands in for a
server that misbehaves (a real one cannot be made to), each hostile reply in turn.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kit.endpoint import Endpoint, EndpointError, serve
from kit.evaluate import compare, evaluate, main, text_table
from kit.tasks import TaskProvider

GAMES = ("catch", "echo", "wordle", "sudoku")


def _tasks(game: str, split: str = "train", count: int = 2) -> list[dict]:
    rows = [task.row() for task in TaskProvider(game, split, count, 0)]
    return [{k: v for k, v in row.items() if k != "prompt"} for row in rows]


# -- a scripted server: one hostile reply after another ------------------------------------------
Reply = tuple[int, object] | None  # (status, JSON body or raw bytes); None: drop the connection


class Scripted:
    """An HTTP server answering each POST with ``respond(request_body)``; it records requests
    and their headers."""

    def __init__(self, respond: Callable[[dict], Reply]) -> None:
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                scripted.requests.append(body)
                scripted.headers.append(dict(self.headers))
                reply = respond(body)
                if reply is None:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, payload = reply
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def completion(content: str = "", calls: list[tuple[str, str]] = (), usage=(100, 5)) -> dict:
    """A chat-completions reply; ``calls`` are (name, arguments as the server sends them)."""
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"c{k}", "type": "function", "function": {"name": n, "arguments": a}}
            for k, (n, a) in enumerate(calls)
        ]
    reply: dict = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    if usage is not None:
        reply["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return reply


def is_check(body: dict) -> bool:
    """The endpoint's check before any episode: no tools, one token."""
    return "tools" not in body


@pytest.fixture
def scripted() -> Iterator[Callable[[Callable[[dict], Reply]], Scripted]]:
    servers: list[Scripted] = []

    def start(respond: Callable[[dict], Reply]) -> Scripted:
        servers.append(Scripted(respond))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def turns(replies: list[Reply]) -> Callable[[dict], Reply]:
    """Answer the check, then each episode turn with the next of ``replies`` (the last repeats)."""
    queue = list(replies)

    def respond(body: dict) -> Reply:
        if is_check(body):
            return 200, completion("OK")
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return respond


def catch(url: str, **kwargs) -> object:
    endpoint = Endpoint(url, "scripted", retries=2, backoff=0.01, timeout=5, concurrency=1)
    return evaluate(endpoint, "catch", tasks=[{"ball_col": 2, "rows": 5}], **kwargs)


class TestHostileReplies:
    def test_a_tool_call_whose_arguments_are_not_json_is_an_invalid_call(self, scripted):
        server = scripted(
            turns(
                [
                    (200, completion(calls=[("move", '{"direction": "LEFT"')])),
                    (200, completion(calls=[("stay", "{}")])),
                    (200, completion("done")),
                ]
            )
        )
        result = catch(server.url)["catch"]
        tool = result.trajectories[0].messages[3]
        assert tool["role"] == "tool" and "must be a JSON object" in tool["content"]
        assert (result.executed_calls, result.valid_calls, result.invalid_calls.value) == (2, 1, 1)
        assert not result.failures
        # what the model wrote goes back to it as written, and the id pairs the reply with it
        second = server.requests[2]["messages"]
        assert second[-2]["tool_calls"][0]["function"]["arguments"] == '{"direction": "LEFT"'
        assert second[-1] == {"role": "tool", "tool_call_id": "c0", "content": tool["content"]}

    def test_an_unknown_tool_gets_trls_reply(self, scripted):
        server = scripted(turns([(200, completion(calls=[("jump", "{}")])), (200, completion())]))
        result = catch(server.url)["catch"]
        assert "Tool jump not found." in result.trajectories[0].messages[3]["content"]
        assert (result.executed_calls, result.valid_calls) == (1, 0)

    def test_a_lone_surrogate_becomes_a_replacement_character(self, scripted, tmp_path):
        from kit.viz import chat_view

        raw = b'{"choices": [{"message": {"role": "assistant", "content": "a\\ud800b"}}]}'
        server = scripted(turns([(200, raw)]))
        trajectory = catch(server.url)["catch"].trajectories[0]
        assert trajectory.messages[-1]["content"] == "a\ufffdb"
        (tmp_path / "chat.html").write_text(chat_view(trajectory), encoding="utf-8")

    @pytest.mark.parametrize(
        "reply, reason",
        [
            ((200, {"choices": []}), "no choices"),
            ((200, {"choices": [{"index": 0}]}), "no message"),
            ((200, b"<html>busy</html>"), "not JSON"),
            ((200, [1, 2]), "not a JSON object"),
        ],
    )
    def test_a_reply_that_is_no_completion_fails_its_episode_not_the_game(
        self, scripted, reply, reason
    ):
        server = scripted(turns([(200, completion(calls=[("stay", "{}")])), reply]))
        evaluation = catch(server.url)
        result = evaluation["catch"]
        assert (result.episodes, len(result.failures)) == (0, 1)
        failure = result.failures[0]
        assert reason in failure.error and failure.turns == 1
        assert failure.task == {"ball_col": 2, "rows": 5}
        assert "failed episodes" in text_table([evaluation]) and "1 of 1" in text_table(
            [evaluation]
        )
        assert evaluation.records()[0]["failed_episodes"] == 1

    def test_a_server_that_dies_mid_episode_is_retried_then_reported(self, scripted):
        server = scripted(turns([(200, completion(calls=[("stay", "{}")])), None]))
        result = catch(server.url)["catch"]
        assert (result.episodes, len(result.failures)) == (0, 1)
        assert "3 attempts" in result.failures[0].error
        assert len(server.requests) == 1 + 1 + 3  # the check, a turn, three tries of the next

    def test_busy_and_broken_statuses_are_retried(self, scripted):
        server = scripted(
            turns(
                [
                    (429, {"error": "slow down"}),
                    (503, {"error": "warming up"}),
                    (200, completion(calls=[("stay", "{}")])),
                    (200, completion("done")),
                ]
            )
        )
        result = catch(server.url)["catch"]
        assert (result.episodes, result.executed_calls, len(result.failures)) == (1, 1, 0)

    def test_a_refused_setting_stops_the_evaluation_before_any_episode(self, scripted):
        server = scripted(lambda body: (400, {"detail": "unknown field top_k"}))
        with pytest.raises(EndpointError, match="unknown field top_k.*before any episode"):
            catch(server.url)
        assert len(server.requests) == 1

    def test_a_refused_turn_ends_its_episode_as_the_models(self, scripted):
        detail = {"detail": "json parser could not parse region as JSON"}
        server = scripted(turns([(200, completion(calls=[("stay", "{}")])), (400, detail)]))
        result = catch(server.url)["catch"]
        assert (result.episodes, len(result.failures), result.finished.value) == (1, 0, 0.0)
        assert "[refused:" in result.trajectories[0].messages[-1]["content"]

    def test_a_wrong_key_stops_the_evaluation_and_the_key_is_never_shown(
        self, scripted, monkeypatch
    ):
        monkeypatch.setenv("KIT_TEST_KEY", "sk-secret-123")
        server = scripted(lambda body: (401, {"error": "bad key"}))
        endpoint = Endpoint(server.url, "scripted", api_key_env="KIT_TEST_KEY", backoff=0.01)
        with pytest.raises(EndpointError, match="HTTP 401") as raised:
            evaluate(endpoint, "catch", tasks=[{"ball_col": 1}])
        assert server.headers[0]["Authorization"] == "Bearer sk-secret-123"
        assert "sk-secret" not in str(raised.value) + repr(endpoint)

    def test_the_budget_counts_the_envs_tokens_and_cuts_the_episode(self, scripted):
        # 5 tokens a turn, and the prompt grows by 60 a turn: the third turn starts 120 tokens
        # past the first prompt, over the budget of 100, and is dropped
        state = {"turn": 0}

        def respond(body: dict) -> Reply:
            if is_check(body):
                return 200, completion("OK")
            state["turn"] += 1
            return 200, completion(calls=[("stay", "{}")], usage=(100 + 60 * state["turn"], 5))

        server = scripted(respond)
        result = catch(server.url, max_completion_length=100)["catch"]
        trajectory = result.trajectories[0]
        assert trajectory.truncated and result.calls.value == 2.0
        asked = [r["max_tokens"] for r in server.requests if not is_check(r)]
        assert asked == [100, 100 - 5, 100 - 65]  # a turn asks for no more than what is left

    def test_settings_reach_the_request(self, scripted):
        server = scripted(turns([(200, completion("no move"))]))
        catch(
            server.url,
            num_generations=2,
            temperature=0.7,
            top_p=0.9,
            min_p=0.1,
            generation_kwargs={"max_new_tokens": 32},
        )
        body = [r for r in server.requests if not is_check(r)][0]
        assert (body["temperature"], body["top_p"], body["min_p"]) == (0.7, 0.9, 0.1)
        assert body["max_tokens"] == 32 and "top_k" not in body
        assert {t["function"]["name"] for t in body["tools"]} == {"move", "stay"}
        seeds = {r["seed"] for r in server.requests if not is_check(r)}
        assert len(seeds) == 2  # each episode its own

    def test_diagnostics_leave_out_the_episodes_the_server_failed(self, scripted):
        from kit.diagnostics import diagnose

        # every first turn stays; the second turn of every other request dies on the server
        state = {"turns": 0}

        def respond(body: dict) -> Reply:
            if is_check(body):
                return 200, completion("OK")
            if len(body["messages"]) > 3:  # a later turn
                state["turns"] += 1
                return (503, {"error": "gone"}) if state["turns"] % 2 else (200, completion())
            return 200, completion(calls=[("stay", "{}")])

        server = scripted(respond)
        endpoint = Endpoint(server.url, "scripted", retries=0, backoff=0.0, concurrency=1)
        report = diagnose("catch", policies={"server": endpoint}, groups=2, num_generations=2)
        assert report.players["server"]["failed_episodes"] == 2
        assert report.row(report.rewards[-1], "server")["episodes"] == 2  # two played of four
        assert "2 episodes the server failed to finish, left out" in str(report)

    def test_bad_arguments_are_refused_clearly(self):
        for kwargs, match in [
            ({"base_url": "localhost:8000"}, "http"),
            ({"concurrency": 0}, "concurrency"),
            ({"retries": -1}, "retries"),
            ({"model": ""}, "model"),
        ]:
            settings = {"base_url": "http://localhost:1/v1", "model": "m"} | kwargs
            with pytest.raises(ValueError, match=match):
                Endpoint(**settings)
        with pytest.raises(ValueError, match="no config.json"), serve(Path(__file__).parent):
            pass  # refused before any server starts
        endpoint = Endpoint("http://localhost:1/v1", "m")
        with pytest.raises(ValueError, match="max_new_tokens"):
            evaluate(endpoint, "catch", generation_kwargs={"do_sample": True})


# -- a real server: transformers serve ------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The tiny model after 600 SFT steps on the four games' solver conversations, behind
    ``transformers serve`` on this machine (:func:`kit.endpoint.serve`)."""
    from kit.models import save, tiny_model
    from kit.train import warm_up

    folder = tmp_path_factory.mktemp("served")
    model, tokenizer = tiny_model()
    warm_up(model, tokenizer, list(GAMES), 600, 0, folder / "sft")
    save(model, tokenizer, folder / "model")
    with serve(folder / "model") as url:
        yield url, folder / "model"


@pytest.mark.slow
class TestTransformersServe:
    def test_every_game_plays_through_the_server(self, served):
        url, folder = served
        endpoint = Endpoint(url, str(folder), concurrency=2)
        for game in GAMES:
            result = evaluate(endpoint, game, tasks=_tasks(game))[game]
            assert result.episodes == 2 and not result.failures, game
            assert result.executed_calls >= 2, (game, [t.messages[-1] for t in result.trajectories])
        catch = evaluate(endpoint, "catch", tasks=_tasks("catch"))["catch"]
        assert catch.finished.value == 1.0  # Catch's games are played to their end

    @pytest.mark.parametrize("game", ["catch", "echo"])
    def test_greedy_episodes_equal_the_in_process_ones_token_for_token(self, served, game):
        from kit.models import load

        url, folder = served
        model, tokenizer = load(folder)
        tasks = _tasks(game)
        remote = evaluate(Endpoint(url, str(folder)), game, tokenizer, tasks=tasks)
        local = evaluate(model, game, tokenizer, tasks=tasks)
        for a, b in zip(remote[game].trajectories, local[game].trajectories, strict=True):
            assert a.tool_calls and a.tool_calls == b.tool_calls
            assert (a.prompt_ids, a.completion_ids, a.tool_mask) == (
                b.prompt_ids,
                b.completion_ids,
                b.tool_mask,
            )
            assert (a.reward, a.done, a.won) == (b.reward, b.done, b.won)
        comparison = compare(local, remote, game, "mean_reward")
        assert comparison.difference.value == 0.0

    def test_the_inspector_opens_an_endpoint_episode(self, served):
        widgets = pytest.importorskip("ipywidgets")
        from kit.viz import Inspector

        url, folder = served
        result = evaluate(Endpoint(url, str(folder)), "catch", tasks=_tasks("catch", count=1))
        inspector = Inspector(result.trajectories)
        assert isinstance(inspector.widget, widgets.VBox)
        assert inspector.view.options == ("chat",)
        assert "kit-msg-tool" in inspector.body.value and "move" in inspector.body.value
        inspector.turn.value = inspector.turn.max
        assert "after turn" in inspector.state.value

    def test_diagnostics_and_the_html_page_take_an_endpoints_episodes(self, served, tmp_path):
        from kit.diagnostics import diagnose
        from kit.models import load
        from kit.solvers.policies import random_policy
        from kit.viz import save_html

        url, folder = served
        endpoint = Endpoint(url, str(folder), concurrency=2)
        report = diagnose("catch", policies={"served": endpoint, "random": random_policy()},
                          groups=2, num_generations=2)  # fmt: skip
        served_player = report.players["served"]
        assert served_player["calls"] > 0 and "failed_episodes" not in served_player
        _, tokenizer = load(folder)
        result = evaluate(endpoint, "catch", tokenizer, tasks=_tasks("catch", count=1))
        page = tmp_path / "episodes.html"
        save_html(result["catch"].trajectories, tokenizer, page)
        assert "move" in page.read_text(encoding="utf-8")

    def test_the_command_line_prints_the_table_and_the_paired_comparison(
        self, served, tmp_path, capsys
    ):
        url, folder = served
        out = tmp_path / "figures.json"
        argv = ["catch", "--base-url", url, "--model", str(folder), "--checkpoint", str(folder)]
        argv += ["--num-tasks", "2", "--eval-generations", "2", "--temperature", "0.5"]
        assert main([*argv, "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert "(endpoint) (catch)" in printed and "win rate (catch)" in printed
        figures = json.loads(out.read_text())
        assert len(figures["records"]) == 2 and len(figures["comparisons"]) == 3
        with pytest.raises(SystemExit):
            main([*argv, "--out", str(out)])  # never over a file that exists
