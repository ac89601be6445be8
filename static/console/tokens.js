// Scoped tokens: list, mint (plaintext shown once), revoke.
"use strict";

(() => {
  const body = document.querySelector("#tokens tbody");

  async function load() {
    let data;
    try {
      data = await Console.api("GET", "/api/tokens");
    } catch (err) {
      Console.flash("Could not load tokens: " + err.message, true);
      return;
    }
    body.replaceChildren();
    document.getElementById("no-tokens").hidden = data.tokens.length > 0;
    for (const t of data.tokens) {
      const revoke = Console.el(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: async () => {
            if (!confirm(`Revoke ${t.name}?`)) return;
            try {
              await Console.api("DELETE", `/api/tokens/${encodeURIComponent(t.name)}`);
              Console.flash(`Revoked ${t.name}.`);
            } catch (err) {
              Console.flash(err.message, true);
            }
            load();
          },
        },
        "Revoke",
      );
      body.append(
        Console.el(
          "tr",
          { dataset: { name: t.name } },
          Console.el("td", {}, t.name),
          Console.el("td", {}, t.scopes.join(", ")),
          Console.el("td", {}, revoke),
        ),
      );
    }
  }

  document.getElementById("mint").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = e.target;
    const scopes = [...form.querySelectorAll("input[name=scopes]:checked")].map((i) => i.value);
    const name = form.elements.name.value.trim();
    try {
      const data = await Console.api("POST", "/api/tokens", { name, scopes });
      document.getElementById("minted-name").textContent = data.name;
      document.getElementById("minted-token").textContent = data.token;
      document.getElementById("minted").hidden = false;
      Console.flash(`Minted ${data.name}.`);
      form.reset();
    } catch (err) {
      Console.flash(err.message, true);
    }
    load();
  });
  load();
})();
