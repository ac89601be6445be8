// The console's navigation folds behind a menu button on a narrow screen. Without this script
// the button stays hidden and the navigation stays open: every page is still reachable.
"use strict";

(() => {
  const header = document.querySelector(".console-header");
  const button = header && header.querySelector(".menu-button");
  const nav = document.getElementById("console-nav");
  if (!button || !nav) return;

  function setOpen(open) {
    button.setAttribute("aria-expanded", String(open));
    header.classList.toggle("folded", !open);
  }

  button.hidden = false;
  setOpen(false);
  button.addEventListener("click", () => setOpen(button.getAttribute("aria-expanded") !== "true"));
  // Escape closes an open menu and gives the focus back to its button.
  header.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || button.getAttribute("aria-expanded") !== "true") return;
    if (getComputedStyle(button).display === "none") return; // wide screen: nothing folds
    setOpen(false);
    button.focus();
  });
})();
