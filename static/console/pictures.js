// Pictures of the live sessions: a thumbnail of each session's screen
// (GET /api/v1/streams/{id}/thumbnail, refreshed every few seconds while it is on screen) and,
// on the dashboard, sparklines of fps, bitrate and latency over the last minute (the figures
// the Now streaming page charts: GET /api/v1/streams). The pages announce what they drew
// ("console:sessions" on the dashboard, "console:streams" on Now streaming); this file adds
// its pictures to those rows and cards and keeps them across the pages' redraws.
"use strict";

const Pictures = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const THUMB_EVERY_MS = 3000;
  const FIGURES_EVERY_MS = 2000;
  const thumbs = new Map(); // session id -> {node, img, note, timer, seen}

  const fixed = (v, digits) => Number(v).toFixed(digits);

  // A line of `values` (oldest first, null for a second without the figure) in a small SVG,
  // scaled from 0 to the minute's peak, with the numbers in its accessible name.
  function sparkline(values, { label, unit, digits = 0, scale = 1 }) {
    const W = 96, H = 24;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "sparkline");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("width", String(W));
    svg.setAttribute("height", String(H));
    svg.setAttribute("role", "img");
    const nums = values.filter((v) => typeof v === "number").map((v) => v / scale);
    let text;
    if (!nums.length) {
      text = `${label} last minute: no figures yet`;
    } else {
      const lo = Math.min(...nums), hi = Math.max(...nums), now = nums[nums.length - 1];
      text = `${label} last minute: ${fixed(lo, digits)}–${fixed(hi, digits)} ${unit}, ` +
        `now ${fixed(now, digits)} ${unit}`;
      const top = Math.max(hi, 1e-9);
      const step = nums.length > 1 ? (W - 2) / (nums.length - 1) : 0;
      const points = nums.map((v, i) =>
        `${(1 + i * step).toFixed(1)},${(H - 1 - (v / top) * (H - 2)).toFixed(1)}`);
      if (points.length === 1) points.push(`${W - 1},${points[0].split(",")[1]}`);
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("points", points.join(" "));
      line.setAttribute("class", "spark-line");
      svg.append(line);
    }
    svg.setAttribute("aria-label", text);
    const title = document.createElementNS(SVG, "title");
    title.textContent = text;
    svg.prepend(title);
    return svg;
  }

  const URL_OF = (id) => `/api/v1/streams/${encodeURIComponent(id)}/thumbnail`;

  // Why no picture came: the route's JSON reason (a 409 or 404), else the status.
  async function reason(id) {
    try {
      const r = await fetch(URL_OF(id), { credentials: "same-origin", headers: { Accept: "application/json" } });
      const type = r.headers.get("Content-Type") || "";
      if (type.includes("json")) return (await r.json()).error || `${r.status}`;
      return r.ok ? "" : `${r.status} ${r.statusText}`;
    } catch (err) {
      return err.message;
    }
  }

  // The thumbnail of one session: one node per session, reused when a page redraws its row.
  function thumbnail(id, alt) {
    let entry = thumbs.get(id);
    if (entry) {
      entry.img.alt = alt;
      return entry.node;
    }
    const img = Console.el("img", { class: "live-thumb", alt, decoding: "async" });
    const note = Console.el("span", { class: "live-thumb-none", role: "note" }, "No picture yet");
    const node = Console.el("div", { class: "live-thumb-frame", dataset: { session: id } }, img, note);
    img.hidden = true;
    entry = { node, img, note, visible: true, timer: null };
    img.addEventListener("load", () => {
      img.hidden = false;
      note.hidden = true;
    });
    img.addEventListener("error", async () => {
      img.hidden = true;
      note.hidden = false;
      const why = await reason(id);
      note.textContent = why ? `No picture: ${why}` : "No picture";
    });
    if ("IntersectionObserver" in window) {
      // Only while on screen: a card scrolled away (or a row moved between redraws, seen
      // detached) is not refreshed.
      new IntersectionObserver((seen) => {
        if (!node.isConnected) return;
        entry.visible = seen.some((e) => e.isIntersecting);
        if (entry.visible && !entry.img.getAttribute("src")) load(entry, id);
      }).observe(node);
    }
    entry.timer = setInterval(() => load(entry, id), THUMB_EVERY_MS);
    thumbs.set(id, entry);
    // The first picture once the page has put the node in place.
    requestAnimationFrame(() => load(entry, id));
    return node;
  }

  function load(entry, id) {
    if (document.hidden || !entry.visible || !entry.node.isConnected) return;
    entry.img.src = `${URL_OF(id)}?t=${Date.now()}`;
  }

  // Thumbnails of sessions no longer live stop refreshing and are dropped.
  function forget(liveIds) {
    for (const [id, entry] of thumbs) {
      if (liveIds.has(id)) continue;
      clearInterval(entry.timer);
      entry.node.remove();
      thumbs.delete(id);
    }
  }

  // -- the dashboard's Live sessions table --------------------------------------------------
  const figures = new Map(); // session id -> its /api/v1/streams entry
  const sparks = new Map(); // session id -> the node holding its three sparklines

  function drawSparks(id) {
    const s = figures.get(id);
    let node = sparks.get(id);
    if (!node) {
      node = Console.el("div", { class: "sparklines", dataset: { session: id } });
      sparks.set(id, node);
    }
    const points = (s && s.live) || [];
    const pick = (key) => points.map((p) => p[key]);
    // The name and the newest figure are for the eye; the SVG's label says both and more.
    const row = (key, name, options) => {
      const values = pick(key);
      const last = values.filter((v) => typeof v === "number").pop();
      const now = last === undefined ? "—" : fixed(last / (options.scale || 1), options.digits);
      return Console.el("span", { class: "spark", dataset: { figure: key } },
        Console.el("span", { class: "spark-name", "aria-hidden": "true" }, name),
        sparkline(values, options),
        Console.el("span", { class: "spark-now", "aria-hidden": "true" }, now));
    };
    node.replaceChildren(
      row("fps", "fps", { label: "fps", unit: "fps", digits: 0 }),
      row("bitrate_kbps", "Mb/s", { label: "bitrate", unit: "Mb/s", digits: 1, scale: 1000 }),
      row("rtt_ms", "ms", { label: "latency (network round trip)", unit: "ms", digits: 1 }),
    );
    return node;
  }

  function decorateRows(sessions) {
    const ids = new Set(sessions.map((x) => x.id));
    for (const x of sessions) {
      const tr = document.querySelector(`#live-sessions tr[data-session="${CSS.escape(x.id)}"]`);
      if (!tr || tr.querySelector("td.pictures")) continue;
      const alt = `Screen of ${x.app_title || x.app || "the session"} on ${x.client || "an unnamed client"}`;
      const cell = Console.el("td", { class: "pictures" },
        Console.el("div", { class: "pictures-cell" }, thumbnail(x.id, alt), drawSparks(x.id)));
      tr.insertBefore(cell, tr.lastElementChild); // before the End button's cell
    }
    for (const id of sparks.keys()) if (!ids.has(id)) sparks.delete(id);
    forget(ids);
  }

  async function pollFigures() {
    if (document.hidden || document.getElementById("live-sessions").hidden) return;
    let data;
    try {
      data = await Console.api("GET", "/api/v1/streams");
    } catch (_) {
      return; // the row keeps its last lines; the page's own status says what is wrong
    }
    figures.clear();
    for (const s of data.sessions) figures.set(s.id, s);
    for (const id of sparks.keys()) drawSparks(id);
  }

  // -- Now streaming's cards ----------------------------------------------------------------
  function decorateCards(sessions) {
    const ids = new Set(sessions.map((s) => s.id));
    for (const s of sessions) {
      const card = document.querySelector(`article.stream[data-id="${CSS.escape(s.id)}"]`);
      if (!card || card.querySelector(".live-thumb-frame")) continue;
      const alt = `Screen of ${s.app_title || "Desktop"} on ${s.client || "an unnamed client"}`;
      card.querySelector("h2").after(thumbnail(s.id, alt));
    }
    forget(ids);
  }

  if (document.getElementById("live-sessions")) {
    document.addEventListener("console:sessions", (e) => decorateRows(e.detail));
    pollFigures();
    setInterval(pollFigures, FIGURES_EVERY_MS);
  }
  if (document.getElementById("streams")) {
    document.addEventListener("console:streams", (e) => decorateCards(e.detail));
  }

  return { sparkline, thumbnail };
})();
