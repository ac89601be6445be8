// Now streaming: one card per live session (GET /api/v1/streams, every second) with its
// measured fps, bitrate against target (and loss), capture, encode and RTT over the last
// minute, drawn on canvases; a stop button per session (DELETE /api/v1/streams/{id}).
"use strict";

(() => {
  const root = document.getElementById("streams");
  const none = document.getElementById("no-streams");
  const errorBox = document.getElementById("streams-error");
  const cards = new Map(); // session id -> {card, fields, charts}
  const COLORS = { fps: "#2f80ed", bitrate: "#2f80ed", target: "#8e44ad", capture: "#16a085",
    encode: "#e67e22", rtt: "#27ae60" };

  const fmt = (v, digits, unit) => (v === null || v === undefined ? "—" : `${Number(v).toFixed(digits)} ${unit}`);
  const mbps = (kbps) => (kbps === null || kbps === undefined ? "—" : `${(kbps / 1000).toFixed(1)} Mbps`);
  function since(unix) {
    if (!unix) return "";
    const s = Math.max(0, Math.round(Date.now() / 1000 - unix));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return h ? `${h} h ${m} min` : m ? `${m} min ${s % 60} s` : `${s} s`;
  }

  function figure(name, label) {
    const canvas = Console.el("canvas", { class: `chart-${name}`, width: "300", height: "70",
      role: "img", "aria-label": `${label} over the last minute` });
    const value = Console.el("span", { class: "value", dataset: { figure: name } }, "—");
    const scale = Console.el("span", { class: "scale" }, "");
    return { node: Console.el("div", { class: "figure" }, Console.el("div", { class: "label" }, label, scale), value, canvas),
      canvas, value, scale };
  }

  function makeCard(s) {
    const fields = {};
    const fact = (key, label) => {
      fields[key] = Console.el("dd", { dataset: { field: key } }, "");
      return [Console.el("dt", {}, label), fields[key]];
    };
    const stop = Console.el("button", { type: "button", class: "danger stop" }, "Stop");
    stop.addEventListener("click", () => stopSession(s, stop));
    const title = Console.el("span", { class: "title" }, "");
    const charts = {
      fps: figure("fps", "Frames per second"),
      bitrate: figure("bitrate", "Bitrate / target"),
      capture: figure("capture", "Capture"),
      encode: figure("encode", "Encode"),
      rtt: figure("rtt", "Network round trip"),
    };
    const card = Console.el("article", { class: "card stream", dataset: { id: s.id }, "aria-label": `session ${s.id}` },
      Console.el("h2", {}, title, stop),
      Console.el("dl", { class: "facts" },
        ...fact("client", "Client"), ...fact("app", "App"), ...fact("video", "Video"),
        ...fact("state", "State"), ...fact("since", "Streaming for"), ...fact("loss", "Packet loss")),
      Console.el("div", { class: "figures" }, ...Object.values(charts).map((c) => c.node)));
    root.append(card);
    return { card, fields, charts, title };
  }

  function draw(entry, s) {
    const pts = s.live || [];
    const pick = (k) => pts.map((p) => (p[k] === null || p[k] === undefined ? 0 : p[k]));
    const now = s.now || {};
    const c = entry.charts;
    for (const chart of Object.values(c)) {
      const want = Math.round(chart.canvas.clientWidth * (window.devicePixelRatio || 1));
      if (want > 0 && chart.canvas.width !== want) chart.canvas.width = want;
    }
    // Each chart's top is named beside its label: the lines alone carry no scale.
    const plot = (chart, series, top, text) => {
      Console.chart(chart.canvas, series.map((one) => ({ ...one, max: top })));
      chart.scale.textContent = ` · top ${text(top)}`;
    };
    const ms = (v) => `${v.toFixed(v < 10 ? 1 : 0)} ms`;
    const peak = (...lists) => Math.max(1, ...lists.flat());
    plot(c.fps, [{ values: pick("fps"), color: COLORS.fps }], peak([s.fps || 1], pick("fps")), (v) => `${Math.round(v)} fps`);
    plot(c.bitrate, [{ values: pick("target_kbps"), color: COLORS.target }, { values: pick("bitrate_kbps"), color: COLORS.bitrate }],
      peak(pick("bitrate_kbps"), pick("target_kbps")), mbps);
    plot(c.capture, [{ values: pick("capture_ms"), color: COLORS.capture }], peak(pick("capture_ms")), ms);
    plot(c.encode, [{ values: pick("encode_ms"), color: COLORS.encode }], peak(pick("encode_ms")), ms);
    plot(c.rtt, [{ values: pick("rtt_ms"), color: COLORS.rtt }], peak(pick("rtt_ms")), ms);
    c.fps.value.textContent = now.fps === undefined || now.fps === null ? "—" : `${now.fps.toFixed(1)} of ${s.fps}`;
    c.bitrate.value.replaceChildren(
      Console.el("span", { class: "sent" }, mbps(now.bitrate_kbps)), " / ",
      Console.el("span", { class: "target" }, mbps(now.target_kbps)));
    c.capture.value.textContent = fmt(now.capture_ms, 1, "ms");
    c.encode.value.textContent = fmt(now.encode_ms, 1, "ms");
    c.rtt.value.textContent = fmt(now.rtt_ms, 1, "ms");
  }

  function update(entry, s) {
    entry.title.textContent = `${s.app_title || "Desktop"} on ${s.client || "an unnamed client"}`;
    entry.fields.client.textContent = `${s.client || "unnamed"} (${s.plane === "native" ? "browser" : "Moonlight"}, ${s.client_id})`;
    entry.fields.app.textContent = s.app_title || s.app || "Desktop";
    entry.fields.video.textContent = `${s.mode} · ${s.codec.toUpperCase()} · ${s.encoder} encoder`;
    entry.fields.state.replaceChildren(Console.el("span", { class: `state state-${s.state}` }, s.state));
    entry.fields.since.textContent = since(s.t_start);
    const loss = s.now ? s.now.loss_pct : null;
    entry.fields.loss.textContent = loss === null || loss === undefined ? "not reported by this client" : `${loss.toFixed(2)} %`;
    draw(entry, s);
  }

  async function stopSession(s, button) {
    if (!window.confirm(`Stop ${s.app_title || "the session"} on ${s.client || "this client"}?`)) return;
    button.disabled = true;
    try {
      await Console.api("DELETE", `/api/v1/streams/${encodeURIComponent(s.id)}`);
      Console.flash(`Stopped ${s.app_title || "the session"} on ${s.client || "the client"}.`);
    } catch (err) {
      Console.flash("Could not stop the session: " + err.message, true);
      button.disabled = false;
    }
    load();
  }

  async function load() {
    let data;
    try {
      data = await Console.api("GET", "/api/v1/streams");
    } catch (err) {
      errorBox.textContent = "Could not load the live sessions: " + err.message + " (retrying every second)";
      errorBox.hidden = false;
      return;
    }
    errorBox.hidden = true;
    const seen = new Set();
    for (const s of data.sessions) {
      seen.add(s.id);
      if (!cards.has(s.id)) cards.set(s.id, makeCard(s));
      update(cards.get(s.id), s);
    }
    for (const [id, entry] of cards) {
      if (!seen.has(id)) { entry.card.remove(); cards.delete(id); }
    }
    none.hidden = data.sessions.length > 0;
    // pictures.js adds each card's thumbnail.
    document.dispatchEvent(new CustomEvent("console:streams", { detail: data.sessions }));
  }

  load();
  setInterval(load, 1000);
})();
