// Displays: live virtual displays with their state and a ticking countdown; pin, unpin and
// release; the keep-alive policy. Calls /api/v1/display/* with the operator's session.
"use strict";

(() => {
  const body = document.querySelector("#displays tbody");
  const none = document.getElementById("no-displays");
  const form = document.getElementById("keep-alive");
  const modeBox = document.getElementById("keep-mode");
  const secondsBox = document.getElementById("keep-seconds");
  const keepError = document.getElementById("keep-error");
  let shown = "";
  let deadlines = new Map(); // slot -> performance.now() deadline of a lingering display
  let settings = null;
  let dirty = false; // the operator is editing the policy: never overwrite the form
  let polls = 0;

  function countdown(ms) {
    const s = Math.max(0, Math.ceil(ms / 1000));
    const m = Math.floor(s / 60);
    return m ? `${m} min ${String(s % 60).padStart(2, "0")} s` : `${s} s`;
  }

  function stateCell(d) {
    const cell = Console.el("td", {}, Console.el("span", { class: `state state-${d.state}` }, d.state));
    if (d.state === "lingering") {
      cell.append(" · torn down in ", Console.el("span", { class: "countdown", dataset: { slot: d.slot } }, ""));
    } else if (d.state === "pinned") {
      cell.append(" · kept until released");
    } else if (d.pin_on_leave) {
      cell.append(" · pinned when its last session leaves");
    }
    if (d.owned && !d.running) cell.append(Console.el("span", { class: "warning" }, " (its server is not running)"));
    return cell;
  }

  function where(d) {
    const parts = [];
    if (d.x_display) parts.push(`X ${d.x_display}`);
    if (d.output) parts.push(`output ${d.output}`);
    parts.push(`at ${d.x},${d.y}`);
    return parts.join(" · ");
  }

  function actions(d) {
    const cell = Console.el("td", {});
    if (!d.owned) {
      cell.append(Console.el("span", { class: "muted" }, "attached: the operator's own screen"));
      return cell;
    }
    const button = (label, cls, fn) =>
      Console.el("button", { type: "button", class: cls, onclick: fn }, label);
    if (d.state === "pinned" || d.pin_on_leave) {
      cell.append(button("Unpin", "unpin", () => act("unpin", d)), " ");
    } else {
      cell.append(button("Pin", "pin", () => act("pin", d)), " ");
    }
    if (d.state !== "active") cell.append(button("Release", "danger release", () => release(d.slot)));
    return cell;
  }

  function tick() {
    const now = performance.now();
    for (const span of body.querySelectorAll(".countdown")) {
      const end = deadlines.get(Number(span.dataset.slot));
      if (end !== undefined) span.textContent = countdown(end - now);
    }
  }

  async function load() {
    let data;
    try {
      data = await Console.api("GET", "/api/v1/display/state");
    } catch (err) {
      Console.flash("Could not load the displays: " + err.message, true);
      return;
    }
    const list = data.displays || [];
    const now = performance.now();
    deadlines = new Map(list.filter((d) => d.expires_in_ms !== null).map((d) => [d.slot, now + d.expires_in_ms]));
    none.hidden = list.length > 0;
    document.getElementById("release-all").disabled = !list.some((d) => d.owned && d.state !== "active");
    const key = JSON.stringify(list.map((d) => [d.slot, d.state, d.pin_on_leave, d.sessions, d.mode, d.running, d.client]));
    if (key !== shown) { // rebuild only on a change: keep focus and the pointer's button
      shown = key;
      const focused = document.activeElement && document.activeElement.closest("tr");
      const focusSlot = focused && focused.dataset.slot;
      body.replaceChildren(...list.map((d) => Console.el("tr", { dataset: { slot: d.slot, state: d.state } },
        Console.el("td", {}, d.slot),
        Console.el("td", {}, d.backend),
        Console.el("td", {}, d.mode),
        stateCell(d),
        Console.el("td", {}, d.sessions),
        Console.el("td", {}, d.client || "—"),
        Console.el("td", {}, where(d)),
        actions(d))));
      if (focusSlot !== undefined && focusSlot !== null) {
        const again = body.querySelector(`tr[data-slot="${focusSlot}"] button`);
        if (again) again.focus();
      }
    }
    tick();
  }

  async function act(verb, d) {
    try {
      const after = await Console.api("POST", `/api/v1/display/${verb}`, { slot: d.slot });
      if (!after) Console.flash(`Display ${d.slot} was torn down (the policy keeps nothing).`);
      else if (verb === "pin") Console.flash(after.state === "pinned" ? `Display ${d.slot} is pinned.` : `Display ${d.slot} will be pinned when its last session leaves.`);
      else Console.flash(`Display ${d.slot} follows the keep-alive policy again.`);
    } catch (err) {
      Console.flash(err.message, true);
    }
    shown = "";
    load();
  }

  async function release(slot) {
    const what = slot === undefined ? "every kept display" : `display ${slot}`;
    if (!window.confirm(`Tear down ${what}? Its apps lose their screen.`)) return;
    try {
      const out = await Console.api("POST", "/api/v1/display/release", slot === undefined ? {} : { slot });
      Console.flash(`Released ${out.released} display(s).`);
    } catch (err) {
      Console.flash(err.message, true);
    }
    shown = "";
    load();
  }

  function showPolicy(state) {
    settings = state;
    const keep = state.effective.keep_alive;
    modeBox.value = keep.mode;
    secondsBox.value = keep.seconds || secondsBox.value || 60;
    secondsBox.disabled = keep.mode !== "duration";
  }

  async function loadPolicy() {
    try {
      showPolicy(await Console.api("GET", "/api/v1/display/settings"));
    } catch (err) {
      Console.flash("Could not load the display policy: " + err.message, true);
    }
  }

  modeBox.addEventListener("change", () => { secondsBox.disabled = modeBox.value !== "duration"; });
  form.addEventListener("input", () => { dirty = true; });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    keepError.textContent = "";
    secondsBox.removeAttribute("aria-invalid");
    if (!settings) return;
    const keep = { mode: modeBox.value };
    if (keep.mode === "duration") keep.seconds = Number(secondsBox.value);
    // A named preset fixes every axis: saving a keep-alive makes the policy custom with the
    // preset's other axes spelled out, so nothing else changes.
    const policy = { ...settings.settings, ...settings.effective, preset: "custom", keep_alive: keep };
    const response = await fetch("/api/v1/display/settings", {
      method: "PUT", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json",
        "X-CSRFToken": (document.cookie.match(/(?:^|; )csrftoken=([^;]*)/) || [])[1] || "" },
      body: JSON.stringify(policy),
    });
    const data = await response.json().catch(() => ({}));
    if (response.ok) {
      dirty = false;
      showPolicy(data);
      Console.flash("Keep-alive policy saved; it applies to displays opened from now on.");
      return;
    }
    const fields = data.fields || [];
    const seconds = fields.find((f) => f.field === "keep_alive.seconds");
    if (seconds) {
      secondsBox.setAttribute("aria-invalid", "true");
      keepError.textContent = "Seconds " + seconds.message;
      secondsBox.focus();
    } else {
      Console.flash(data.error || `${response.status} ${response.statusText}`, true);
    }
  });
  document.getElementById("release-all").addEventListener("click", () => release());

  load();
  loadPolicy();
  setInterval(() => {
    load();
    // Someone else (the API, another console) may change the policy: follow it while the
    // form is untouched.
    if (++polls % 5 === 0 && !dirty && !form.contains(document.activeElement)) loadPolicy();
  }, 2000);
  setInterval(tick, 250);
})();
