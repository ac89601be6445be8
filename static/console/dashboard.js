// Dashboard: runtime status and load every 5 s, and the live event feed over SSE.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const yesNo = (v) => (v ? "yes" : "no");

  function renderStatus(data) {
    const s = data.status;
    const fields = {
      streaming: s.video_streaming ? (s.stream ? `${s.stream.width}x${s.stream.height}@${s.stream.fps}` : "yes") : "no",
      active_sessions: s.active_sessions,
      paired_clients: s.paired_clients + (s.native_paired_clients ? ` (+${s.native_paired_clients} native)` : ""),
      pin_pending: yesNo(s.pin_pending),
      kept_displays: s.kept_displays,
      games: s.games.length ? s.games.map((g) => `${g.title} (${g.state})`).join(", ") : "none",
    };
    for (const [key, value] of Object.entries(fields)) {
      const dd = document.querySelector(`#status [data-field="${key}"]`);
      if (dd) dd.textContent = value;
    }
    renderSessions(s.sessions || []);
    $("uptime").textContent = data.health.uptime + " s";
    const t = data.telemetry;
    const ramTotal = Math.max(...t.host_ram_used_mb, 1) * 1.25;
    Console.chart($("telemetry"), [
      { values: t.host_cpu_pct, color: "#2f80ed", max: 100 },
      { values: t.host_gpu_pct, color: "#27ae60", max: 100 },
      { values: t.host_ram_used_mb, color: "#e67e22", max: ramTotal },
    ]);
    const last = (a) => (a.length ? a[a.length - 1] : null);
    const parts = [];
    if (last(t.host_cpu_pct) !== null) parts.push(`CPU ${last(t.host_cpu_pct)}%`);
    if (last(t.host_gpu_pct) !== null) parts.push(`GPU ${last(t.host_gpu_pct)}%`);
    if (last(t.host_ram_used_mb) !== null) parts.push(`RAM ${Math.round(last(t.host_ram_used_mb))} MB`);
    $("telemetry-now").textContent = parts.length ? "now: " + parts.join(" · ") : "no samples yet";
  }

  // One row per live session, both planes; End asks the host to end that one session.
  function renderSessions(sessions) {
    const body = document.querySelector("#live-sessions tbody");
    body.replaceChildren(
      ...sessions.map((x) => {
        const end = Console.el("button", { type: "button", class: "danger", dataset: { id: x.id } }, "End");
        end.addEventListener("click", () => endSession(x, end));
        const since = x.t_start ? new Date(x.t_start * 1000).toLocaleTimeString() : "";
        const kbps = x.stream && x.stream.bitrate_kbps ? `${(x.stream.bitrate_kbps / 1000).toFixed(1)} Mb/s` : "–";
        return Console.el(
          "tr",
          { dataset: { session: x.id } },
          Console.el("td", {}, x.client || "(unnamed)"),
          Console.el("td", {}, x.app_title || x.app),
          Console.el("td", {}, x.plane),
          Console.el("td", {}, x.mode),
          Console.el("td", {}, Console.el("span", { class: `state state-${x.state}` }, x.state)),
          Console.el("td", {}, kbps),
          Console.el("td", {}, since),
          Console.el("td", {}, end),
        );
      }),
    );
    $("live-sessions").hidden = !sessions.length;
    $("no-sessions").hidden = sessions.length > 0;
    // pictures.js adds each row's thumbnail and sparklines.
    document.dispatchEvent(new CustomEvent("console:sessions", { detail: sessions }));
  }

  async function endSession(x, button) {
    if (!window.confirm(`End ${x.client || "this client"}'s session (${x.app_title || x.app})?`)) return;
    button.disabled = true;
    try {
      await Console.api("DELETE", `/api/v1/session?id=${encodeURIComponent(x.id)}`);
      Console.flash(`Session of ${x.client || "the client"} ended.`);
    } catch (err) {
      Console.flash("Could not end the session: " + err.message, true);
    }
    refresh();
  }

  async function refresh() {
    try {
      renderStatus(await Console.api("GET", "/console/status"));
    } catch (err) {
      Console.flash("Status unavailable: " + err.message, true);
    }
  }

  function summary(event) {
    const skip = new Set(["seq", "ts_ms", "schema", "kind"]);
    const parts = [];
    for (const [key, value] of Object.entries(event)) {
      if (skip.has(key)) continue;
      parts.push(`${key}: ${typeof value === "object" ? JSON.stringify(value) : value}`);
    }
    return parts.join(" · ");
  }

  function addEvent(kind, data) {
    let event = {};
    try {
      event = JSON.parse(data);
    } catch (_) {
      event = { raw: data };
    }
    const when = event.ts_ms ? new Date(event.ts_ms).toLocaleTimeString() : "";
    const item = Console.el(
      "li",
      { class: "event", dataset: { kind, seq: event.seq ?? "" } },
      Console.el("time", {}, when),
      " ",
      Console.el("strong", {}, kind),
      " ",
      Console.el("span", {}, summary(event)),
    );
    const list = $("events");
    list.prepend(item);
    while (list.children.length > 200) list.lastElementChild.remove();
    $("no-events").hidden = true;
  }

  function connect() {
    const kinds = JSON.parse($("event-kinds").textContent);
    const source = new EventSource("/console/events");
    source.onopen = () => ($("event-state").textContent = "live");
    source.onerror = () => ($("event-state").textContent = "reconnecting…");
    for (const kind of kinds) source.addEventListener(kind, (e) => addEvent(kind, e.data));
    source.addEventListener("dropped", () => {
      addEvent("dropped", '{"note":"missed events; status refreshed"}');
      refresh();
    });
  }

  // Apply the announced release: refused while a session is live unless the operator forces it.
  async function applyUpdate(button) {
    if (!window.confirm(`Apply ${button.dataset.version}? The host restarts; a failed start rolls back.`)) return;
    button.disabled = true;
    try {
      await Console.api("POST", "/api/v1/update/apply", { force: false });
    } catch (error) {
      if (!(error.status === 409 && error.message.includes("session(s) live")
            && window.confirm(`${error.message}\n\nApply anyway and end them?`))) {
        window.alert(error.message);
        button.disabled = false;
        return;
      }
      try {
        await Console.api("POST", "/api/v1/update/apply", { force: true });
      } catch (again) {
        window.alert(again.message);
        button.disabled = false;
        return;
      }
    }
    button.textContent = "Applying… (the host restarts; reload in a minute)";
  }

  const applyButton = $("update-apply");
  if (applyButton) applyButton.addEventListener("click", () => applyUpdate(applyButton));

  refresh();
  setInterval(refresh, 5000);
  connect();
})();
