/* Keyboard shortcuts on every page (base.html lists them in #shortcuts-dialog, opened by `?`
 * or the top bar's "?" button):
 *   /        focus the runs filter (#query-input), or the run page's metric filter
 *   j / k    move the highlighted row of the runs table down / up
 *   x        select or unselect the highlighted run (its checkbox, as a click would)
 *   Enter    open the highlighted run
 *   c        compare the selected runs (#compare-btn)
 *   ?        this list; Esc closes it, and leaves a filter field
 * Keys are ignored while typing in a field (input, textarea, select, contenteditable) and
 * with Ctrl, Alt or Meta held, so the browser's own shortcuts keep working. The table is
 * read from the DOM (#runs-body rows carry data-run-id), so runs.js needs no hooks; the
 * highlight follows the run across the table's refreshes. */
"use strict";

(() => {
  const CURSOR = "kbd-cursor";
  let cursorRun = null; // the highlighted run's id, kept across re-renders

  const dialog = () => document.getElementById("shortcuts-dialog");
  const body = () => document.getElementById("runs-body");

  const NOT_TYPED = /^(checkbox|radio|button|submit|reset|range|color|file|image)$/;

  /** Whether keys typed at `target` are text for it (a checkbox or a range takes no text). */
  function typing(target) {
    if (!(target instanceof Element)) return false;
    if (target.tagName === "INPUT") return !NOT_TYPED.test(target.type);
    return target.isContentEditable || /^(TEXTAREA|SELECT)$/.test(target.tagName);
  }

  /** The runs table's rows, while the table is shown (not behind another tab). */
  function rows() {
    const tbody = body();
    if (!tbody || !tbody.getClientRects().length) return [];
    return [...tbody.querySelectorAll(":scope > tr[data-run-id]")];
  }

  function paint() {
    // no highlighted run: nothing to paint, and no layout forced on each re-render
    if (cursorRun === null && !document.querySelector(`#runs-body > tr.${CURSOR}`)) return;
    for (const tr of rows()) tr.classList.toggle(CURSOR, tr.dataset.runId === cursorRun);
  }

  function current() {
    return rows().find((tr) => tr.dataset.runId === cursorRun) || null;
  }

  function move(step) {
    const all = rows();
    if (!all.length) return;
    const at = all.findIndex((tr) => tr.dataset.runId === cursorRun);
    const next = at < 0 ? (step > 0 ? 0 : all.length - 1) : Math.min(all.length - 1, Math.max(0, at + step));
    cursorRun = all[next].dataset.runId;
    paint();
    all[next].scrollIntoView({ block: "nearest" });
  }

  function focusFilter() {
    const input = document.getElementById("query-input") || document.getElementById("metric-filter");
    if (!input) return false;
    input.focus();
    input.select();
    return true;
  }

  function compare() {
    const button = document.getElementById("compare-btn");
    if (!button) return false;
    if (button.disabled) T.toast("Select 2 to 200 runs to compare (x selects the highlighted run)", "ok");
    else button.click();
    return true;
  }

  function toggleSelected() {
    const tr = current();
    const box = tr && tr.querySelector("td.check input[type=checkbox]");
    if (!box) return false;
    box.click(); // fires runs.js's change handler, as a click would
    return true;
  }

  function open() {
    const link = current() && current().querySelector("a.run-link");
    if (!link) return false;
    window.location.assign(link.href);
    return true;
  }

  function showHelp() {
    const d = dialog();
    if (!d || d.open) return false;
    d.showModal();
    return true;
  }

  const KEYS = {
    "/": focusFilter,
    "?": showHelp,
    j: () => { move(1); return rows().length > 0; },
    k: () => { move(-1); return rows().length > 0; },
    x: toggleSelected,
    Enter: open,
    c: compare,
  };

  document.addEventListener("keydown", (ev) => {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing) return;
    if (typing(ev.target)) {
      if (ev.key === "Escape" && ev.target.matches("#query-input, #metric-filter")) ev.target.blur();
      return;
    }
    if (dialog() && dialog().open) return; // the dialog handles its own keys (Esc closes it)
    // Enter on a focused link or button is that control's own click, not "open the run".
    if (ev.key === "Enter" && ev.target instanceof Element && ev.target.closest("a, button, summary, [role=button], [role=tab]")) return;
    const action = KEYS[ev.key];
    if (action && action()) ev.preventDefault();
  });

  const button = document.getElementById("shortcuts-btn");
  if (button) button.addEventListener("click", showHelp);
  const close = document.getElementById("shortcuts-close");
  if (close) close.addEventListener("click", () => dialog().close());
  if (dialog()) {
    dialog().addEventListener("click", (ev) => { if (ev.target === dialog()) dialog().close(); }); // the backdrop
  }
  if (body()) new MutationObserver(paint).observe(body(), { childList: true }); // runs.js re-renders rows
})();
