// Fleet: the members (state, errors, remove), joining one, and this host's own identity and
// the fleet tokens it issued. Every call goes to /api/v1/fleet/* with the login session.
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

  function gpus(m) {
    if (!m.gpus || m.gpus.length === 0) return "none";
    return m.gpus.map((g) => g.name + (g.id === m.gpu_active ? " (busy)" : "")).join(", ");
  }

  function displays(m) {
    const d = m.displays;
    if (!d) return "";
    return `${d.total} (${d.active} active, ${d.lingering} lingering, ${d.pinned} pinned)`;
  }

  async function load() {
    let data;
    try {
      data = await Console.api("GET", "/api/v1/fleet/members");
    } catch (err) {
      Console.flash("Could not load members: " + err.message, true);
      return;
    }
    members.replaceChildren();
    document.getElementById("no-members").hidden = data.length > 0;
    for (const m of data) {
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
          Console.el("td", {}, state(m)),
          Console.el("td", {}, m.version || ""),
          Console.el("td", {}, m.live_sessions ?? ""),
          Console.el("td", {}, gpus(m)),
          Console.el("td", {}, displays(m)),
          Console.el("td", {}, m.refreshed_at ? new Date(m.refreshed_at).toLocaleTimeString() : ""),
          Console.el("td", {}, remove),
        ),
      );
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
