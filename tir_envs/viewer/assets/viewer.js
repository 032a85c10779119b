// tir-envs view: renders the run table and one trajectory from the embedded JSON.
// All page text is set with textContent: model output never becomes markup.
"use strict";
(function () {
  // The run table's rows are parsed at load; each trajectory is parsed only when it is opened,
  // from the chunk of DATA.chunk episodes holding it (script#ep-N), and kept once parsed.
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const S = DATA.strings;
  const state = { sortKey: "i", sortDir: 1, open: null, page: 0, size: 100, rows: [] };
  const chunks = new Map();
  const collator = new Intl.Collator(undefined, { numeric: true });
  function episode(i) {
    const c = Math.floor(i / DATA.chunk);
    if (!chunks.has(c)) {
      const node = document.getElementById(`ep-${c}`);
      chunks.set(c, node ? JSON.parse(node.textContent) : []);
    }
    return chunks.get(c)[i - c * DATA.chunk];
  }

  function el(tag, props, children) {
    const node = document.createElement(tag);
    Object.entries(props || {}).forEach(([k, v]) => {
      if (k === "text") node.textContent = v;
      else if (k === "class") node.className = v;
      else node.setAttribute(k, v);
    });
    (children || []).forEach((c) => node.appendChild(c));
    return node;
  }
  const fmt = (x, digits) => (x === null || x === undefined ? "" :
    typeof x === "number" ? (Number.isInteger(x) ? String(x) : x.toFixed(digits || 3)) : String(x));

  // ---- header and filters ----------------------------------------------------------
  function header() {
    document.getElementById("title").textContent = DATA.title || "tir-envs view";
    const rows = DATA.rows;
    const count = (v) => rows.filter((r) => r.verdict === v).length;
    const s = DATA.settings || {};
    const bits = [`${rows.length} episodes`, `${count("correct")} correct`,
      `${count("incorrect")} incorrect`, `${count("failed")} failed`];
    ["protocol", "k", "temperature", "max_tokens", "policy"].forEach((k) => {
      if (s[k] !== undefined && s[k] !== null) bits.push(`${k} ${typeof s[k] === "object" ? JSON.stringify(s[k]) : s[k]}`);
    });
    document.getElementById("summary").textContent = bits.join(" · ");
    fillSelect("f-part", [...new Set(rows.map((r) => r.part))].sort());
    fillSelect("f-status", [...new Set(rows.map((r) => r.status))].sort());
    const steps = [...new Set(rows.map((r) => r.step).filter((x) => x !== null && x !== undefined))];
    if (steps.length) {  // a training dump: a step column and filter
      steps.sort((a, b) => a - b);
      fillSelect("f-step", steps.map(String));
      document.getElementById("f-step-box").hidden = false;
      document.getElementById("step-col").hidden = false;
      state.hasStep = true;
    }
    ["f-verdict", "f-part", "f-status", "f-step"].forEach((id) =>
      document.getElementById(id).addEventListener("change", () => { state.page = 0; refilter(); }));
    document.querySelectorAll("#runs th").forEach((th) => th.addEventListener("click", () => {
      const key = th.dataset.key;
      state.sortDir = state.sortKey === key ? -state.sortDir : 1;
      state.sortKey = key;
      state.page = 0;
      refilter();
    }));
    document.getElementById("prev").addEventListener("click", () => { state.page -= 1; renderTable(); });
    document.getElementById("next").addEventListener("click", () => { state.page += 1; renderTable(); });
    document.getElementById("page-size").addEventListener("change", (e) => {
      state.size = Number(e.target.value); state.page = 0; renderTable();
    });
  }
  function fillSelect(id, values) {
    const sel = document.getElementById(id);
    values.forEach((v) => sel.appendChild(el("option", { value: v, text: v === "" ? "(none)" : v })));
  }

  // ---- run table ---------------------------------------------------------------------
  // Filtering and sorting run over every row, once per change; only one page of rows is in
  // the DOM, so a click or a page turn costs the same at 100 or 100,000 episodes.
  function visibleRows() {
    const v = document.getElementById("f-verdict").value;
    const p = document.getElementById("f-part").value;
    const st = document.getElementById("f-status").value;
    const sp = document.getElementById("f-step").value;
    const rows = DATA.rows.filter((r) => (!v || r.verdict === v) && (!p || r.part === p) &&
      (!st || r.status === st) && (!sp || String(r.step) === sp));
    const key = state.sortKey, dir = state.sortDir;
    return rows.sort((a, b) => {
      const x = a[key], y = b[key];
      if (x === y) return a.i - b.i;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (typeof x === "number" && typeof y === "number" ? x - y : collator.compare(String(x), String(y))) * dir;
    });
  }
  function refilter() {
    state.rows = visibleRows();
    renderTable();
  }
  function rowNode(r) {
    const cells = [
      el("td", { text: String(r.i) }), el("td", { text: r.part }), el("td", { text: fmt(r.item) }),
      el("td", { text: fmt(r.sample) }), el("td", { class: "v-" + r.verdict, text: r.verdict }),
      el("td", { text: fmt(r.reward) }), el("td", { text: fmt(r.turns) }),
      el("td", { text: fmt(r.calls) }), el("td", { text: r.status }),
      el("td", { text: `${r.tokens} (${r.policy} policy)` })];
    if (state.hasStep) cells.push(el("td", { text: fmt(r.step) }));
    return el("tr", { "data-i": String(r.i), class: r.i === state.open ? "open" : "" }, cells);
  }
  function renderTable() {
    const rows = state.rows;
    const pages = Math.max(1, Math.ceil(rows.length / state.size));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    const start = state.page * state.size;
    const shown = rows.slice(start, start + state.size);
    const body = document.querySelector("#runs tbody");
    const frag = document.createDocumentFragment();
    shown.forEach((r) => frag.appendChild(rowNode(r)));
    body.replaceChildren(frag);
    document.querySelectorAll("#runs th").forEach((th) => {
      th.classList.toggle("sorted-asc", th.dataset.key === state.sortKey && state.sortDir > 0);
      th.classList.toggle("sorted-desc", th.dataset.key === state.sortKey && state.sortDir < 0);
    });
    document.getElementById("shown").textContent = `${rows.length} of ${DATA.rows.length} shown`;
    document.getElementById("page-of").textContent = rows.length ?
      `rows ${start + 1}–${start + shown.length} · page ${state.page + 1} of ${pages}` : "no rows";
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
  }

  // ---- one trajectory ----------------------------------------------------------------
  function heat(logprob) {
    const p = Math.exp(Math.max(-20, Math.min(0, logprob)));
    return `hsl(${Math.round(120 * p)}, 80%, 42%)`;
  }
  function tokenSpan(text, cls, i, id, mask, logprob) {
    const span = el("span", { class: "t " + cls, text: text, "data-i": String(i), "data-id": String(id) });
    if (mask !== null) span.dataset.mask = String(mask);
    let tip = (cls === "prompt" ? `prompt token ${i}` : `token ${i}`) + ` · id ${id}`;
    if (mask !== null) tip += ` · loss mask ${mask}`;
    if (logprob !== null) {
      tip += ` · logprob ${logprob.toFixed(4)} (p=${Math.exp(logprob).toFixed(3)})`;
      span.style.borderBottomColor = heat(logprob);
      span.dataset.logprob = String(logprob);
    }
    span.title = tip;
    return span;
  }
  function stream(ep) {
    const box = el("div", { class: "stream", id: "stream" });
    const frag = document.createDocumentFragment();
    ep.prompt.forEach((s, i) => frag.appendChild(tokenSpan(S[s], "prompt", i, ep.prompt_ids[i], null, null)));
    const starts = new Map(ep.turns.map((t, n) => [t.action[0], n]));
    ep.text.forEach((s, i) => {
      if (starts.has(i)) frag.appendChild(el("span", { class: "turn-mark", text: `turn ${starts.get(i) + 1}` }));
      const policy = ep.mask[i] === 1;
      const lp = policy && ep.logprobs ? ep.logprobs[i] : null;
      frag.appendChild(tokenSpan(S[s], policy ? "policy" : "env", i, ep.ids[i], ep.mask[i], lp));
    });
    box.appendChild(frag);
    return box;
  }
  function turnsTable(ep) {
    const head = el("tr", {}, ["turn", "action tokens", "observation tokens", "tool calls", "status", "reward"]
      .map((h) => el("th", { text: h })));
    const rows = ep.turns.map((t, n) => {
      const calls = t.calls.map((c) => `${c.tool || "?"}: ${c.status}` +
        (c.latency_s !== null && c.executed ? ` (${(c.latency_s * 1000).toFixed(1)} ms)` : "") +
        (c.flags.length ? ` [${c.flags.join(", ")}]` : "")).join("; ");
      const comps = Object.entries(t.components || {}).map(([k, v]) => `${k}=${fmt(v)}`).join(" ");
      return el("tr", { class: "turn-row" }, [el("td", { text: String(n + 1) }),
        el("td", { text: `${t.action[0]}–${t.action[1]}` }),
        el("td", { text: t.observation[1] > t.observation[0] ? `${t.observation[0]}–${t.observation[1]}` : "" }),
        el("td", { class: "calls", text: calls || "none" }), el("td", { text: t.status }),
        el("td", { text: fmt(t.reward) + (comps ? ` (${comps})` : "") })]);
    });
    return el("table", { class: "turns" }, [head, ...rows]);
  }
  function facts(ep, row) {
    const items = [["verdict", row.verdict], ["answer", ep.answer === null ? "(none extracted)" : ep.answer],
      ["gold", ep.gold === null ? "(not recorded)" : ep.gold], ["reward", fmt(ep.reward)],
      ["components", Object.entries(ep.components).map(([k, v]) => `${k}=${fmt(v)}`).join(" ")],
      ["stop reason", ep.stop_reason], ["task", `${ep.task_id} (${ep.env_id})`], ["source", ep.source]];
    if (ep.failure) items.push(["failure", typeof ep.failure === "string" ? ep.failure : `${ep.failure.kind}: ${ep.failure.message}`]);
    if (ep.retokenized) items.push(["retokenized", `yes, drift ${ep.drift}`]);
    const dl = el("dl", { id: "facts" });
    const judged = { answer: ep.correct === true ? "match" : ep.correct === false ? "mismatch" : "" };
    items.forEach(([k, v]) => {
      dl.appendChild(el("dt", { text: k }));
      dl.appendChild(el("dd", { text: String(v), "data-fact": k, class: judged[k] || "" }));
    });
    return dl;
  }
  function openEpisode(i) {
    const before = document.querySelector(`#runs tbody tr[data-i="${state.open}"]`);
    if (before) before.classList.remove("open");
    state.open = i;
    const now = document.querySelector(`#runs tbody tr[data-i="${i}"]`);
    if (now) now.classList.add("open");
    const ep = episode(i), row = DATA.rows[i];
    const box = document.getElementById("episode");
    const legend = el("p", { class: "legend" }, [el("span", { class: "t prompt", text: "prompt" }),
      el("span", { class: "t policy", text: "policy (loss mask 1)" }), el("span", { class: "t env", text: "env (loss mask 0)" }),
      el("span", { text: "logprob: " }), el("span", { class: "heat-scale", title: "low → high probability" })]);
    box.replaceChildren(el("h2", { text: `Episode ${i}: ${row.part} item ${fmt(row.item)} sample ${fmt(row.sample)}` }),
      facts(ep, row), turnsTable(ep), legend, stream(ep));
    box.hidden = false;
    box.scrollIntoView({ block: "start" });
    try { if (location.hash !== `#ep=${i}`) history.replaceState(null, "", `#ep=${i}`); } catch (e) { /* a file: page may refuse: the link is a nicety */ }
  }

  header();
  document.querySelector("#runs tbody").addEventListener("click", (e) => {  // one listener for every row
    const tr = e.target.closest("tr[data-i]");
    if (tr) openEpisode(Number(tr.dataset.i));
  });
  refilter();
  const m = /^#ep=(\d+)$/.exec(location.hash);
  if (m && Number(m[1]) < DATA.rows.length) openEpisode(Number(m[1]));
})();
