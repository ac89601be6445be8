// Paired clients: list, enable/disable, unpair one, unpair all.
"use strict";

(() => {
  const body = document.querySelector("#clients tbody");

  async function load() {
    let data;
    try {
      data = await Console.api("GET", "/api/clients/list");
    } catch (err) {
      Console.flash("Could not load clients: " + err.message, true);
      return;
    }
    body.replaceChildren();
    const certs = data.named_certs || [];
    document.getElementById("no-clients").hidden = certs.length > 0;
    for (const c of certs) {
      const toggle = Console.el(
        "button",
        { type: "button", onclick: () => act("/api/clients/update", { uuid: c.uuid, enabled: !c.enabled }, c.enabled ? "Disabled" : "Enabled") },
        c.enabled ? "Disable" : "Enable",
      );
      const unpair = Console.el(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: () => confirm(`Unpair ${c.name || c.uuid}?`) && act("/api/clients/unpair", { uuid: c.uuid }, "Unpaired"),
        },
        "Unpair",
      );
      body.append(
        Console.el(
          "tr",
          { dataset: { uuid: c.uuid } },
          Console.el("td", {}, c.name || "(unnamed)"),
          Console.el("td", {}, Console.el("code", {}, (c.cert || "").slice(0, 16) + (c.cert ? "…" : ""))),
          Console.el("td", {}, Console.el("span", { class: `state state-${c.enabled ? "enabled" : "disabled"}` }, c.enabled ? "enabled" : "disabled")),
          Console.el("td", {}, toggle, " ", unpair),
        ),
      );
    }
  }

  async function act(url, payload, done) {
    try {
      await Console.api("POST", url, payload);
      Console.flash(done + ".");
    } catch (err) {
      Console.flash(err.message, true);
    }
    load();
  }

  document.getElementById("unpair-all").addEventListener("click", () => {
    if (confirm("Unpair every client? Running sessions end.")) act("/api/clients/unpair-all", undefined, "All clients unpaired");
  });
  document.addEventListener("native:paired", load);  // native.js approved a browser
  load();
})();
