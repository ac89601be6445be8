// Hooks: edit hooks.json as a form (the API's 400 names every mistake by path, shown in
// place), test-fire a saved hook through the hook worker, and read the delivery log.
"use strict";

(() => {
  const { api, el, flash } = Console;
  const form = document.getElementById("hooks-form");
  const errorBox = document.getElementById("hooks-error");
  const entriesBox = document.getElementById("entries");
  const FILTERS = ["client", "fingerprint", "plane", "app"];
  let saved = []; // the document as the host has it: test-fire uses these indexes
  let newestId = 0;

  function field(label, path, attrs = {}) {
    const id = "h-" + path.replace(/[^A-Za-z0-9]+/g, "-");
    const input = attrs.tag === "select"
      ? el("select", { id, "data-path": path },
        ...attrs.options.map(([v, t]) => el("option", { value: v }, t)))
      : el("input", { id, "data-path": path, ...attrs });
    return el("div", { class: "field" }, el("label", { for: id }, label), input);
  }

  function entryBox(entry, i) {
    const at = `hooks[${i}]`;
    const box = el("fieldset", { class: "hook", dataset: { index: i } },
      el("legend", {}, `Hook ${i + 1}`),
      el("p", { class: "entry-note", "data-path": at, tabindex: "-1" }),
      field("On (event kind or domain.*)", `${at}.on`, { list: "patterns", required: "" }),
      field("Run (shell command)", `${at}.run`, { maxlength: "4096" }),
      field("Webhook (http(s) URL)", `${at}.webhook`, { maxlength: "4096" }),
      el("div", { class: "cols" },
        field("Timeout (s, 1 to 600)", `${at}.timeout_s`, { type: "number", min: "1",
          max: "600", placeholder: "30" }),
        field("Debounce (ms)", `${at}.debounce_ms`, { type: "number", min: "0",
          placeholder: "0" }),
        field("HMAC secret file", `${at}.hmac_secret_file`, { maxlength: "4096" })),
      el("div", { class: "cols" },
        field("Only for client", `${at}.filter.client`),
        field("Only for fingerprint", `${at}.filter.fingerprint`),
        field("Only for plane", `${at}.filter.plane`, { tag: "select",
          options: [["", "any"], ["native", "native"], ["compat", "compat"]] }),
        field("Only for app", `${at}.filter.app`)),
    );
    const value = (path, v) => { box.querySelector(`[data-path="${at}.${path}"]`).value = v ?? ""; };
    for (const key of ["on", "run", "webhook", "timeout_s", "debounce_ms", "hmac_secret_file"]) {
      value(key, entry[key]);
    }
    for (const key of FILTERS) value(`filter.${key}`, (entry.filter || {})[key]);
    const isSaved = i < saved.length && JSON.stringify(saved[i]) === JSON.stringify(entry);
    const test = el("button", { type: "button", class: "test",
      "aria-label": `Test-fire hook ${i + 1}`, onclick: () => testFire(i) }, "Test-fire");
    test.disabled = !isSaved;
    if (!isSaved) test.title = "save first: a test fires the saved hook";
    box.append(el("div", { class: "buttons" }, test,
      el("button", { type: "button", class: "danger", "aria-label": `Remove hook ${i + 1}`,
        onclick: () => { const all = collect(); all.splice(i, 1); render(all); } }, "Remove"),
    ));
    return box;
  }

  function render(list) {
    Forms.clear(form, errorBox);
    entriesBox.replaceChildren(...list.map(entryBox));
    document.getElementById("no-hooks").hidden = list.length > 0;
  }

  function collect() {
    return [...entriesBox.querySelectorAll("fieldset.hook")].map((box) => {
      const get = (path) => box.querySelector(`[data-path$="].${path}"]`).value;
      const entry = { on: get("on") };
      for (const key of ["run", "webhook", "hmac_secret_file"]) if (get(key)) entry[key] = get(key);
      for (const key of ["timeout_s", "debounce_ms"]) if (get(key) !== "") entry[key] = Number(get(key));
      const filter = {};
      for (const key of FILTERS) if (get(`filter.${key}`)) filter[key] = get(`filter.${key}`);
      if (Object.keys(filter).length) entry.filter = filter;
      return entry;
    });
  }

  async function load() {
    let doc;
    try {
      doc = await api("GET", "/api/v1/hooks");
    } catch (err) {
      flash("Could not load the hooks: " + err.message, true);
      return;
    }
    saved = doc.hooks || [];
    const invalid = document.getElementById("invalid");
    invalid.hidden = !doc.invalid;
    invalid.textContent = doc.invalid
      ? `hooks.json on disk is invalid, so every hook is disabled (${doc.invalid}). ` +
        "Saving a valid document fixes it." : "";
    render(saved);
  }

  document.getElementById("add-hook").addEventListener("click", () => {
    const all = collect();
    all.push({ on: "" });
    render(all);
    entriesBox.lastElementChild.querySelector("input").focus();
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    Forms.clear(form, errorBox);
    const hooks = collect();
    try {
      const doc = await api("PUT", "/api/v1/hooks", { hooks });
      saved = doc.hooks;
      document.getElementById("invalid").hidden = true;
      render(saved);
      flash(`Saved ${saved.length} hook${saved.length === 1 ? "" : "s"}.`);
    } catch (err) {
      const n = Forms.show(form, errorBox, err);
      flash(n ? `Nothing saved: ${n} field${n === 1 ? "" : "s"} to fix.` : err.message, true);
    }
  });

  // -- test-fire and the delivery log -------------------------------------------------------
  async function testFire(i) {
    try {
      const result = await api("POST", "/api/v1/hooks/test", { index: i });
      flash(`Hook ${i + 1} test-fired (${result.event.kind}: ${result.queued.join(" and ")}); ` +
        "its deliveries appear below.");
      const before = newestId;
      const deadline = Date.now() + 30000;
      let seen = 0;
      while (Date.now() < deadline && seen < result.queued.length) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        const rows = await loadLog();
        seen = rows.filter((r) => r.id > before && r.event_seq === null).length;
      }
    } catch (err) {
      flash(`Test-fire of hook ${i + 1}: ${err.message}`, true);
    }
  }

  function cell(value, suffix = "") {
    return value === null || value === undefined || value === ""
      ? el("td", { class: "muted" }, "–") : el("td", {}, `${value}${suffix}`);
  }

  async function loadLog() {
    const rows = await api("GET", "/api/v1/hooks/deliveries?limit=100");
    const body = document.querySelector("#deliveries tbody");
    body.replaceChildren(...rows.map((r) => el("tr", { dataset: { id: r.id, outcome: r.outcome } },
      el("td", {}, new Date(r.created).toLocaleTimeString()),
      el("td", {}, r.channel),
      el("td", {}, el("code", {}, r.target)),
      el("td", {}, r.event_kind, " ", r.event_seq === null ? el("em", {}, "test") : `#${r.event_seq}`),
      el("td", { class: `outcome ${r.outcome}` }, r.outcome),
      cell(r.exit_code), cell(r.http_status), cell(r.duration_ms, " ms"), cell(r.error),
    )));
    document.getElementById("no-deliveries").hidden = rows.length > 0;
    newestId = Math.max(newestId, ...rows.map((r) => r.id), 0);
    return rows;
  }

  document.getElementById("refresh-log").addEventListener("click", () =>
    loadLog().catch((err) => flash(err.message, true)));

  load();
  loadLog().catch((err) => flash("Could not load the delivery log: " + err.message, true));
})();
