// Store: the merged catalog, install and uninstall as jobs followed to their end, sources.
"use strict";

(() => {
  const { api, el, flash } = Console;
  const $ = (id) => document.getElementById(id);

  function when(unix) {
    return unix ? new Date(unix * 1000).toLocaleString() : "never";
  }

  async function follow(ref, label) {
    $("job-box").hidden = false;
    let job;
    const deadline = Date.now() + 330000;
    do {
      job = await api("GET", "/api/v1/store/jobs/" + encodeURIComponent(ref.job));
      $("job-state").textContent = `${label}: ${job.state}` +
        (job.state === "running" ? ` (${job.phase})` : "") +
        (job.error ? ` — ${job.error}` : "");
      $("job-state").dataset.state = job.state;
      $("job-log").textContent = job.log.join("\n");
      if (job.state !== "running") break;
      await new Promise((resolve) => setTimeout(resolve, 700));
    } while (Date.now() < deadline);
    flash(`${label}: ${job.state}${job.error ? " — " + job.error : ""}`, job.state !== "done");
    await loadAll();
  }

  async function run(path, body, label) {
    try {
      await follow(await api("POST", "/api/v1/store/" + path, body), label);
    } catch (err) {
      flash(`${label}: ${err.message}`, true);
    }
  }

  function install(p) {
    const body = { source: p.source, id: p.id };
    if (!p.signed) {
      const ok = window.confirm(`${p.title} comes from the unsigned source ${p.source}: ` +
        "nothing vouches for it. Install anyway?");
      if (!ok) return;
      body.accept_unverified = true;
    }
    run("install", body, `Install ${p.title} ${p.version}`);
  }

  function renderCatalog(cat) {
    $("busy").textContent = cat.busy ? "a package job is running" : "";
    $("catalog").querySelector("tbody").replaceChildren(...cat.plugins.map((p) => {
      const action = el("button", { type: "button", onclick: () => install(p),
        "aria-label": `Install ${p.title}` },
      p.installed_version ? (p.update_available ? "Update" : "Reinstall") : "Install");
      if (!p.compatible || p.blocked || cat.busy) action.disabled = true;
      const why = p.blocked || p.incompatible_reason || "";
      return el("tr", { dataset: { id: p.id, source: p.source } },
        el("td", {}, el("strong", {}, p.title), el("br"), el("span", { class: "muted" },
          p.description), why ? el("div", { class: "error" }, why) : null),
        el("td", {}, p.version),
        el("td", {}, p.source),
        el("td", {}, el("span", { class: "badge" + (p.tier === "verified" ? " store" : "") },
          p.tier)),
        el("td", {}, p.installed_version || "–"),
        el("td", {}, action));
    }));
    $("no-plugins").hidden = cat.plugins.length > 0;
    $("sources").querySelector("tbody").replaceChildren(...cat.sources.map((s) => {
      const remove = s.builtin ? el("span", { class: "muted" }, "built-in")
        : el("button", { type: "button", class: "danger", "aria-label": `Remove source ${s.name}`,
          onclick: () => removeSource(s.name) }, "Remove");
      return el("tr", { dataset: { name: s.name } },
        el("td", {}, s.name), el("td", {}, el("code", {}, s.url)),
        el("td", {}, s.signed ? "yes" : "no"), el("td", {}, String(s.entry_count)),
        el("td", {}, when(s.fetched_at) + (s.stale ? " (stale)" : "")),
        el("td", { class: s.error ? "error" : "muted" }, s.error || "–"),
        el("td", {}, remove));
    }));
  }

  async function loadInstalled() {
    const rows = await api("GET", "/api/v1/store/installed");
    $("installed").querySelector("tbody").replaceChildren(...rows.map((r) =>
      el("tr", { dataset: { pkg: r.pkg } },
        el("td", {}, r.pkg), el("td", {}, r.version || "–"), el("td", {}, r.tier),
        el("td", {}, r.source || "–"), el("td", {}, r.running ? "yes" : "no"),
        el("td", {}, el("button", { type: "button", class: "danger",
          "aria-label": `Uninstall ${r.pkg}`,
          onclick: () => run("uninstall", { pkg: r.pkg }, `Uninstall ${r.pkg}`) },
        "Uninstall")))));
    $("no-installed").hidden = rows.length > 0;
  }

  async function loadAll(method = "GET") {
    try {
      const url = method === "GET" ? "/api/v1/store/catalog" : "/api/v1/store/refresh";
      renderCatalog(await api(method, url));
      await loadInstalled();
    } catch (err) {
      flash("Could not load the store: " + err.message, true);
    }
  }

  async function removeSource(name) {
    try {
      await api("DELETE", "/api/v1/store/sources/" + encodeURIComponent(name));
      flash(`Source ${name} removed.`);
      await loadAll();
    } catch (err) {
      flash(`Remove ${name}: ${err.message}`, true);
    }
  }

  $("source-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.target;
    const name = form.elements.name.value.trim();
    try {
      await api("PUT", "/api/v1/store/sources/" + encodeURIComponent(name), {
        url: form.elements.url.value.trim(), public_key: form.elements.public_key.value.trim(),
      });
      form.reset();
      flash(`Source ${name} saved.`);
      await loadAll("POST");
    } catch (err) {
      const detail = (err.fields || []).map((f) => `${f.field}: ${f.message}`).join("; ");
      flash(`Source ${name}: ${err.message}${detail ? " (" + detail + ")" : ""}`, true);
    }
  });

  $("refresh").addEventListener("click", () => loadAll("POST"));
  loadAll();
})();
