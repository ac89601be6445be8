// Pair a device: keep the list of devices waiting for a PIN current (the server renders it;
// this re-reads the page every 3 s and swaps that list only, so a PIN being typed stays).
"use strict";

(() => {
  const list = document.getElementById("pin-waiting");
  async function refresh() {
    try {
      const response = await fetch("/pair", { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!response.ok || response.redirected) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("pin-waiting");
      if (fresh && fresh.innerHTML !== list.innerHTML) list.innerHTML = fresh.innerHTML;
    } catch (err) { /* the next poll tries again */ }
  }
  setInterval(refresh, 3000);
})();
