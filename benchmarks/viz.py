"""What ``kit.viz.save_html`` costs a browser: file size, DOM nodes and Chromium's time to open.

    python benchmarks/viz.py                              # 64 x 10k-token batch, one 50k-token view
    python benchmarks/viz.py --rollouts 8 --tokens 2000   # a quick look

Two pages, as GitHub issue 10 measured them: a GRPO batch of 64 rollouts of 10,000 tokens each,
and a single rollout of 50,000 tokens. The trajectories are synthetic but built as the tests'
are: the tiny model's tokenizer encodes a chat of model turns (thinking, a tool call, now and
then a split UTF-8 character) and env turns (the tool's board) into ``prompt_ids``,
``completion_ids`` and ``tool_mask``. Each page is opened by headless Debian ``chromium`` through
Playwright, offline, and timed from navigation until the second animation frame after ``load``
(parsed, laid out, painted); then the last rollout is picked in the page's selector, if it has
one, timed in the page from the change event to the second frame after it. Nodes are all the
document's nodes, text nodes included. Figures, never assertions: the tests check sizes only.

On a 2-core machine shared with a CI run (times vary by a factor of 2 with its load):

    page          MB     nodes      open s   switch s
    64 x 10,000   147.4  2,276,016  134.5    -          every rollout at once (before)
                  2.9    35,708     0.4-1.0  0.15-0.45  one at a time, from the page's data
    1 x 50,000    11.1   177,698    2.1-2.3  -          inline styles (before)
                  4.9    177,699    0.6-1.1  -          classes, off-screen turns skipped
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kit.models import tiny_tokenizer  # noqa: E402
from kit.trajectory import Trajectory  # noqa: E402
from kit.viz import save_html  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
WORDS = (ROOT / "data" / "wordle" / "secrets.txt").read_text().split()
FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
# Picks the last rollout as a user would (the selector's change event), timed in the page from
# the event to the second frame after it.
SWITCH = """async () => {
    const pick = document.getElementById("kit-pick");
    const started = performance.now();
    pick.value = pick.options[pick.options.length - 1].value;
    pick.dispatchEvent(new Event("change"));
    await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
    return performance.now() - started;
}"""
NODES = """() => {
    const walker = document.createTreeWalker(document, NodeFilter.SHOW_ALL);
    let count = 0;
    while (walker.nextNode()) count++;
    return count;
}"""


def synthetic(tokenizer: Any, tokens: int, seed: int) -> Trajectory:
    """A Catch-like episode of exactly ``tokens`` tokens: the length budget cuts its end."""
    rng = random.Random(seed)

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def board() -> str:
        rows = ["." * 5 for _ in range(rng.randint(5, 12))]
        rows[rng.randrange(len(rows))] = "..x.."
        return "\n".join(rows)

    prompt = encode(
        "<|im_start|>system\nYou are playing Catch. Move the paddle under the ball with the "
        "tools.<|im_end|>\n<|im_start|>user\n" + board() + "<|im_end|>\n<|im_start|>assistant\n"
    )
    completion: list[int] = []
    tool_mask: list[int] = []
    calls: list[dict[str, Any]] = []
    turn = 0
    while len(prompt) + len(completion) < tokens:
        turn += 1
        direction = rng.choice(["LEFT", "RIGHT", "STAY"])
        thought = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 120)))
        if rng.random() < 0.1:
            thought += " é 😀"  # byte-level tokens that only complete a character together
        arguments = json.dumps({"name": "move", "arguments": {"direction": direction}})
        model = encode(
            f"<think>\n{thought}\n</think>\n\n<tool_call>\n{arguments}\n</tool_call><|im_end|>"
        )
        env = encode(
            f"\n<|im_start|>user\n<tool_response>\n{board()}\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n"
        )
        completion += model + env
        tool_mask += [1] * len(model) + [0] * len(env)
        outcome = {"error": "no such direction"} if rng.random() < 0.1 else {"result": "ok"}
        calls.append(
            {"turn": turn, "name": "move", "arguments": {"direction": direction}, **outcome}
        )
    keep = tokens - len(prompt)
    return Trajectory(
        messages=[],
        prompt_ids=prompt,
        completion_ids=completion[:keep],
        tool_mask=tool_mask[:keep],
        # Cut by the budget: every other one masked, as with mask_truncated_completions=True.
        completion_mask=[0] * keep if seed % 2 else None,
        env="catch",
        task={"rows": 10, "ball_col": seed % 5},
        tool_calls=calls,
        reward=rng.uniform(-1, 1),
        rewards={"catch": 0.0},
        advantage=rng.uniform(-1, 1),
        truncated=True,
    )


def browse(path: Path) -> dict[str, Any]:
    """Open ``path`` in headless Chromium: seconds to open, nodes, seconds to switch rollouts."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route(
                "**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort()
            )
            page.set_default_timeout(900_000)
            started = time.perf_counter()
            page.goto(path.as_uri(), wait_until="load", timeout=900_000)
            page.evaluate(FRAMES)
            figures: dict[str, Any] = {"open_s": time.perf_counter() - started}
            figures["nodes"] = page.evaluate(NODES)
            # A page of one rollout at a time has a selector; an older page (every rollout at
            # once, for the "before" figures) has none.
            if page.locator("#kit-pick option").count() > 1:
                figures["switch_s"] = page.evaluate(SWITCH) / 1000
                figures["nodes_after_switch"] = page.evaluate(NODES)
            return figures
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=64, help="rollouts in the batch page")
    parser.add_argument("--tokens", type=int, default=10_000, help="tokens per batch rollout")
    parser.add_argument("--single", type=int, default=50_000, help="tokens of the single view")
    parser.add_argument("--no-browser", action="store_true", help="sizes only")
    args = parser.parse_args()
    tokenizer = tiny_tokenizer()
    cases = {
        f"{args.rollouts} x {args.tokens:,}": [
            synthetic(tokenizer, args.tokens, seed) for seed in range(args.rollouts)
        ],
        f"1 x {args.single:,}": [synthetic(tokenizer, args.single, args.rollouts)],
    }
    browser = not args.no_browser and CHROMIUM.exists()
    print(
        f"{'page':<14}{'MB':>9}{'B/token':>9}{'write s':>9}{'open s':>9}{'nodes':>11}"
        f"{'switch s':>10}{'nodes then':>12}"
    )
    with tempfile.TemporaryDirectory(prefix="kit-viz-bench-") as folder:
        for name, trajectories in cases.items():
            path = Path(folder) / "page.html"
            started = time.perf_counter()
            save_html(trajectories, tokenizer, path)
            written = time.perf_counter() - started
            size = path.stat().st_size
            tokens = sum(len(t.input_ids) for t in trajectories)
            figures = browse(path) if browser else {}
            shown = {
                key: format(figures[key], spec) if key in figures else "-"
                for key, spec in (
                    ("open_s", ".2f"),
                    ("nodes", ","),
                    ("switch_s", ".2f"),
                    ("nodes_after_switch", ","),
                )
            }
            print(
                f"{name:<14}{size / 1e6:>9.2f}{size / tokens:>9.1f}{written:>9.1f}"
                f"{shown['open_s']:>9}{shown['nodes']:>11}{shown['switch_s']:>10}"
                f"{shown['nodes_after_switch']:>12}",
                flush=True,
            )
    if not browser:
        print(f"(no browser figures: {CHROMIUM} missing or --no-browser)")


if __name__ == "__main__":
    main()
