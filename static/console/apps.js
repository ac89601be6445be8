// App catalog: read-only list with delete.
"use strict";

(() => {
  const body = document.querySelector("#apps tbody");

  async function load() {
    let data;
    try {
      data = await Console.api("GET", "/api/apps");
    } catch (err) {
      Console.flash("Could not load apps: " + err.message, true);
      return;
    }
    const apps = data.apps || [];
    body.replaceChildren();
    document.getElementById("no-apps").hidden = apps.length > 0;
    apps.forEach((app, index) => {
      const remove = Console.el(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: async () => {
            if (!confirm(`Delete ${app.name}?`)) return;
            try {
              await Console.api("DELETE", `/api/apps/${index}`);
              Console.flash(`Deleted ${app.name}.`);
            } catch (err) {
              Console.flash(err.message, true);
            }
            load();
          },
        },
        "Delete",
      );
      body.append(
        Console.el(
          "tr",
          {},
          Console.el("td", {}, index),
          Console.el("td", {}, app.name || ""),
          Console.el("td", {}, Console.el("code", {}, app.cmd || "")),
          Console.el("td", {}, (app["prep-cmd"] || []).length),
          Console.el("td", {}, remove),
        ),
      );
    });
  }
  load();
})();
