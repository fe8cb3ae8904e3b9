"""The inspector in a real browser (JupyterLab on 127.0.0.1) and save_html's page, headless.

Python-side tests prove the widget's state; only a browser proves that the front end renders it
(the widget manager, our HTML inside it, the colours) and sends the user's changes back to the
kernel, and that the page's script renders each rollout as Python does. Debian's ``chromium``
is driven through Playwright's Python package (never ``playwright install``: that downloads a
browser); ``scripts/setup.sh dev`` installs both. The tests skip, saying which is missing, where
either is absent. Every request that leaves 127.0.0.1 (the lab) or the file system (the page) is
refused, and the screenshots stay in ``tests/artifacts/`` for a human to look at.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a JupyterLab server and a browser
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "tests" / "artifacts"
SETTINGS = {"apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}
WAIT_MS = 120_000  # bounded waits; a loaded 2-core machine needs most of it for the first cell

# The notebook a user would write: one real GRPOTrainer step on CPU, captured (tests/test_viz.py),
# then the inspector over the batch, the token view of one rollout and a plot.
CELLS = [
    f"import sys\nsys.path.insert(0, {str(REPO)!r})",
    "from tests.test_viz import captured_batch\n"
    "import kit.viz\n"
    "batch, tokenizer = captured_batch()\n"
    "kit.viz.inspector(batch, tokenizer)",
    "kit.viz.show(batch[0], tokenizer);",
    "kit.viz.plot_tokens(batch)",
]
_TOKENS = re.compile(r"· (\d+) tokens:")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _notebook(path: Path, markdown: str) -> None:
    """The notebook: CELLS, then ``markdown`` as a markdown cell (rendered through the sanitizer)."""
    cells = [
        {
            "id": f"cell-{number}",
            "cell_type": "code",
            "metadata": {},
            "source": source,
            "outputs": [],
            "execution_count": None,
        }
        for number, source in enumerate(CELLS)
    ]
    cells.append({"id": "static", "cell_type": "markdown", "metadata": {}, "source": markdown})
    notebook = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook), encoding="utf-8")


def _wait_for_server(url: str, process: subprocess.Popen, log: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"jupyter lab did not answer within {seconds} s:\n{log.read_text()}")


def _stop(process: subprocess.Popen, shutdown_url: str) -> None:
    """Ask the server to shut down (it stops its kernels), then end its process group."""
    try:
        request = urllib.request.Request(shutdown_url, method="POST")
        urllib.request.urlopen(request, timeout=5).close()
        process.wait(timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        pass
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _need_chromium() -> None:
    """Skip, saying what is missing, where chromium or Playwright is."""
    if not CHROMIUM.exists():
        # CI installs chromium (scripts/setup.sh dev): there, a missing browser is a failure.
        missing = pytest.fail if os.environ.get("CI") == "true" else pytest.skip
        missing(f"{CHROMIUM} is missing: `apt-get install chromium` (scripts/setup.sh dev)")
    pytest.importorskip("playwright", reason="Playwright is missing: `pip install playwright`")


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on a free 127.0.0.1 port with its own config, data and runtime dirs."""
    _need_chromium()
    pytest.importorskip("jupyterlab")
    pytest.importorskip("ipywidgets")
    if shutil.which("jupyter") is None:
        pytest.skip("the `jupyter` command is not on PATH")

    root = tmp_path / "lab"
    for name in ("notebooks", "config", "runtime", "settings", "workspaces"):
        (root / name).mkdir(parents=True)
    # JupyterLab sanitizes markdown (and untrusted outputs): a view pasted into a markdown cell
    # shows what survives there.
    from kit.models import tiny_tokenizer
    from kit.viz import html
    from tests.test_viz import sample_batch

    echo = sample_batch(tiny_tokenizer())[2]
    _notebook(root / "notebooks" / "inspect.ipynb", html(echo, tiny_tokenizer()))
    # A fresh JupyterLab user is asked whether to fetch news: answer no in the user settings.
    for plugin, settings in SETTINGS.items():
        path = root / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings), encoding="utf-8")
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(root / "config"),
        "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(root / "workspaces"),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "IPYTHONDIR": str(root / "ipython"),
    }
    log = root / "server.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--allow-root",  # CI containers run as root
        f"--IdentityProvider.token={token}",
        f"--notebook-dir={root / 'notebooks'}",
        # Nothing reaches for the network: no news feed, no update check, no PyPI extension search.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    with log.open("w") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(f"{base}/api/status?token={token}", process, log)
        yield {
            "url": f"{base}/lab/tree/inspect.ipynb?token={token}",
            "base": base,
            "static_tokens": len(echo.input_ids),
        }
    finally:
        _stop(process, f"{base}/api/shutdown?token={token}")


def test_inspector_in_jupyterlab_renders_follows_its_controls_and_survives_sanitizing(
    lab, tmp_path
):
    from playwright.sync_api import expect, sync_playwright

    started = time.monotonic()
    outside: list[str] = []
    shots = [
        "inspector_tokens.png",
        "inspector_chat.png",
        "inspector_dark.png",
        "token_view.png",
        "plot_tokens.png",
    ]
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "inspector_failure.png").unlink(missing_ok=True)  # from an earlier run
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:

            def local_only(route):
                if route.request.url.startswith(lab["base"]):
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()

            page.route("**/*", local_only)
            page.set_default_timeout(WAIT_MS)
            expect.set_options(timeout=WAIT_MS)
            page.goto(lab["url"])
            # "Run All" before the page has its kernel makes JupyterLab ask which kernel to start:
            # wait until the status bar names the kernel and calls it idle.
            page.locator("#jp-main-statusbar").get_by_text(
                re.compile(r"Python 3 \(ipykernel\) \| Idle")
            ).wait_for()
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()

            inspector = page.locator(".kit-inspector")
            inspector.wait_for()
            body = inspector.locator(".kit-inspector-body")
            summary = inspector.locator(".kit-inspector-summary")
            expect(summary).to_contain_text("#0 · catch")
            first = int(_TOKENS.search(summary.inner_text()).group(1))
            expect(body.locator(".kit-tok")).to_have_count(first)
            expect(body.locator(".kit-legend")).to_be_visible()
            opened = time.monotonic() - started

            # Front end -> kernel -> front end: pick the last rollout (cut by the budget).
            inspector.locator(".kit-inspector-rollout select").select_option(index=3)
            expect(summary).to_contain_text("#3 · catch")
            expect(summary).to_contain_text("truncated")
            last = int(_TOKENS.search(summary.inner_text()).group(1))
            assert last != first
            expect(body.locator(".kit-tok")).to_have_count(last)
            expect(body.locator(".kit-untrained").first).to_have_attribute(
                "title", re.compile(r"^id \d+ · .* · model · loss off \(completion_mask 0\)$")
            )
            inspector.screenshot(path=str(ARTIFACTS / shots[0]))

            inspector.locator(".kit-inspector-view button", has_text="chat").click()
            expect(body.locator(".kit-chat")).to_be_visible()
            expect(body.locator(".kit-tok")).to_have_count(0)
            inspector.screenshot(path=str(ARTIFACTS / shots[1]))
            reacted = time.monotonic() - started - opened

            # The other cells: the token view as a plain output, and a figure.
            expect(page.locator(".jp-OutputArea-output > .kit-viz")).to_have_count(1)
            expect(page.locator(".jp-OutputArea-output img")).to_have_count(1)
            page.locator(".jp-OutputArea-output > .kit-viz").evaluate(
                "element => element.scrollIntoView({block: 'start'})"
            )
            page.screenshot(path=str(ARTIFACTS / shots[3]))
            figure = page.locator(".jp-OutputArea-output img")
            figure.scroll_into_view_if_needed()
            expect(figure).to_be_visible()
            page.wait_for_function(
                "() => document.querySelector('.jp-OutputArea-output img').naturalWidth > 0"
            )
            page.locator(".jp-CodeCell").nth(3).screenshot(path=str(ARTIFACTS / shots[4]))

            # The sanitized copy keeps every token, its tooltip and its colour.
            static = page.locator(".jp-MarkdownCell .kit-viz")
            expect(static.locator(".kit-tok")).to_have_count(lab["static_tokens"])
            env_token = static.locator(".kit-env").first
            expect(env_token).to_have_attribute(
                "title", re.compile(r"^id \d+ · .* · env · loss off$")
            )
            colour = env_token.evaluate("token => getComputedStyle(token).backgroundColor")
            assert colour.replace(" ", "") == "rgba(255,150,0,0.28)"

            # The same view on JupyterLab's dark theme.
            inspector.locator(".kit-inspector-view button", has_text="tokens").click()
            page.get_by_role("menuitem", name="Settings", exact=True).click()
            page.get_by_text("Theme", exact=True).hover()
            page.get_by_text("JupyterLab Dark", exact=True).click()
            page.locator("body[data-jp-theme-light='false']").wait_for(state="attached")
            inspector.locator(".kit-inspector-rollout select").select_option(index=0)
            expect(summary).to_contain_text("#0 · catch")
            expect(body.locator(".kit-tok")).to_have_count(first)
            page.wait_for_timeout(500)  # the theme's CSS transition
            inspector.screenshot(path=str(ARTIFACTS / shots[2]))
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "inspector_failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    for name in shots:
        assert (ARTIFACTS / name).stat().st_size > 10_000
        shutil.copy(ARTIFACTS / name, tmp_path / name)
    print(
        f"\nbrowser test: lab opened to inspector rendered {opened:.1f} s (includes a GRPO step), "
        f"reactions {reacted:.1f} s; refused outside requests: {outside or 'none'}"
    )


# The rendered rollout's tokens, as the browser serializes the DOM, or another markup parsed alike.
_SHOWN = "() => document.querySelector('.kit-page .kit-tokens').innerHTML"
_PARSED = (
    "markup => { const d = document.createElement('div'); d.innerHTML = markup; "
    "return d.innerHTML; }"
)


def test_saved_page_opens_a_large_batch_one_rollout_at_a_time_rendered_as_python_does(tmp_path):
    _need_chromium()
    pytest.importorskip("trl")
    from playwright.sync_api import expect, sync_playwright

    from kit.models import tiny_tokenizer
    from kit.trajectory import Trajectory
    from kit.viz import save_html, summary
    from kit.viz.render import token_view
    from tests.test_viz import long_rollout, sample_batch

    tokenizer = tiny_tokenizer()
    batch = sample_batch(tokenizer)  # won, lost, echo with quotes, tabs and split emoji, cut
    # What the script must draw, escape and quote as Python does: control characters (C0 and
    # C1), CR, both quotes (Python's repr then picks "), markup, and a split emoji.
    odd = tokenizer.encode('x\x07 it\'s "q" é😀</script><!--\x85\r\n', add_special_tokens=False)
    mixed = [int(i % 3 > 0) for i in range(len(odd))], [i % 2 for i in range(len(odd))]
    prompt = tokenizer.encode("a\tb", add_special_tokens=False)
    batch.append(Trajectory([], prompt, odd, *mixed))  # every kind: model, untrained and env
    # GitHub issue 10's batch: 64 rollouts of about 10k tokens; each its own length, so the
    # token count says which one is shown.
    large = [long_rollout(batch[i % len(batch)], 10_000 - i) for i in range(64)]
    pages = {
        "large": save_html(large, tokenizer, tmp_path / "large.html"),
        "small": save_html(batch, tokenizer, tmp_path / "small.html"),
    }
    ARTIFACTS.mkdir(exist_ok=True)
    outside: list[str] = []

    def local_only(route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", local_only)
            page.set_default_timeout(WAIT_MS)
            expect.set_options(timeout=WAIT_MS)
            started = time.monotonic()
            page.goto(pages["large"].as_uri())
            nav = page.locator(".kit-nav")
            expect(nav).to_be_visible()  # the script ran
            tokens = page.locator(".kit-page .kit-tokens .kit-tok")
            expect(tokens).to_have_count(len(large[0].input_ids))
            opened = time.monotonic() - started
            expect(page.locator("#kit-prev")).to_be_disabled()

            started = time.monotonic()
            page.locator("#kit-pick").select_option("37")
            expect(tokens).to_have_count(len(large[37].input_ids))
            switched = time.monotonic() - started
            summary_line = page.locator(".kit-page .kit-summary")
            expect(summary_line).to_have_text(summary(large[37]))
            page.locator("#kit-next").click()
            expect(tokens).to_have_count(len(large[38].input_ids))
            expect(page.locator("#kit-pick")).to_have_value("38")
            page.locator("#kit-pick").select_option("63")
            expect(tokens).to_have_count(len(large[63].input_ids))
            expect(page.locator("#kit-next")).to_be_disabled()
            # One rollout's DOM at a time, whichever was shown before.
            elements = page.evaluate("() => document.getElementsByTagName('*').length")
            assert elements < 5 * len(large[63].input_ids)
            env = page.locator(".kit-page .kit-tokens .kit-env").first
            expect(env).to_have_attribute("title", re.compile(r"^id \d+ · .* · env · loss off$"))
            colour = env.evaluate("token => getComputedStyle(token).backgroundColor")
            assert colour.replace(" ", "") == "rgba(255,150,0,0.28)"
            page.screenshot(path=str(ARTIFACTS / "page_large.png"))

            # Every rollout as the script renders it is the DOM of Python's markup for it,
            # element by element and attribute by attribute; rollout 0 again after the others.
            page.goto(pages["small"].as_uri())
            expect(nav).to_be_visible()
            for i in [*range(1, len(batch)), 0]:
                page.locator("#kit-pick").select_option(str(i))
                expect(summary_line).to_have_text(summary(batch[i]))
                expected = page.evaluate(_PARSED, token_view(batch[i], tokenizer, inline=False))
                assert page.evaluate(_SHOWN) == expected, f"rollout {i}"

            # Scripts off: the first rollout, whole, and a notice instead of the selector.
            off = browser.new_context(java_script_enabled=False).new_page()
            off.route("**/*", local_only)
            off.goto(pages["small"].as_uri())
            expect(off.locator(".kit-page .kit-tokens .kit-tok")).to_have_count(
                len(batch[0].input_ids)
            )
            expect(off.locator(".kit-nav")).to_be_hidden()
            assert "Scripts are off:" in off.inner_text("body")  # text locators skip <noscript>
        finally:
            browser.close()
    assert outside == []
    print(
        f"\nsaved page of 64 x ~10k tokens ({pages['large'].stat().st_size / 1e6:.1f} MB): "
        f"opened {opened:.1f} s, switched in {switched:.1f} s"
    )
