"""Play the kit's games with any model behind an OpenAI-compatible chat-completions endpoint.

Why: a trained model means something beside baselines nobody here trained (an API model, a
larger open model served by vLLM, someone's published checkpoint behind ``transformers serve``
or llama.cpp), and on a CPU the slowest phase, generation, can be handed to a faster server.
``kit.evaluate.evaluate(Endpoint(...), game)`` measures such a model on the same held-out tasks,
with the same table, intervals and paired comparisons as an in-process one.

An episode is TRL's tool loop over HTTP, built from :mod:`kit.episode`'s steps:

* the request's ``tools`` are the env's public methods as the JSON schemas TRL builds from their
  docstrings (:func:`kit.episode.tool_schemas`), and the first prompt is the row's with the reset
  observation appended (:func:`kit.episode.start`);
* each ``tool_calls`` entry of a reply runs on the episode's own env (:func:`kit.episode.call_tool`:
  an exception comes back as ``{'error': ...}``, an unknown tool as TRL's ``Tool X not found.``)
  and goes back as a ``tool`` message; a call whose arguments are not a JSON object gets an error
  reply of its own, so it counts as an invalid call, not as a crash;
* a turn the server refuses (HTTP 400 or 422, once a first request with the same settings
  passed: transformers serve answers 400 when a tool call's JSON does not parse) ends the episode
  as a call TRL cannot parse does, the server's reason as the turn's text;
* the episode ends when a reply calls no tool, after ``max_tool_calling_iterations`` rounds
  (:func:`kit.episode.runs_tools`), or when the token budget is spent. The budget is TRL's
  ``max_completion_length``: every token after the first prompt, the env's replies included. The
  server's ``usage`` says how many that is (this turn's prompt and completion tokens, less the
  first turn's prompt tokens); a turn asks for no more than what is left, and a turn that starts
  past the budget is dropped and marks the episode truncated. A server that reports no usage gets
  no budget beyond ``max_tokens`` a turn.

A transport failure is not a lost game. Timeouts, connection errors, 429 and 5xx are retried
with exponential backoff; when the retries are spent, the episode is an :class:`EpisodeFailure`
(``GameResult.failures``), kept out of every figure and shown in the table. A reply that is not a
chat completion (no choices, no message, not JSON) fails its episode the same way, without
retries. Any other 4xx (a wrong model name, a missing key) is the caller's to fix:
:class:`EndpointError` stops the evaluation at once. The API key is read from an environment
variable at request time and never stored, logged or shown.

    from kit.endpoint import Endpoint
    from kit.evaluate import evaluate, compare

    api = Endpoint("http://localhost:8000/v1", "my-model", concurrency=8)
    result = evaluate(api, "catch", num_generations=4, temperature=0.5)
    print(result)                                   # the runbook's table
    kit.viz.inspector(result.trajectories)          # the chat view: no token ids

Pass the served model's ``tokenizer`` to ``evaluate`` and the episodes get token ids
(:func:`kit.masks.build`) for the token views and the token count. To put a checkpoint of your
own behind an endpoint on this machine, :func:`serve` runs ``transformers serve`` on it:

    with serve("runs/demo/RUN/sft-model") as url:
        result = evaluate(Endpoint(url, "runs/demo/RUN/sft-model"), "catch")
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.envs import env_tools
from kit.episode import Episode, Message, call_tool, runs_tools, start, tool_schemas

# Statuses worth another try: the server is busy or broke for a moment.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_SURROGATE = re.compile("[\ud800-\udfff]")


# Statuses by which a server refuses what a request holds: before any episode, the settings (a
# parameter it does not take); within one, the model's own turn (transformers serve answers 400
# when the JSON of a tool call the model wrote does not parse).
REFUSED_STATUSES = frozenset({400, 422})


class EndpointError(RuntimeError):
    """The endpoint refused the request for a reason retrying cannot fix (a 4xx: a wrong model
    name, a missing or wrong API key, a parameter it does not take)."""


class RefusedTurn(EndpointError):
    """HTTP 400 or 422: the server refused what this request held (``detail``: its reason)."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


class ReplyError(RuntimeError):
    """A reply that is not a chat completion, or a transport failure that outlived its retries:
    the episode it happened in fails (:class:`EpisodeFailure`); the evaluation goes on."""


@dataclass(frozen=True)
class EpisodeFailure:
    """An episode the endpoint could not finish: its task (and the task's place in the
    evaluation), which of the task's episodes it was, how many turns it had played, and why (the
    last error, with the attempts it took)."""

    task: dict[str, Any]
    task_index: int
    generation: int
    turns: int
    error: str


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible chat-completions server, and how to ask it.

    ``base_url`` ends before ``/chat/completions`` (e.g. ``http://localhost:8000/v1``);
    ``model`` is the request's model name. ``api_key_env`` names the environment variable that
    holds the key (none is sent when it is unset; a local server needs none). ``concurrency``
    episodes are in flight at once. A request that times out (``timeout`` seconds) or fails for
    a transport reason is tried ``retries`` more times, waiting ``backoff * 2**k`` seconds (with
    jitter) before try ``k + 1``. ``extra_body`` is merged into every request: settings a server
    takes beyond the OpenAI ones (vLLM's ``top_k``, ``min_p``...).
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 4
    timeout: float = 60.0
    retries: int = 3
    backoff: float = 0.5
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not re.match(r"https?://\S+$", self.base_url):
            raise ValueError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"model must be the server's model name, got {self.model!r}")
        for name, low in (("concurrency", 1), ("retries", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        for name in ("timeout", "backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")

    def check(self, sampling: Mapping[str, Any]) -> None:
        """One short request with ``sampling`` and no tools: :class:`EndpointError` if the
        endpoint refuses it (a wrong URL, model name, key or setting), before any episode counts
        a refusal as a model's turn; :class:`ReplyError` if it cannot be reached."""
        probe = {"messages": [{"role": "user", "content": "Say OK."}], **sampling}
        try:
            self.complete(probe | {"max_tokens": 1})
        except RefusedTurn as refused:
            raise EndpointError(f"{refused} (a check before any episode)") from None

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST one chat-completions request; return the reply's JSON object.

        Retries transport failures as the class says; raises :class:`EndpointError` on a 4xx
        that is not worth retrying and :class:`ReplyError` when the retries are spent or the
        reply is not a JSON object."""
        data = json.dumps({"model": self.model, **self.extra_body, **body}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1) * (1 + random.random() / 2))
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as error:
                detail = _clip(error.read().decode("utf-8", "replace"))
                if error.code in REFUSED_STATUSES:
                    raise RefusedTurn(
                        f"{self.url} refused the request: HTTP {error.code} {detail}", detail
                    ) from None
                if error.code not in RETRY_STATUSES:
                    raise EndpointError(
                        f"{self.url} refused the request: HTTP {error.code} {detail}"
                    ) from None
                problem = f"HTTP {error.code} {detail}"
                continue
            except (OSError, http.client.HTTPException) as error:
                # refused, reset or cut mid-reply, timed out (URLError and TimeoutError are OSError)
                problem = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
                continue
            try:
                reply = json.loads(raw)
            except ValueError:
                text = _clip(raw.decode("utf-8", "replace"))
                raise ReplyError(f"the reply is not JSON: {text}") from None
            if not isinstance(reply, dict):
                raise ReplyError(f"the reply is not a JSON object: {_clip(str(reply))}")
            return reply
        tries = self.retries + 1
        raise ReplyError(f"{problem} ({tries} attempt{'s' * (tries > 1)} to {self.url})")


@dataclass
class Played(Episode):
    """One endpoint episode: a :class:`kit.episode.Episode` (what reward functions and
    :mod:`kit.diagnostics` read), with the env's text after each turn and the server's count of
    the tokens the model wrote (None where it reports none)."""

    states: list[str] = field(default_factory=list)
    model_tokens: int | None = None


def play(
    endpoint: Endpoint,
    env_cls: type,
    row: Mapping[str, Any],
    *,
    max_tool_calling_iterations: int,
    max_completion_length: int,
    sampling: Mapping[str, Any],
    seed: int,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> Played:
    """Play one episode of ``env_cls`` from ``row`` with ``endpoint``, as the module says.

    ``sampling`` are the request's settings (``temperature``, ``top_p``, ``max_tokens`` a turn,
    ...); each turn's request gets ``seed`` plus its turn index, for servers that take a seed.
    Raises :class:`ReplyError` (the episode failed) or :class:`EndpointError` (stop)."""
    env = env_cls()
    prompt = start(env, dict(row))
    tools = tool_schemas(env_cls)
    by_name = {tool.__name__: tool for tool in env_tools(env)}
    completion: list[Message] = []
    wire = [_wire_message(m) for m in prompt]
    states: list[str] = []
    first_prompt = None
    model_tokens: int | None = 0
    used = 0
    rounds = 0
    truncated = False
    turn_cap = sampling.get("max_tokens")
    while True:
        left = max_completion_length - used
        if left <= 0:
            truncated = True
            break
        body = {"messages": wire, "tools": tools, **sampling, "seed": seed + len(states)}
        body["max_tokens"] = left if turn_cap is None else min(turn_cap, left)
        if chat_template_kwargs:
            body["chat_template_kwargs"] = dict(chat_template_kwargs)
        try:
            message, usage = _assistant(endpoint.complete(body), len(states))
        except RefusedTurn as refused:
            # The settings passed the endpoint's check (play_many), so the turn is the model's:
            # it ends the episode as a call TRL cannot parse does, with the server's reason.
            states.append(env.transcript)
            completion.append({"role": "assistant", "content": f"[refused: {refused.detail}]"})
            break
        except ReplyError as error:
            error.turns = len(states)  # type: ignore[attr-defined]
            raise
        if usage is not None:
            prompt_tokens, completion_tokens = usage
            first_prompt = prompt_tokens if first_prompt is None else first_prompt
            if prompt_tokens - first_prompt >= max_completion_length:
                truncated = True  # the env's last replies spent the budget: TRL stops there
                break
            used = prompt_tokens - first_prompt + completion_tokens
            if model_tokens is not None:
                model_tokens += completion_tokens
        else:
            model_tokens = None
        states.append(env.transcript)
        completion.append(message)
        if not runs_tools(message, rounds, max_tool_calling_iterations):
            truncated = bool(message.get("tool_calls"))  # calls past the cap: left unrun
            break
        wire.append(_wire_message(message))
        for call in message["tool_calls"]:
            reply = _run(env, call, by_name)
            completion.append(reply)
            wire.append({"role": "tool", "tool_call_id": call["id"], "content": reply["content"]})
        rounds += 1
    states = (states + [env.transcript])[1:]
    return Played(
        env, completion, prompt, dict(row), truncated, states=states, model_tokens=model_tokens
    )


def play_many(
    endpoint: Endpoint,
    env_cls: type,
    rows: Sequence[Mapping[str, Any]],
    num_generations: int,
    seed: int,
    **settings: Any,
) -> list[Played | EpisodeFailure]:
    """Every row ``num_generations`` times, ``endpoint.concurrency`` episodes at once; results in
    task order (each task's episodes together, as ``kit.rollout`` orders them). A failed episode
    is its :class:`EpisodeFailure` in its place; :class:`EndpointError` stops them all."""
    jobs = [(i, j) for i in range(len(rows)) for j in range(num_generations)]
    endpoint.check(settings.get("sampling") or {})

    def one(job: tuple[int, int]) -> Played | EpisodeFailure:
        i, j = job
        turn_seed = ((seed * 1_000_003 + i) * 1_000 + j) * 1_000
        try:
            return play(endpoint, env_cls, rows[i], seed=turn_seed, **settings)
        except ReplyError as error:
            task = {k: v for k, v in rows[i].items() if k != "prompt"}
            turns = getattr(error, "turns", 0)
            return EpisodeFailure(task, i, j, turns, str(error))

    with ThreadPoolExecutor(max_workers=min(endpoint.concurrency, len(jobs) or 1)) as pool:
        return list(pool.map(one, jobs))


def _assistant(reply: Mapping[str, Any], turn: int) -> tuple[Message, tuple[int, int] | None]:
    """The kit's assistant message from a chat-completions reply, and its (prompt, completion)
    token counts when the server reports them. Text is kept as sent, a lone surrogate (which no
    UTF-8 file or page can hold) made U+FFFD; each call keeps the server's id for its reply."""
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ReplyError(f"the reply has no choices: {_clip(json.dumps(reply, default=str))}")
    wire = choices[0].get("message")
    if not isinstance(wire, dict):
        raise ReplyError(f"the reply's first choice has no message: {_clip(str(choices[0]))}")
    content = wire.get("content")
    message: Message = {"role": "assistant", "content": _text(content) if content else ""}
    calls = []
    for k, call in enumerate(wire.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise ReplyError(f"a tool call of the reply has no function: {_clip(str(call))}")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                arguments = _text(arguments)  # kept as the model wrote it; _run says why it fails
        calls.append(
            {
                "id": _text(str(call.get("id") or f"call_{turn}_{k}")),
                "type": "function",
                "function": {
                    "name": _text(str(function.get("name") or "")),
                    "arguments": arguments,
                },
            }
        )
    if calls:
        message["tool_calls"] = calls
    usage = reply.get("usage")
    counts = None
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (prompt, completion)
        ):
            counts = (prompt, completion)
    return message, counts


def _run(env: Any, call: Message, tools: Mapping[str, Any]) -> Message:
    """The tool message for one call: :func:`kit.episode.call_tool`'s, or an error reply when
    the arguments are not a JSON object (TRL would not have parsed such a call at all; here the
    server did, so the model is told and the call counts as invalid)."""
    arguments = call["function"]["arguments"]
    if not isinstance(arguments, dict):
        name = call["function"]["name"]
        error = f"the arguments of {name} must be a JSON object, got {_clip(str(arguments))}"
        return {"role": "tool", "name": name, "content": str({"error": error})}
    return call_tool(env, call, tools)


def _wire_message(message: Message) -> dict[str, Any]:
    """A kit message as the chat-completions API takes it: arguments as JSON text, ids kept."""
    if message.get("role") != "assistant" or not message.get("tool_calls"):
        return {"role": message["role"], "content": message.get("content") or ""}
    calls = []
    for call in message["tool_calls"]:
        function = call["function"]
        arguments = function["arguments"]
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append(
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": function["name"], "arguments": text},
            }
        )
    return {"role": "assistant", "content": message.get("content") or "", "tool_calls": calls}


def _text(value: Any) -> str:
    return _SURROGATE.sub("\ufffd", str(value))


def _clip(text: str, limit: int = 300) -> str:
    text = _text(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextmanager
def serve(model: str | Path, *, port: int | None = None, timeout: float = 180.0) -> Iterator[str]:
    """Run ``transformers serve`` on ``model`` (a saved checkpoint's folder) on this machine's
    CPU, offline, and yield its base URL (``http://127.0.0.1:PORT/v1``; the request's model name
    is ``str(model)``); the server stops when the block ends.

    Why here: an endpoint evaluation of a checkpoint you trained (or the in-process path checked
    against a real server) needs a server you can start and stop from a notebook cell. Needs
    transformers' serving extras (fastapi, uvicorn, openai, pydantic: ``pip install
    'transformers[serving]'``). ``RuntimeError`` with the end of the server's log if it exits or
    does not answer ``/health`` within ``timeout`` seconds."""
    folder = Path(model)
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder} is not a saved model's folder (no config.json)")
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(folder)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    environment = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    urllib.request.urlopen(url + "/health", timeout=2).read()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        raise RuntimeError(
                            f"transformers serve {folder} did not start: {log.read()[-3000:]}"
                        ) from None
                    time.sleep(0.5)
            yield url + "/v1"
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
