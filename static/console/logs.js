// Host log viewer: the text tail, refreshed every 5 s while "follow" is on.
"use strict";

(() => {
  const pre = document.getElementById("log");
  const follow = document.getElementById("follow");

  async function load() {
    try {
      const text = await Console.api("GET", "/api/logs");
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 20;
      pre.textContent = text || "(the log is empty)";
      if (atBottom || follow.checked) pre.scrollTop = pre.scrollHeight;
    } catch (err) {
      Console.flash("Could not load the log: " + err.message, true);
    }
  }

  document.getElementById("refresh").addEventListener("click", load);
  setInterval(() => follow.checked && load(), 5000);
  load();
})();
