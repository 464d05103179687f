/* The colour theme, applied before the first paint: base.html loads this file in <head>,
 * not deferred (a few lines). The choice -- "light", "dark" or "system" (the default: the
 * browser's prefers-color-scheme) -- is kept in localStorage under "tracker.theme"; the
 * resolved theme is set as <html data-theme="light|dark">, which app.css reads. common.js
 * (T.theme) changes it and follows the system while the choice is "system". */
"use strict";
(function applyTheme() {
  let choice = "system";
  try {
    choice = localStorage.getItem("tracker.theme") || "system";
  } catch (_exc) { /* storage disabled: follow the system */ }
  const dark = choice === "dark"
    || (choice !== "light" && window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.dataset.theme = dark ? "dark" : "light";
  document.documentElement.dataset.themeChoice = choice === "light" || choice === "dark" ? choice : "system";
}());
