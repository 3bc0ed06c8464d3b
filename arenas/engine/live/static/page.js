// The live run's page: status, curves from the event stream, commands, the arena's view
// and, in self-play runs, a game against the policy. Plain browser JavaScript, no build.
//
// The token is read from the address after '#' (`#token=...`, what `paddlecraft live RUN
// open` prints); it is sent in the Authorization header of every /api/ request and never
// put in a URL. The event stream is read with fetch() and a stream reader because
// EventSource cannot send headers.
"use strict";

(function () {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const MAX_POINTS = 4000; // points kept per curve
  const series = new Map(); // "train/loss" -> Map(step -> value)
  let state = "connecting";
  let drawPending = false;
  // The newest step shown. A run's step never goes back, but a status reply that left the
  // server before a step's event can arrive after it: it must not move the counter back.
  let shownStep = -1;

  function showStep(step, epoch) {
    if (typeof step !== "number" || step < shownStep) return;
    shownStep = step;
    $("step").textContent = step;
    $("epoch").textContent = epoch;
  }

  // ------------------------------------------------------------------ the API
  class ApiError extends Error {}

  async function api(path, options = {}) {
    const headers = { Authorization: "Bearer " + token, ...(options.headers || {}) };
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, { ...options, headers });
    let data = null;
    try {
      data = await res.json();
    } catch (e) {
      data = null;
    }
    if (!res.ok) {
      const why = data && data.error ? data.error : res.status + " " + res.statusText;
      throw new ApiError(why);
    }
    return data;
  }

  function say(text, isError) {
    const m = $("message");
    m.textContent = text || "";
    m.hidden = !text;
    m.className = isError ? "error" : "";
  }

  // ------------------------------------------------------------------ status line
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "-";
    const s = Math.round(seconds);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return (h ? h + " h " : "") + (h || m ? m + " min " : "") + (s % 60) + " s";
  }

  function number(v) {
    if (typeof v !== "number") return v === null || v === undefined ? "-" : String(v);
    return Math.abs(v) >= 1000 || Number.isInteger(v) ? String(v) : v.toPrecision(4);
  }

  function short(v) {
    // an axis label: at most ~8 characters
    if (Number.isInteger(v) && Math.abs(v) < 1e7) return String(v);
    return v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5) ? v.toExponential(2) : v.toPrecision(3);
  }

  function showState(s) {
    state = s;
    $("state").textContent = s;
    document.body.dataset.state = s;
  }

  function showStatus(st) {
    showState(st.state);
    showStep(st.step, st.epoch);
    $("total-steps").textContent = st.total_steps ? " / " + st.total_steps : "";
    $("eta").textContent = st.state === "running" ? duration(st.eta_s) : "-";
    if (st.arena) $("arena-name").textContent = "(" + st.arena + ")";
    if (st.headline) {
      $("headline-name").textContent = st.headline;
      const v = (st.last_eval || {})[st.headline];
      $("headline").textContent = number(v);
    }
  }

  async function pollStatus() {
    try {
      showStatus(await api("/api/status"));
    } catch (e) {
      if (e instanceof ApiError) say(e.message, true);
      else showState(state === "running" || state === "paused" ? "unreachable" : state);
    }
  }

  // ------------------------------------------------------------------ the event stream
  function addPoint(name, step, value) {
    if (typeof value !== "number" || !isFinite(value)) return;
    let s = series.get(name);
    if (!s) {
      s = new Map();
      series.set(name, s);
    }
    s.set(step, value); // a reconnect replays the history: same step, same point
    if (s.size > MAX_POINTS) s.delete(s.keys().next().value);
  }

  function onEvent(ev) {
    if (ev.kind === "train" || ev.kind === "eval") {
      for (const [k, v] of Object.entries(ev)) {
        if (k !== "kind" && k !== "step" && k !== "epoch") addPoint(ev.kind + "/" + k, ev.step, v);
      }
      if (ev.kind === "train") showStep(ev.step, ev.epoch);
      scheduleDraw();
    } else if (ev.kind === "state" || ev.kind === "command") {
      if (ev.state) showState(ev.state);
    }
  }

  async function readEvents() {
    for (;;) {
      try {
        const res = await fetch("/api/events", { headers: { Authorization: "Bearer " + token } });
        if (res.status === 401) {
          say("the token was refused: open the page with `paddlecraft live RUN_DIR open`", true);
          return;
        }
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const data = frame
              .split("\n")
              .filter((line) => line.startsWith("data:"))
              .map((line) => line.slice(5).trimStart())
              .join("\n");
            if (data) onEvent(JSON.parse(data));
          }
        }
      } catch (e) {
        // the server went away or the connection dropped: try again below
      }
      await pollStatus();
      if (!["running", "paused", "stopping", "starting", "connecting", "unreachable"].includes(state)) {
        return; // the run has ended: its stream is closed for good
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  // ------------------------------------------------------------------ curves
  function scheduleDraw() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => {
      drawPending = false;
      drawCharts();
    });
  }

  // training curves first (losses leading), evaluation metrics in their own fold
  const rank = (n) => (n.includes("loss") ? 0 : 1);
  const byRank = (a, b) => rank(a) - rank(b) || a.localeCompare(b);

  function chartFor(name) {
    const id = "chart-" + name.replace(/[^A-Za-z0-9_-]/g, "_");
    let fig = document.getElementById(id);
    if (!fig) {
      const evaluation = name.startsWith("eval/");
      const box = evaluation ? $("eval-charts") : $("charts");
      if (evaluation) $("eval-curves").hidden = false;
      const empty = $("charts").querySelector(".empty");
      if (empty) empty.remove();
      fig = document.createElement("figure");
      fig.id = id;
      fig.className = "chart";
      fig.dataset.metric = name;
      const canvas = document.createElement("canvas");
      canvas.width = 320;
      canvas.height = 160;
      const cap = document.createElement("figcaption");
      fig.append(canvas, cap);
      const after = [...box.children].find((f) => byRank(f.dataset.metric, name) > 0);
      box.insertBefore(fig, after || null);
    }
    return fig;
  }

  function drawCharts() {
    for (const [name, points] of series) drawChart(chartFor(name), points);
  }

  function drawChart(fig, points) {
    const canvas = fig.querySelector("canvas");
    const ctx = canvas.getContext("2d");
    const steps = [...points.keys()].sort((a, b) => a - b);
    const values = steps.map((s) => points.get(s));
    const W = canvas.width;
    const H = canvas.height;
    const pad = { l: 64, r: 8, t: 8, b: 20 };
    ctx.clearRect(0, 0, W, H);
    let lo = Math.min(...values);
    let hi = Math.max(...values);
    if (hi === lo) {
      hi += Math.abs(hi) * 0.05 || 1;
      lo -= Math.abs(lo) * 0.05 || 1;
    }
    const x0 = steps[0];
    const x1 = steps.length > 1 ? steps[steps.length - 1] : x0 + 1;
    const px = (s) => pad.l + ((s - x0) / (x1 - x0)) * (W - pad.l - pad.r);
    const py = (v) => H - pad.b - ((v - lo) / (hi - lo)) * (H - pad.t - pad.b);
    ctx.strokeStyle = "#bbb";
    ctx.strokeRect(pad.l, pad.t, W - pad.l - pad.r, H - pad.t - pad.b);
    ctx.fillStyle = "#555";
    ctx.font = "11px sans-serif";
    ctx.fillText(short(hi), 2, pad.t + 10);
    ctx.fillText(short(lo), 2, H - pad.b);
    ctx.fillText("step " + x0, pad.l, H - 4);
    const right = "step " + steps[steps.length - 1];
    ctx.fillText(right, W - pad.r - ctx.measureText(right).width, H - 4);
    ctx.strokeStyle = fig.dataset.metric.startsWith("eval/") ? "#c05621" : "#2b6cb0";
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    steps.forEach((s, i) => (i ? ctx.lineTo(px(s), py(values[i])) : ctx.moveTo(px(s), py(values[i]))));
    if (steps.length === 1) ctx.arc(px(steps[0]), py(values[0]), 2, 0, 2 * Math.PI);
    ctx.stroke();
    fig.dataset.points = String(steps.length);
    fig.dataset.lastStep = String(steps[steps.length - 1]);
    fig.querySelector("figcaption").textContent =
      fig.dataset.metric + ": " + number(values[values.length - 1]);
  }

  // ------------------------------------------------------------------ commands
  async function command(name, body) {
    const out = $("command-result");
    out.textContent = name + "...";
    try {
      const r = await api("/api/" + name, { method: "POST", body: body && JSON.stringify(body) });
      if (r.queued) {
        out.textContent = name + ": queued (applied at the next step boundary)";
      } else {
        const extra = r.path ? " -> " + r.path : r.changes ? " " + JSON.stringify(r.changes) : "";
        out.textContent = name + ": applied at step " + r.step + extra;
      }
      if (r.state) showState(r.state);
      say("");
    } catch (e) {
      out.textContent = "";
      // the run's message may already start with the command's name ("set: ...")
      say(e.message.startsWith(name + ":") ? e.message : name + ": " + e.message, true);
    }
    pollStatus();
  }

  function parseValue(text) {
    try {
      return JSON.parse(text); // numbers, true/false, null, lists
    } catch (e) {
      return text; // a word: a schedule name and the like
    }
  }

  // ------------------------------------------------------------------ the arena's view
  function board(spec, onClick) {
    // spec: {rows, cols, cells, last}; cells 0 empty, 1 first player (X), 2 second (O)
    const grid = document.createElement("div");
    grid.className = "grid" + (onClick ? " clickable" : "");
    if (spec.rows === 3 && spec.cols === 3) grid.classList.add("tictactoe"); // marks, not discs
    grid.style.gridTemplateColumns = "repeat(" + spec.cols + ", 2.2em)";
    for (let r = 0; r < spec.rows; r++) {
      for (let c = 0; c < spec.cols; c++) {
        const cell = document.createElement("div");
        const v = spec.cells[r][c];
        cell.className = "cell" + (v === 1 ? " x" : v === 2 ? " o" : "");
        cell.dataset.row = r;
        cell.dataset.col = c;
        cell.textContent = v === 1 ? "X" : v === 2 ? "O" : "";
        if (spec.last && spec.last[0] === r && spec.last[1] === c) cell.classList.add("last");
        if (onClick) cell.addEventListener("click", () => onClick(r, c));
        grid.append(cell);
      }
    }
    return grid;
  }

  // the key to a board's pieces: [[1 or 2, "who"], ...]; discs (red X, yellow O) or marks
  const PIECE = { 1: ["x", "X", "red"], 2: ["o", "O", "yellow"] };
  function legend(el, marks, owners) {
    el.classList.toggle("marks", marks);
    el.replaceChildren(...owners.map(([v, who]) => {
      const [cls, mark, colour] = PIECE[v];
      const key = Object.assign(document.createElement("span"), { className: "key " + cls });
      const disc = Object.assign(document.createElement("span"), { className: "disc " + cls });
      disc.textContent = marks ? mark : "";
      key.append(disc, who + " (" + (marks ? mark : colour + ", " + mark) + ")");
      return key;
    }));
  }

  function panel(p) {
    const fig = document.createElement("figure");
    fig.className = "panel panel-" + p.kind;
    const cap = document.createElement("figcaption");
    cap.textContent = p.label || "";
    fig.append(cap);
    if (p.kind === "image") {
      const img = document.createElement("img");
      img.alt = p.label || "image";
      img.addEventListener("load", () => {
        // small pictures (an 8x8-digit grid) are enlarged by a whole factor, kept sharp
        const k = Math.max(1, Math.floor(420 / img.naturalWidth));
        img.style.width = img.naturalWidth * k + "px";
      });
      img.src = p.src;
      fig.append(img);
    } else if (p.kind === "audio") {
      const audio = document.createElement("audio");
      audio.controls = true;
      audio.src = p.src;
      fig.append(audio);
    } else if (p.kind === "text") {
      const pre = document.createElement("pre");
      pre.textContent = p.text;
      fig.append(pre);
    } else if (p.kind === "table") {
      const table = document.createElement("table");
      const head = table.createTHead().insertRow();
      for (const c of p.columns) head.append(Object.assign(document.createElement("th"), { textContent: c }));
      const body = table.createTBody();
      for (const row of p.rows) {
        const tr = body.insertRow();
        for (const v of row) tr.insertCell().textContent = v === null ? "" : String(v);
      }
      fig.append(table);
    } else if (p.kind === "board") {
      fig.append(board(p, null));
      const key = Object.assign(document.createElement("p"), { className: "legend" });
      legend(key, p.rows === 3 && p.cols === 3, [[1, "first player"], [2, "second player"]]);
      fig.append(key);
      const note = document.createElement("p");
      note.textContent = p.caption || "";
      fig.append(note);
    }
    return fig;
  }

  let lastView = "";
  async function pollView() {
    try {
      const view = await api("/api/view");
      const text = JSON.stringify(view);
      if (text === lastView) return;
      lastView = text;
      const box = $("panels");
      const panels = (view && view.panels) || [];
      box.replaceChildren(...panels.map(panel));
      if (!panels.length) box.innerHTML = '<p class="empty">nothing to show yet</p>';
    } catch (e) {
      // a view is a courtesy: a run that ended or is busy keeps its last picture
    }
  }

  // ------------------------------------------------------------------ play against the policy
  const count = (n, one, many) => n + " " + (n === 1 ? one : many || one + "s");
  const RESULT_TEXT = { human_win: "You won.", policy_win: "The policy won.", draw: "A draw." };

  function showPlay(st) {
    const g = st.game;
    const box = $("play-board");
    const s = st.score;
    $("play-score").textContent =
      "The policy against people so far: " + count(s.wins, "win") + ", " + count(s.draws, "draw") +
      ", " + count(s.losses, "loss", "losses") + " (" + count(s.games, "game") + "; its search: " +
      count(st.simulations, "simulation") + " per move).";
    if (!g) {
      box.replaceChildren();
      $("play-legend").replaceChildren();
      return;
    }
    const clickable = g.to_move === "human";
    box.replaceChildren(board({ rows: st.rows, cols: st.cols, cells: g.cells, last: g.last },
      clickable ? (r, c) => humanMove(st.click === "column" ? c : r * st.cols + c) : null));
    box.dataset.toMove = g.to_move || "";
    box.dataset.result = g.result || "";
    box.dataset.moves = String(g.moves.length);
    const marks = st.rows === 3 && st.cols === 3;
    const mine = g.human_first ? 1 : 2;
    legend($("play-legend"), marks, [[mine, "you"], [3 - mine, "the policy"]]);
    const you = PIECE[mine][1] + (marks ? "" : ", " + PIECE[mine][2]);
    $("play-status").textContent = g.result
      ? "Game " + g.number + " is over: " + RESULT_TEXT[g.result]
      : g.to_move === "human"
        ? "Game " + g.number + ": your move (you are " + you + "; click a " + st.click + ")."
        : "Game " + g.number + ": the policy is thinking...";
  }

  async function playCall(path, body) {
    try {
      const st = await api("/api/arena/play" + path, { method: "POST", body: JSON.stringify(body || {}) });
      showPlay(st);
      if (st.game && st.game.to_move === "policy") {
        showPlay(await api("/api/arena/play/reply", { method: "POST", body: "{}" }));
      }
      say("");
    } catch (e) {
      say("play: " + e.message, true);
    }
  }

  let moving = false;
  async function humanMove(action) {
    if (moving) return; // one click at a time
    moving = true;
    try {
      await playCall("/move", { action: action });
    } finally {
      moving = false;
    }
  }

  async function setupPlay() {
    try {
      const st = await api("/api/arena/play");
      $("play").hidden = false;
      showPlay(st);
    } catch (e) {
      // this arena has no game to play
    }
  }

  // ------------------------------------------------------------------ start
  function start() {
    if (!token) {
      say("no token in this address: open the page with `paddlecraft live RUN_DIR open` " +
        "(it prints the address with #token=...)", true);
      return;
    }
    for (const b of document.querySelectorAll("button[data-command]")) {
      b.addEventListener("click", () => command(b.dataset.command));
    }
    $("set-form").addEventListener("submit", (e) => {
      e.preventDefault();
      command("set", { [$("set-key").value.trim()]: parseValue($("set-value").value.trim()) });
    });
    $("new-first").addEventListener("click", () => playCall("/new", { human_first: true }));
    $("new-second").addEventListener("click", () => playCall("/new", { human_first: false }));
    pollStatus();
    readEvents();
    setupPlay();
    pollView();
    setInterval(pollStatus, 1000);
    setInterval(() => {
      if (["running", "paused", "stopping"].includes(state)) pollView();
    }, 3000);
  }

  start();
})();
