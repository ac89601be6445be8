// Native (browser) devices on the clients page: approve or deny a waiting browser, arm a PIN.
// Calls the /api/v1/native routes with the operator's session and CSRF token (never the API
// token: those routes accept the console session, see apikit/base.py).
"use strict";

(() => {
  const body = document.querySelector("#native-pending tbody");
  const none = document.getElementById("no-native-pending");
  const pinState = document.getElementById("native-pin-state");
  const disarm = document.getElementById("native-disarm");
  let shown = "";

  function age(secs) {
    return secs < 60 ? `${secs} s` : `${Math.floor(secs / 60)} min`;
  }

  async function loadPending() {
    let list;
    try {
      list = await Console.api("GET", "/api/v1/native/pending");
    } catch (err) {
      Console.flash("Could not load waiting browsers: " + err.message, true);
      return;
    }
    const key = JSON.stringify(list.map((p) => [p.id, p.name]));
    none.hidden = list.length > 0;
    if (key === shown) {  // only the ages moved: keep the buttons under the operator's pointer
      list.forEach((p) => {
        const cell = body.querySelector(`tr[data-id="${p.id}"] .age`);
        if (cell) cell.textContent = age(p.age_secs);
      });
      return;
    }
    shown = key;
    body.replaceChildren();
    for (const p of list) {
      const approve = Console.el("button", { type: "button", class: "approve",
        onclick: () => decide(p, "approve") }, "Approve");
      const deny = Console.el("button", { type: "button", class: "danger deny",
        onclick: () => decide(p, "deny") }, "Deny");
      body.append(Console.el("tr", { dataset: { id: p.id, fingerprint: p.fingerprint } },
        Console.el("td", {}, p.name),
        Console.el("td", {}, Console.el("code", {}, p.fingerprint.slice(0, 16) + "…")),
        Console.el("td", { class: "age" }, age(p.age_secs)),
        Console.el("td", {}, approve, " ", deny)));
    }
  }

  async function decide(p, verb) {
    try {
      await Console.api("POST", `/api/v1/native/pending/${p.id}/${verb}`, {});
      Console.flash(`${verb === "approve" ? "Approved" : "Denied"} ${p.name}.`);
      if (verb === "approve") document.dispatchEvent(new Event("native:paired"));
    } catch (err) {
      Console.flash(err.message, true);
    }
    shown = "";
    loadPending();
  }

  function showPin(st) {
    disarm.hidden = !st.armed;
    const wrong = st.wrong_pins ? ` ${st.wrong_pins} wrong PIN(s) so far.` : "";
    if (st.armed) {
      pinState.textContent = `PIN ${st.pin} — type it on /play within ${st.expires_in_secs} s.${wrong}`;
    } else if (st.closed_by_wrong_pins) {  // someone guessed: the host closed the window
      pinState.textContent = "PIN closed after too many wrong PINs. Arm a new one to pair.";
    } else {
      pinState.textContent = "No PIN armed.";
    }
    pinState.className = st.armed ? "success" : st.closed_by_wrong_pins ? "warning" : "muted";
  }

  async function loadPin() {
    try {
      showPin(await Console.api("GET", "/api/v1/native/pair"));
    } catch (err) { /* the pending list already reports an unreachable host */ }
  }

  document.getElementById("native-arm").addEventListener("click", async () => {
    const ttl = Number(document.getElementById("native-pin-ttl").value);
    try {
      showPin(await Console.api("POST", "/api/v1/native/pair/arm", { ttl_secs: ttl }));
    } catch (err) {
      Console.flash(err.message, true);
    }
  });
  disarm.addEventListener("click", async () => {
    try {
      await Console.api("DELETE", "/api/v1/native/pair");  // 204: read the state again
      showPin(await Console.api("GET", "/api/v1/native/pair"));
    } catch (err) {
      Console.flash(err.message, true);
    }
  });

  loadPending();
  loadPin();
  setInterval(() => { loadPending(); loadPin(); }, 2000);
})();
