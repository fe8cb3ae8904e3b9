// save_html's page: renders the picked episode from the JSON that kit/viz/page.py writes.
//
// The markup is what kit.viz.render.token_view(..., inline=False) writes, the styles being in
// the page's <style> block: the first episode, rendered in Python, is in the page as it loads
// (and all a reader sees with scripts off); the others are rendered here when picked, each
// replacing the last. tests/test_viz_browser.py checks that both write the same DOM.
// Tests count "rollout" followed by a space in the page, once per label: never write it here.
"use strict";
(() => {
  const data = JSON.parse(document.getElementById("kit-data").textContent);
  const KINDS = ["prompt", "model", "env", "untrained"]; // the codes of the data's runs
  const LOSS = ["loss off", "loss on", "loss off", "loss off (completion_mask 0)"];
  const DRAWN = new Map([[" ", "·"], ["\t", "⇥"], ["\r", "␍"]]);
  const PLAIN = /^[^\n \t\r&<>"'\p{Cc}]+$/u; // most tokens: nothing to draw or escape
  const CONTROL = /^\p{Cc}$/u;
  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;" };
  const DIM = '<span class="kit-dim">';

  const escape = (text) => text.replace(/[&<>"']/g, (char) => ESCAPES[char]);

  // render.py's _visible: whitespace and control characters drawn, the rest escaped.
  function visible(text) {
    if (!text) return `${DIM}◌</span>`;
    if (PLAIN.test(text)) return text;
    let out = "";
    for (const char of text) {
      if (char === "\n") out += `${DIM}↵</span><br>`;
      else if (DRAWN.has(char)) out += `${DIM}${DRAWN.get(char)}</span>`;
      else if (CONTROL.test(char)) {
        out += `${DIM}\\x${char.codePointAt(0).toString(16).padStart(2, "0")}</span>`;
      } else out += escape(char);
    }
    return out;
  }

  function badge(text, title = "", variant = "") {
    const tip = title ? ` title="${escape(title)}"` : "";
    return `<span class="kit-mark${variant ? ` ${variant}` : ""}"${tip}>${escape(text)}</span>`;
  }

  // A vocabulary entry is [id, text] or, where Python's repr is not the text in single quotes,
  // [id, text, repr]: the tooltip shows the repr, as the notebook view does.
  function token([id, text, repr = `'${text}'`], kind) {
    const source = kind === 3 ? "model" : KINDS[kind];
    const title = escape(`id ${id} · ${repr} · ${source} · ${LOSS[kind]}`);
    return `<span class="kit-tok kit-${KINDS[kind]}" title="${title}">${visible(text)}</span><wbr>`;
  }

  // render.py's token_view_of_texts: a turn starts at each sampled token after an unsampled one, and
  // its tool calls show where the env's text starts (or at the end, if none follows).
  function render(episode) {
    const kinds = new Uint8Array(episode.tokens.length);
    let at = 0;
    for (const [kind, count] of episode.runs) {
      kinds.fill(kind, at, at + count);
      at += count;
    }
    const turns = [[]];
    const calls = () => (episode.calls[turns.length - 1] || []).map((call) => badge(...call));
    let previous = "prompt";
    episode.tokens.forEach((entry, i) => {
      const source = kinds[i] === 3 ? "model" : KINDS[kinds[i]];
      if (source === "model" && previous !== "model") turns.push([badge(`turn ${turns.length}`)]);
      if (source === "env" && previous === "model") turns[turns.length - 1].push(...calls());
      turns[turns.length - 1].push(token(data.vocab[entry], kinds[i]));
      previous = source;
    });
    if (previous === "model") turns[turns.length - 1].push(...calls());
    const [prompt, ...rest] = turns;
    return (
      `<details class="kit-turn"><summary style="cursor:pointer">${badge(episode.prompt)}` +
      `</summary>${prompt.join("")}</details>` +
      rest.map((parts) => `<div class="kit-turn">${parts.join("")}</div>`).join("") +
      `<div class="kit-end">${badge(episode.end, "", "kit-mark-end")}</div>`
    );
  }

  const pick = document.getElementById("kit-pick");
  const back = document.getElementById("kit-prev");
  const forward = document.getElementById("kit-next");
  const summary = document.querySelector(".kit-page .kit-summary");
  const tokens = document.querySelector(".kit-page .kit-tokens");
  let shown = 0; // the page loads with the first one, rendered in Python

  function show(index) {
    if (index !== shown) {
      summary.textContent = data.rollouts[index].summary;
      tokens.innerHTML = render(data.rollouts[index]); // the previous one's DOM goes
      shown = index;
      window.scrollTo(0, 0);
    }
    pick.value = String(index);
    back.disabled = index === 0;
    forward.disabled = index === data.rollouts.length - 1;
  }

  pick.addEventListener("change", () => show(Number(pick.value)));
  back.addEventListener("click", () => show(shown - 1));
  forward.addEventListener("click", () => show(shown + 1));
  // A reload may restore the selector's last choice: show what it says.
  show(Number(pick.value));
  document.querySelector(".kit-nav").hidden = false;
})();
