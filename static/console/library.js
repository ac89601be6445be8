// Library: installed titles with their art, filters, custom entries (add, edit, delete with
// detect and prep), store scanners with a per-store rescan progress.
"use strict";

(() => {
  const { api, el, flash } = Console;
  const form = document.getElementById("entry-form");
  const errorBox = document.getElementById("entry-error");
  const filters = document.getElementById("filters");
  const ART_ORDER = ["portrait", "header", "hero", "logo"];
  const STATE_TEXT = { never: "not scanned yet", queued: "queued…", scanning: "scanning…",
    done: "done", failed: "failed" };
  let entries = [];

  // -- stores and rescans -----------------------------------------------------------------
  function when(iso) {
    return iso ? new Date(iso).toLocaleString() : "never";
  }

  function renderScanners(list) {
    const body = document.querySelector("#scanners tbody");
    body.replaceChildren();
    for (const s of list) {
      const toggle = el("input", { type: "checkbox", "aria-label": `Scan ${s.label}` });
      toggle.checked = s.enabled;
      toggle.addEventListener("change", async () => {
        try {
          renderScanners(await api("PUT", `/api/v1/library/scanners/${s.id}`,
            { enabled: toggle.checked }));
          flash(`${s.label} ${toggle.checked ? "enabled" : "disabled"}.`);
          loadTitles();
        } catch (err) {
          flash(err.message, true);
        }
      });
      let progress = STATE_TEXT[s.state] || s.state;
      if (s.state === "failed" && s.error) progress += ": " + s.error;
      body.append(el("tr", { dataset: { store: s.id, state: s.state } },
        el("td", {}, s.label),
        el("td", {}, toggle),
        el("td", { class: `progress ${s.state}` }, progress),
        el("td", {}, s.enabled ? s.count : "–"),
        el("td", {}, when(s.scanned_at)),
      ));
    }
  }

  async function loadScanners() {
    const list = await api("GET", "/api/v1/library/scanners");
    renderScanners(list);
    return list;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  document.getElementById("rescan").addEventListener("click", async (event) => {
    const button = event.currentTarget;
    const state = document.getElementById("rescan-state");
    button.disabled = true;
    try {
      await api("POST", "/api/v1/library/scan");
      state.textContent = "Rescanning…";
      const deadline = Date.now() + 120000;
      let list = await loadScanners();
      while (list.some((s) => s.state === "queued" || s.state === "scanning")) {
        if (Date.now() > deadline) throw new Error("the rescan has not finished after 2 minutes");
        await sleep(700);
        list = await loadScanners();
      }
      const failed = list.filter((s) => s.state === "failed");
      state.textContent = failed.length
        ? `Rescan finished; ${failed.map((s) => s.label).join(", ")} failed.`
        : "Rescan finished.";
      await loadTitles();
    } catch (err) {
      state.textContent = "";
      flash("Rescan: " + err.message, true);
    } finally {
      button.disabled = false;
    }
  });

  // -- titles -----------------------------------------------------------------------------
  function artOf(entry) {
    const art = entry.art || {};
    const kind = ART_ORDER.find((k) => art[k]);
    if (!kind) return el("div", { class: "art placeholder", "aria-hidden": "true" },
      (entry.title || "?").slice(0, 1));
    const url = art[kind];
    if (url.startsWith("/")) {
      const img = el("img", { class: "art", src: url, alt: entry.title || "", loading: "lazy" });
      img.addEventListener("error", () => img.replaceWith(
        el("div", { class: "art placeholder", "aria-hidden": "true" }, entry.title.slice(0, 1))));
      return img;
    }
    // The console's CSP loads same-origin images only: outside art is a link.
    return el("a", { class: "art placeholder link", href: url, target: "_blank",
      rel: "noopener noreferrer" }, `${kind} art ↗`);
  }

  function card(entry) {
    const li = el("li", { class: "title-card", dataset: { id: entry.id, store: entry.store } },
      artOf(entry),
      el("strong", { class: "name" }, entry.title),
      el("span", { class: "meta" },
        el("span", { class: "badge store" }, entry.store),
        entry.platform ? " " + entry.platform : ""),
    );
    if (entry.store === "custom") {
      const bare = entry.id.slice("custom:".length);
      if (entry.provider) {
        li.append(el("span", { class: "muted" }, `managed by ${entry.provider}`));
      } else {
        li.append(el("span", { class: "actions-cell" },
          el("button", { type: "button", onclick: () => edit(bare),
            "aria-label": `Edit ${entry.title}` }, "Edit"),
          el("button", { type: "button", class: "danger", onclick: () => remove(bare, entry.title),
            "aria-label": `Delete ${entry.title}` }, "Delete")));
      }
    }
    return li;
  }

  function fillSelect(select, values) {
    const keep = select.value;
    select.replaceChildren(select.options[0]);
    for (const v of values) select.append(el("option", { value: v }, v));
    select.value = values.includes(keep) ? keep : "";
  }

  function renderTitles() {
    const q = filters.elements.q.value.trim().toLowerCase();
    const store = filters.elements.store.value;
    const platform = filters.elements.platform.value;
    const shown = entries.filter((e) =>
      (!q || e.title.toLowerCase().includes(q)) &&
      (!store || e.store === store) &&
      (!platform || (e.platform || "").toLowerCase() === platform));
    const list = document.getElementById("titles");
    list.replaceChildren(...shown.map(card));
    const none = document.getElementById("no-titles");
    none.hidden = shown.length > 0;
    none.textContent = entries.length
      ? "No title matches these filters."
      : "No titles yet: no store here has installed games, and there are no custom entries. " +
        "Add one below, or rescan after installing a game.";
    document.getElementById("shown").textContent = `${shown.length} of ${entries.length}`;
  }

  async function loadTitles() {
    try {
      entries = await api("GET", "/api/v1/library");
    } catch (err) {
      flash("Could not load the library: " + err.message, true);
      return;
    }
    fillSelect(filters.elements.store, [...new Set(entries.map((e) => e.store))].sort());
    fillSelect(filters.elements.platform,
      [...new Set(entries.map((e) => (e.platform || "").toLowerCase()).filter(Boolean))].sort());
    renderTitles();
  }

  filters.addEventListener("input", renderTitles);
  filters.addEventListener("submit", (event) => event.preventDefault());

  // -- custom entries ---------------------------------------------------------------------
  function input(path) {
    return form.querySelector(`[data-path="${path}"]`);
  }

  function addPrepRow(step = {}) {
    const rows = document.getElementById("prep-rows");
    const i = rows.children.length;
    const row = el("div", { class: "row" });
    row.append(
      el("input", { "data-path": `prep[${i}].do`, value: step.do || "",
        "aria-label": `Step ${i + 1}: do`, placeholder: "do", maxlength: "4096" }),
      el("input", { "data-path": `prep[${i}].undo`, value: step.undo || "",
        "aria-label": `Step ${i + 1}: undo`, placeholder: "undo (optional)", maxlength: "4096" }),
      el("button", { type: "button", class: "danger", "aria-label": `Remove step ${i + 1}`,
        onclick: () => { row.remove(); renumber(); } }, "Remove"),
    );
    rows.append(row);
    return row;
  }

  function renumber() {
    document.querySelectorAll("#prep-rows .row").forEach((row, i) => {
      const [d, u, b] = row.children;
      d.dataset.path = `prep[${i}].do`;
      d.setAttribute("aria-label", `Step ${i + 1}: do`);
      u.dataset.path = `prep[${i}].undo`;
      u.setAttribute("aria-label", `Step ${i + 1}: undo`);
      b.setAttribute("aria-label", `Remove step ${i + 1}`);
    });
  }

  document.getElementById("add-prep").addEventListener("click", () =>
    addPrepRow().querySelector("input").focus());

  function resetForm() {
    form.reset();
    Forms.clear(form, errorBox);
    form.elements.id.value = "";
    document.getElementById("prep-rows").replaceChildren();
    document.getElementById("entry-title").textContent = "Add a custom entry";
    document.getElementById("save-entry").textContent = "Add entry";
    document.getElementById("cancel-entry").hidden = true;
  }

  function collect() {
    const data = { title: input("title").value };
    for (const key of ["platform", "description", "developer", "publisher", "region"]) {
      if (input(key).value !== "") data[key] = input(key).value;
    }
    for (const key of ["release_year", "players"]) {
      if (input(key).value !== "") data[key] = input(key).value;
    }
    for (const key of ["genres", "tags"]) {
      const items = input(key).value.split(",").map((s) => s.trim()).filter(Boolean);
      if (items.length) data[key] = items;
    }
    const kind = input("launch.kind").value;
    if (kind) data.launch = { kind, value: input("launch.value").value };
    data.art = {};
    for (const k of ART_ORDER) if (input(`art.${k}`).value) data.art[k] = input(`art.${k}`).value;
    data.detect = {};
    for (const k of ["install_dir", "exe", "process_name"]) {
      if (input(`detect.${k}`).value) data.detect[k] = input(`detect.${k}`).value;
    }
    data.prep = [...document.querySelectorAll("#prep-rows .row")].map((row) => {
      const [d, u] = row.querySelectorAll("input");
      return u.value ? { do: d.value, undo: u.value } : { do: d.value };
    });
    return data;
  }

  async function edit(bare) {
    let entry;
    try {
      entry = await api("GET", `/api/v1/library/custom/${bare}`);
    } catch (err) {
      flash(err.message, true);
      return;
    }
    resetForm();
    form.elements.id.value = bare;
    input("title").value = entry.title;
    for (const key of ["platform", "description", "developer", "publisher", "region",
      "release_year", "players"]) input(key).value = entry[key] ?? "";
    for (const key of ["genres", "tags"]) input(key).value = (entry[key] || []).join(", ");
    input("launch.kind").value = entry.launch ? entry.launch.kind : "";
    input("launch.value").value = entry.launch ? entry.launch.value : "";
    for (const k of ART_ORDER) input(`art.${k}`).value = (entry.art || {})[k] || "";
    for (const k of ["install_dir", "exe", "process_name"]) {
      input(`detect.${k}`).value = (entry.detect || {})[k] || "";
    }
    for (const step of entry.prep || []) addPrepRow(step);
    document.getElementById("entry-title").textContent = `Edit ${entry.title}`;
    document.getElementById("save-entry").textContent = "Save changes";
    document.getElementById("cancel-entry").hidden = false;
    form.scrollIntoView();
    input("title").focus();
  }

  async function remove(bare, title) {
    if (!confirm(`Delete ${title}?`)) return;
    try {
      await api("DELETE", `/api/v1/library/custom/${bare}`);
      flash(`Deleted ${title}.`);
    } catch (err) {
      flash(err.message, true);
    }
    resetForm();
    loadTitles();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    Forms.clear(form, errorBox);
    const bare = form.elements.id.value;
    const data = collect();
    try {
      const saved = bare
        ? await api("PUT", `/api/v1/library/custom/${bare}`, data)
        : await api("POST", "/api/v1/library/custom", data);
      flash(`${bare ? "Saved" : "Added"} ${saved.title}.`);
      resetForm();
      await loadTitles();
    } catch (err) {
      Forms.show(form, errorBox, err);
    }
  });
  document.getElementById("cancel-entry").addEventListener("click", resetForm);

  loadScanners().catch((err) => flash("Could not load the stores: " + err.message, true));
  loadTitles();
})();
