// Session history with a per-session bitrate / latency chart.
"use strict";

(() => {
  const body = document.querySelector("#sessions tbody");
  const form = document.getElementById("session-filter");
  const fmtTime = (unix) => (unix ? new Date(unix * 1000).toLocaleString() : "");
  const fmtLen = (r) => (r.t_end ? Math.round((r.t_end - r.t_start) / 60) + " min" : "open");

  async function load() {
    const query = new URLSearchParams({ limit: "100" });
    for (const name of ["app", "client"]) {
      const value = form.elements[name].value.trim();
      if (value) query.set(name, value);
    }
    let data;
    try {
      data = await Console.api("GET", "/api/sessions?" + query);
    } catch (err) {
      Console.flash("Could not load sessions: " + err.message, true);
      return;
    }
    body.replaceChildren();
    document.getElementById("no-sessions").hidden = data.sessions.length > 0;
    for (const r of data.sessions) {
      const row = Console.el(
        "tr",
        { class: "clickable", tabindex: "0", dataset: { id: r.id } },
        Console.el("td", {}, fmtTime(r.t_start)),
        Console.el("td", {}, fmtLen(r)),
        Console.el("td", {}, r.app_name),
        Console.el("td", {}, r.client_name),
        Console.el("td", {}, r.width ? `${r.width}x${r.height}@${r.fps} ${r.codec}` : r.codec),
        Console.el("td", {}, Math.round(r.avg_bitrate_kbps) + " kbps"),
        Console.el("td", {}, r.avg_rtt_ms.toFixed(1) + " ms"),
        Console.el("td", {}, r.avg_encode_ms.toFixed(1) + " ms"),
        Console.el("td", {}, r.dropped_frames),
        Console.el("td", {}, r.error),
      );
      row.addEventListener("click", () => show(r.id));
      row.addEventListener("keydown", (e) => e.key === "Enter" && show(r.id));
      body.append(row);
    }
  }

  async function show(id) {
    let data;
    try {
      data = await Console.api("GET", `/api/sessions/${id}`);
    } catch (err) {
      Console.flash(err.message, true);
      return;
    }
    const s = data.session;
    const samples = Array.isArray(s.samples) ? s.samples : [];
    document.getElementById("session-chart").hidden = false;
    document.getElementById("chart-title").textContent = `${s.app_name} on ${s.client_name}, ${fmtTime(s.t_start)}`;
    document.getElementById("chart-empty").hidden = samples.length > 0;
    const pick = (key) => samples.map((p) => Number(p[key]) || 0);
    Console.chart(document.getElementById("chart"), [
      { values: pick("bitrate_kbps"), color: "#2f80ed" },
      { values: pick("rtt_ms"), color: "#27ae60" },
      { values: pick("encode_ms"), color: "#e67e22" },
    ]);
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    load();
  });
  load();
})();
