// Fleet: the members (state, relay, capacity, live sessions with End, remove), joining one, and
// this host's own identity and the fleet tokens it issued. Every call goes to /api/v1/fleet/*
// with the login session (writes carry the CSRF token, Console.api).
"use strict";

(() => {
  const members = document.querySelector("#members tbody");
  const issued = document.querySelector("#fleet-tokens tbody");

  function state(m) {
    if (!m.refreshed_at) return Console.el("span", { class: "badge warn" }, "not asked yet");
    if (m.reachable) return Console.el("span", { class: "badge ok" }, "reachable");
    return Console.el(
      "span",
      {},
      Console.el("span", { class: "badge bad" }, "unreachable"),
      " ",
      Console.el("span", { class: "error" }, m.error),
    );
  }

  function name(m) {
    const shown = Console.el("span", {}, m.name || "?");
    if (!m.previous_name) return shown;
    return Console.el(
      "span",
      {},
      shown,
      " ",
      Console.el("span", { class: "badge warn", title: "the member reports a new name" }, `was ${m.previous_name}`),
    );
  }

  const RELAY = {
    connected: ["ok", "events: connected"],
    backing_off: ["warn", "events: retrying"],
    stopped: ["bad", "events: stopped"],
  };

  function relay(m) {
    if (!m.relay) return Console.el("span", { class: "badge warn" }, "events: not started");
    const [tone, text] = RELAY[m.relay.state];
    const badge = Console.el("span", { class: `badge ${tone}`, title: m.relay.error || "" }, text);
    if (!m.relay.error || m.relay.state === "connected") return badge;
    return Console.el("span", {}, badge, " ", Console.el("span", { class: "error" }, m.relay.error));
  }

  // Live sessions and free slots, then what a session there encodes on and the titles it has.
  function capacity(m) {
    if (m.live_sessions === null || m.live_sessions === undefined) return "";
    const load = m.free_slots === null ? `${m.live_sessions} live` : `${m.live_sessions} live, ${m.free_slots} of ${m.max_sessions} free`;
    const count = (m.titles || []).length;
    const what = [m.encoder, count ? `${count} title${count === 1 ? "" : "s"}` : null].filter(Boolean).join(", ");
    return Console.el("span", { class: "member-state" }, load, what ? Console.el("span", { class: "muted" }, what) : null);
  }

  // The member's live sessions (asked of the member through this host), each with End.
  async function sessionRow(m, columns) {
    const cell = Console.el("td", { colspan: columns });
    const row = Console.el("tr", { class: "member-sessions", dataset: { member: m.id } }, cell);
    let list;
    try {
      list = await Console.api("GET", `/api/v1/fleet/members/${m.id}/sessions`);
    } catch (err) {
      cell.append(Console.el("span", { class: "error" }, `Sessions: ${err.message}`));
      return row;
    }
    if (list.length === 0) return null;
    const body = Console.el("tbody", {});
    for (const x of list) {
      const end = Console.el("button", { type: "button", class: "danger", dataset: { session: x.id } }, "End");
      end.addEventListener("click", async () => {
        if (!confirm(`End ${x.client || "this client"}'s session (${x.app_title || x.plane}) on ${m.name || m.url}?`)) return;
        end.disabled = true;
        try {
          await Console.api("DELETE", `/api/v1/fleet/members/${m.id}/sessions/${x.id}`);
          Console.flash(`Ended the session on ${m.name || m.url}.`);
        } catch (err) {
          Console.flash(err.message, true);
        }
        load();
      });
      body.append(
        Console.el(
          "tr",
          { dataset: { session: x.id } },
          Console.el("td", {}, x.client || "(unnamed)"),
          Console.el("td", {}, x.app_title),
          Console.el("td", {}, x.plane),
          Console.el("td", {}, x.mode),
          Console.el("td", {}, Console.el("span", { class: `state state-${x.state}` }, x.state)),
          Console.el("td", {}, end),
        ),
      );
    }
    const head = Console.el(
      "thead",
      {},
      Console.el("tr", {}, ...["Client", "App", "Plane", "Mode", "State", ""].map((h) => Console.el("th", {}, h))),
    );
    cell.append(
      Console.el("p", { class: "member-sessions-title" }, `Live sessions on ${m.name || m.url}`),
      Console.el("table", { class: "grid" }, head, body),
    );
    return row;
  }

  function gpus(m) {
    if (!m.gpus || m.gpus.length === 0) return "none";
    return m.gpus.map((g) => g.name + (g.id === m.gpu_active ? " (busy)" : "")).join(", ");
  }

  function displays(m) {
    const d = m.displays;
    if (!d) return "";
    const parts = ["active", "lingering", "pinned"].filter((k) => d[k] > 0).map((k) => `${d[k]} ${k}`);
    return parts.length ? `${d.total} (${parts.join(", ")})` : String(d.total);
  }

  async function load() {
    let data;
    try {
      data = await Console.api("GET", "/api/v1/fleet/members");
    } catch (err) {
      Console.flash("Could not load members: " + err.message, true);
      return;
    }
    const columns = document.querySelectorAll("#members thead th").length;
    // Ask every member with live sessions at once; the rows are put in place together.
    const subRows = await Promise.all(
      data.map((m) => (m.reachable && m.live_sessions > 0 ? sessionRow(m, columns) : null)),
    );
    members.replaceChildren();
    document.getElementById("no-members").hidden = data.length > 0;
    for (const [i, m] of data.entries()) {
      const remove = Console.el(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: async () => {
            if (!confirm(`Remove ${m.name || m.url} from the fleet? Its token is forgotten here.`)) return;
            try {
              await Console.api("DELETE", `/api/v1/fleet/members/${m.id}`);
              Console.flash(`Removed ${m.name || m.url}.`);
            } catch (err) {
              Console.flash(err.message, true);
            }
            load();
          },
        },
        "Remove",
      );
      members.append(
        Console.el(
          "tr",
          { dataset: { id: m.id } },
          Console.el("td", {}, name(m)),
          Console.el("td", {}, Console.el("code", { title: `SHA-256 ${m.fingerprint}` }, m.url)),
          Console.el("td", {}, Console.el("span", { class: "member-state" }, state(m), relay(m))),
          Console.el("td", {}, m.version || ""),
          Console.el("td", {}, capacity(m)),
          Console.el("td", {}, gpus(m)),
          Console.el("td", {}, displays(m)),
          Console.el("td", {}, m.refreshed_at ? new Date(m.refreshed_at).toLocaleTimeString() : ""),
          Console.el("td", {}, remove),
        ),
      );
      if (subRows[i]) members.append(subRows[i]);
    }
  }

  async function loadTokens() {
    let data;
    try {
      data = await Console.api("GET", "/api/v1/fleet/tokens");
    } catch (err) {
      Console.flash("Could not load fleet tokens: " + err.message, true);
      return;
    }
    issued.replaceChildren();
    document.getElementById("no-fleet-tokens").hidden = data.length > 0;
    for (const t of data) {
      const revoke = Console.el(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: async () => {
            if (!confirm(`Revoke ${t.name}? That fleet host loses this one at once.`)) return;
            try {
              await Console.api("DELETE", `/api/v1/fleet/tokens/${encodeURIComponent(t.name)}`);
              Console.flash(`Revoked ${t.name}.`);
            } catch (err) {
              Console.flash(err.message, true);
            }
            loadTokens();
          },
        },
        "Revoke",
      );
      issued.append(
        Console.el(
          "tr",
          {},
          Console.el("td", {}, t.name),
          Console.el("td", {}, new Date(t.created).toLocaleString()),
          Console.el("td", {}, revoke),
        ),
      );
    }
  }

  document.getElementById("join").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = e.target;
    const box = document.getElementById("join-error");
    const body = {
      url: form.elements.url.value.trim(),
      token: form.elements.token.value.trim(),
      fingerprint: form.elements.fingerprint.value.trim(),
    };
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const m = await Console.api("POST", "/api/v1/fleet/members", body);
      box.hidden = true;
      form.reset();
      Console.flash(`Added ${m.name || m.url}.`);
    } catch (err) {
      const fields = err.fields.map((f) => `${f.field}: ${f.message}`).join("; ");
      box.textContent = fields ? `${err.message} (${fields})` : err.message;
      box.hidden = false;
    } finally {
      button.disabled = false;
    }
    load();
  });

  document.getElementById("mint-fleet").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = e.target;
    try {
      const data = await Console.api("POST", "/api/v1/fleet/tokens", { name: form.elements.name.value.trim() });
      document.getElementById("minted-name").textContent = data.name;
      document.getElementById("minted-token").textContent = data.token;
      document.getElementById("minted").hidden = false;
      form.reset();
    } catch (err) {
      Console.flash(err.message, true);
    }
    loadTokens();
  });

  load();
  loadTokens();
  setInterval(load, 10000);
})();
