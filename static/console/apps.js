// App catalog: list with covers, and one form that adds or edits an entry with every
// apps.json field. A 400 from POST /api/apps names its field first ("exit-timeout must ...",
// "prep-cmd[1].do ..."): the message is shown next to that field.
"use strict";

(() => {
  const { api, el, flash } = Console;
  const form = document.getElementById("app-form");
  const body = document.querySelector("#apps tbody");
  const preview = document.getElementById("cover-preview");
  const coverInput = document.getElementById("f-cover");
  const FIELDS = ["name", "cmd", "working-dir", "output", "image-path", "cover", "elevated",
    "exit-timeout", "encoder-preset", "env", "prep-cmd", "detached"];
  const TEXT = ["name", "cmd", "working-dir", "output", "image-path"];
  const BOOLS = { "auto-detach": true, "wait-all": true, "exclude-global-prep-cmd": false,
    elevated: false };
  let apps = [];
  let coverData = null; // base64 data URL of a picked file, uploaded on save

  // -- errors at their field ------------------------------------------------------------
  function clearErrors() {
    document.getElementById("form-error").hidden = true;
    form.querySelectorAll(".field-error").forEach((e) => { e.hidden = true; e.textContent = ""; });
    form.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
  }

  function fieldOf(message) {
    const m = /^'?([a-z][a-z-]*)'?(?:\[(\d*)\])?(?:\.([A-Za-z_-]+))?/.exec(message);
    if (!m) return null;
    const name = m[1] === "env" || message.startsWith("env ") ? "env" : m[1];
    return FIELDS.includes(name) ? { name, row: m[2], part: m[3] } : null;
  }

  function showError(message) {
    const where = fieldOf(message);
    if (!where) {
      const box = document.getElementById("form-error");
      box.textContent = message;
      box.hidden = false;
      box.scrollIntoView({ block: "center" });
      return;
    }
    const box = document.getElementById("e-" + where.name);
    box.textContent = message;
    box.hidden = false;
    let input = form.querySelector(`[data-field="${where.name}"] input, ` +
      `[data-field="${where.name}"] select, [data-field="${where.name}"] textarea`);
    if (where.name === "prep-cmd" && where.row !== undefined && where.row !== "") {
      const row = document.querySelectorAll("#prep-rows .row")[Number(where.row)];
      const name = where.part === "elevated" ? "step-elevated" : where.part || "do";
      const part = row && row.querySelector(`[name="${name}"]`);
      if (part) input = part;
    }
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  }

  // -- the repeatable rows ----------------------------------------------------------------
  function removeButton(row, label) {
    return el("button", { type: "button", class: "danger", "aria-label": label,
      onclick: () => row.remove() }, "Remove");
  }

  function addEnvRow(key = "", value = "") {
    const row = el("div", { class: "row" });
    const n = document.querySelectorAll("#env-rows .row").length + 1;
    row.append(
      el("input", { name: "key", value: key, "aria-label": `Variable ${n} name`,
        placeholder: "NAME", maxlength: "4096" }),
      el("input", { name: "value", value: value, "aria-label": `Variable ${n} value`,
        placeholder: "value", maxlength: "4096" }),
      removeButton(row, `Remove variable ${n}`),
    );
    document.getElementById("env-rows").append(row);
    return row;
  }

  function addPrepRow(step = {}) {
    const row = el("div", { class: "row prep" });
    const n = document.querySelectorAll("#prep-rows .row").length + 1;
    const elevated = el("input", { type: "checkbox", name: "step-elevated" });
    elevated.checked = Boolean(step.elevated);
    row.append(
      el("input", { name: "do", value: step.do || "", "aria-label": `Step ${n}: do`,
        placeholder: "do", maxlength: "4096" }),
      el("input", { name: "undo", value: step.undo || "", "aria-label": `Step ${n}: undo`,
        placeholder: "undo (optional)", maxlength: "4096" }),
      el("label", { class: "check" }, elevated, "elevated"),
      removeButton(row, `Remove step ${n}`),
    );
    document.getElementById("prep-rows").append(row);
    return row;
  }

  document.getElementById("add-env").addEventListener("click", () =>
    addEnvRow().querySelector("input").focus());
  document.getElementById("add-prep").addEventListener("click", () =>
    addPrepRow().querySelector("input").focus());

  // -- cover ------------------------------------------------------------------------------
  coverInput.addEventListener("change", () => {
    const file = coverInput.files[0];
    coverData = null;
    if (!file) return;
    const reader = new FileReader();
    reader.onload = () => {
      coverData = reader.result;
      preview.src = coverData;
      preview.hidden = false;
    };
    reader.readAsDataURL(file);
  });

  // The host percent-escapes the key into one file name, so distinct names keep distinct
  // covers; only what it refuses (a leading slash or dot, ".." segments, NUL) is replaced.
  function coverKey(name) {
    const key = name.replace(/\0/g, "").replace(/^[\/\\.]+/, "").replace(/\.\./g, "__");
    return (key.trim() || "cover").slice(0, 150);
  }

  // -- the form ---------------------------------------------------------------------------
  function resetForm() {
    form.reset();
    clearErrors();
    form.elements.index.value = "-1";
    document.getElementById("env-rows").replaceChildren();
    document.getElementById("prep-rows").replaceChildren();
    document.getElementById("form-title").textContent = "Add an app";
    document.getElementById("save").textContent = "Add app";
    document.getElementById("cancel-edit").hidden = true;
    preview.hidden = true;
    preview.removeAttribute("src");
    coverData = null;
  }

  function edit(index) {
    resetForm();
    const app = apps[index];
    form.elements.index.value = String(index);
    for (const key of TEXT) form.elements[key].value = app[key] || "";
    for (const [key, dflt] of Object.entries(BOOLS)) {
      form.elements[key].checked = app[key] === undefined ? dflt : Boolean(app[key]);
    }
    form.elements["exit-timeout"].value = app["exit-timeout"] ?? "";
    form.elements["encoder-preset"].value =
      app["encoder-preset"] === undefined ? "" : String(app["encoder-preset"]);
    for (const [k, v] of Object.entries(app.env || {})) addEnvRow(k, String(v));
    for (const step of app["prep-cmd"] || []) addPrepRow(step);
    form.elements.detached.value = (app.detached || []).join("\n");
    if (app["image-path"]) {
      preview.src = `/api/covers/${index}?v=${Date.now()}`;
      preview.hidden = false;
    }
    document.getElementById("form-title").textContent = `Edit ${app.name}`;
    document.getElementById("save").textContent = "Save changes";
    document.getElementById("cancel-edit").hidden = false;
    form.scrollIntoView();
    form.elements.name.focus();
  }

  function collect() {
    const data = { index: Number(form.elements.index.value) };
    for (const key of TEXT) {
      const value = form.elements[key].value;
      if (value !== "" || key === "name") data[key] = value;
    }
    for (const key of Object.keys(BOOLS)) data[key] = form.elements[key].checked;
    const timeout = form.elements["exit-timeout"].value.trim();
    if (timeout !== "") data["exit-timeout"] = timeout;
    const preset = form.elements["encoder-preset"].value;
    if (preset !== "") data["encoder-preset"] = Number(preset);
    const env = {};
    document.querySelectorAll("#env-rows .row").forEach((row) => {
      const key = row.querySelector("[name=key]").value;
      if (key !== "") env[key] = row.querySelector("[name=value]").value;
    });
    data.env = env;
    data["prep-cmd"] = [...document.querySelectorAll("#prep-rows .row")].map((row) => ({
      do: row.querySelector("[name=do]").value,
      undo: row.querySelector("[name=undo]").value,
      elevated: row.querySelector("[name=step-elevated]").checked,
    }));
    data.detached = form.elements.detached.value.split("\n").map((s) => s.trim()).filter(Boolean);
    return data;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors();
    const data = collect();
    if (!data.name.trim()) {
      showError("name is required");
      return;
    }
    if (coverData) {
      try {
        const key = coverKey(data.name);
        const up = await api("POST", "/api/covers/upload", { key, data: coverData });
        data["image-path"] = up.path;
        form.elements["image-path"].value = up.path;
        coverData = null; // uploaded once; a retry after a 400 reuses the path
      } catch (err) {
        showError("cover: " + err.message);
        return;
      }
    }
    try {
      const done = await api("POST", "/api/apps", data);
      const verb = data.index === -1 ? "Added" : "Saved";
      flash(`${verb} ${data.name} (position ${done.index} after sorting by name).`);
      resetForm();
      await load();
    } catch (err) {
      showError(err.message);
    }
  });
  document.getElementById("cancel-edit").addEventListener("click", resetForm);

  // -- the list ---------------------------------------------------------------------------
  function coverCell(app, index) {
    // A neutral box where there is no cover: clients get the host's default box art.
    if (!app["image-path"]) return el("span", { class: "muted cover-none" }, "default art");
    const img = el("img", { class: "thumb", alt: app.name, loading: "lazy",
      src: `/api/covers/${index}?v=${Date.now()}` });
    // The host serves its default box art when image-path names no valid PNG.
    img.addEventListener("error", () => img.replaceWith(el("span", { class: "muted cover-none",
      title: `${app["image-path"]} is not a valid PNG` }, "default art")));
    return img;
  }

  async function remove(app, index) {
    if (!confirm(`Delete ${app.name}?`)) return;
    try {
      await api("DELETE", `/api/apps/${index}`);
      flash(`Deleted ${app.name}.`);
    } catch (err) {
      flash(err.message, true);
    }
    resetForm();
    load();
  }

  async function load() {
    let data;
    try {
      data = await api("GET", "/api/apps");
    } catch (err) {
      flash("Could not load apps: " + err.message, true);
      return;
    }
    apps = data.apps || [];
    const env = Object.entries(data.env || {});
    document.getElementById("catalog-env-count").textContent = env.length;
    document.getElementById("catalog-env-list").replaceChildren(...env.flatMap(([k, v]) =>
      [el("dt", {}, el("code", {}, k)), el("dd", {}, el("code", {}, String(v)))]));
    body.replaceChildren();
    document.getElementById("no-apps").hidden = apps.length > 0;
    apps.forEach((app, index) => {
      body.append(el("tr", { dataset: { name: app.name || "" } },
        el("td", {}, coverCell(app, index)),
        el("td", {}, app.name || ""),
        el("td", {}, app.cmd ? el("code", {}, app.cmd) : el("span", { class: "muted" }, "desktop")),
        el("td", {}, (app["prep-cmd"] || []).length),
        el("td", { class: "actions-cell" },
          el("button", { type: "button", onclick: () => edit(index),
            "aria-label": `Edit ${app.name}` }, "Edit"),
          el("button", { type: "button", class: "danger", onclick: () => remove(app, index),
            "aria-label": `Delete ${app.name}` }, "Delete")),
      ));
    });
  }

  resetForm();
  load();
})();
