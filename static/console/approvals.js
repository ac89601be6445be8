// On every console page: a browser waiting for native pairing approval shows up here, with
// Approve and Deny (the /clients and /pair pages list them in full, so they skip this).
"use strict";

(() => {
  if (document.getElementById("native-pending")) return;
  const main = document.querySelector("main");
  if (!main) return;
  const box = Console.el("section", { class: "approval", id: "native-approval", role: "region",
    "aria-label": "Pairing approval", "aria-live": "polite", hidden: "" });
  main.prepend(box);
  let shown = "";

  async function decide(p, verb) {
    try {
      await Console.api("POST", `/api/v1/native/pending/${p.id}/${verb}`, {});
      Console.flash(`${verb === "approve" ? "Approved" : "Denied"} ${p.name}.`);
    } catch (err) {
      Console.flash(err.message, true);
    }
    shown = "";
    poll();
  }

  async function poll() {
    let list;
    try {
      list = await Console.api("GET", "/api/v1/native/pending");
    } catch (err) {
      return; // the page reports an unreachable host itself
    }
    const key = JSON.stringify(list.map((p) => p.id));
    if (key === shown) return;
    shown = key;
    box.hidden = list.length === 0;
    const items = list.map((p) => Console.el("li", { dataset: { id: p.id } },
      Console.el("strong", {}, p.name || "unnamed browser"),
      Console.el("code", {}, p.fingerprint.slice(0, 16) + "…"),
      Console.el("button", { type: "button", class: "approve", onclick: () => decide(p, "approve") }, "Approve"),
      Console.el("button", { type: "button", class: "danger deny", onclick: () => decide(p, "deny") }, "Deny")));
    box.replaceChildren(
      Console.el("strong", {}, list.length === 1 ? "A browser asks to pair with this host." : `${list.length} browsers ask to pair with this host.`),
      " Approve only a device you are pairing now.",
      Console.el("ul", {}, ...items));
  }

  poll();
  setInterval(poll, 3000);
})();
