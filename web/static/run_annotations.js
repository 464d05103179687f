/* The run page's annotations: the name (pencil -> input), the star, tags (chips with a
 * remove button, "+ tag" -> input) and notes (pencil -> textarea), edited in place through
 * PATCH /api/v1/runs/<id>/{name,star,tags,notes} (admin scope: a log token's 403 shows as
 * the error next to the control). run.js calls RunAnnotations.render(run) on every header
 * refresh; a part being edited is left alone until it is saved or cancelled. */
"use strict";

const RunAnnotations = (() => {
  const { h, api, clear } = T;
  let runId = null;
  let current = null;
  let onChange = () => {};
  const editing = { name: false, tags: false, notes: false };

  async function patch(what, body) {
    const fresh = await api(`/api/v1/runs/${runId}/${what}`, { method: "PATCH", body });
    current = Object.assign(current || {}, fresh);
    onChange(current);
    return current;
  }

  function showError(el, exc) {
    el.textContent = exc ? exc.message : "";
    el.hidden = !exc;
  }

  // ----------------------------------------------------------------- name and star

  function renderName(r) {
    if (editing.name) return;
    document.getElementById("run-name").hidden = false;
    document.getElementById("rename-run").hidden = false;
    clear(document.getElementById("name-editor")).hidden = true;
  }

  function editName() {
    if (!current) return;
    editing.name = true;
    const title = document.getElementById("run-name");
    const pencil = document.getElementById("rename-run");
    const box = document.getElementById("name-editor");
    const input = h("input", { type: "text", class: "name-input", maxlength: 250, "aria-label": "Run name", value: current.name });
    const error = h("span", { class: "edit-error", role: "alert", hidden: true });
    const done = () => { editing.name = false; renderName(current); };
    const save = async () => {
      try {
        await patch("name", { name: input.value });
        done();
      } catch (exc) {
        showError(error, exc);
      }
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") save();
      if (e.key === "Escape") done();
    });
    clear(box).append(input,
      h("button", { type: "button", class: "btn small primary", id: "name-save", onclick: save }, "Save"),
      h("button", { type: "button", class: "btn small", onclick: done }, "Cancel"), error);
    title.hidden = true;
    pencil.hidden = true;
    box.hidden = false;
    input.focus();
    input.select();
  }

  function renderStar(r) {
    const button = document.getElementById("star-run");
    button.textContent = r.starred ? "★" : "☆";
    button.setAttribute("aria-pressed", r.starred ? "true" : "false");
    button.title = r.starred ? "Starred: click to remove the star" : "Star this run";
    button.classList.toggle("on", !!r.starred);
  }

  async function toggleStar() {
    if (!current) return;
    const button = document.getElementById("star-run");
    button.disabled = true;
    try {
      renderStar(await patch("star", { starred: !current.starred }));
    } catch (exc) {
      T.toast(`Star not changed: ${exc.message}`);
    } finally {
      button.disabled = false;
    }
  }

  // ------------------------------------------------------------------------ tags

  function renderTags(r) {
    if (editing.tags) return;
    const box = clear(document.getElementById("run-tags"));
    const error = h("span", { class: "edit-error", role: "alert", id: "tags-error", hidden: true });
    const chips = (r.tags || []).map((tag) => h("span", { class: "tag editable", dataset: { tag } }, tag,
      h("button", { type: "button", class: "tag-remove", title: `Remove the tag ${tag}`, "aria-label": `Remove tag ${tag}`,
        onclick: async () => {
          try { await patch("tags", { remove: [tag] }); } catch (exc) { showError(error, exc); }
        } }, "×")));
    box.append(...chips,
      h("button", { type: "button", class: "btn small ghost", id: "add-tag", title: "Add a tag: name or key=value", onclick: () => addTag(box, error) }, "+ tag"),
      error);
  }

  function addTag(box, error) {
    editing.tags = true;
    const input = h("input", { type: "text", class: "tag-input", maxlength: 100, placeholder: "tag or key=value", "aria-label": "New tag" });
    const done = () => { editing.tags = false; renderTags(current); };
    const save = async () => {
      const tag = input.value.trim();
      if (!tag) { done(); return; }
      try {
        editing.tags = false;
        await patch("tags", { add: [tag] });
        renderTags(current);
      } catch (exc) {
        editing.tags = true;
        showError(error, exc);
      }
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") save();
      if (e.key === "Escape") done();
    });
    const add = document.getElementById("add-tag");
    add.replaceWith(input, h("button", { type: "button", class: "btn small primary", id: "tag-save", onclick: save }, "Add"),
      h("button", { type: "button", class: "btn small", onclick: done }, "Cancel"));
    input.focus();
  }

  // ----------------------------------------------------------------------- notes

  function renderNotes(r) {
    if (editing.notes) return;
    const box = clear(document.getElementById("run-notes"));
    const text = r.notes || "";
    box.append(
      h("div", { class: "notes-head" }, h("h2", {}, "Notes"),
        h("button", { type: "button", class: "btn small ghost", id: "edit-notes", title: "Edit the notes", onclick: editNotes }, "✎ Edit")),
      text ? h("div", { class: "notes-text", id: "notes-text" }, text)
        : h("p", { class: "muted notes-empty", id: "notes-text" }, "No notes yet: what was this run for, what did it show?"));
  }

  function editNotes() {
    if (!current) return;
    editing.notes = true;
    const box = clear(document.getElementById("run-notes"));
    const area = h("textarea", { class: "notes-input", id: "notes-input", rows: 6, maxlength: 65536, "aria-label": "Notes" });
    area.value = current.notes || "";
    const error = h("span", { class: "edit-error", role: "alert", hidden: true });
    const done = () => { editing.notes = false; renderNotes(current); };
    const save = async () => {
      try {
        await patch("notes", { notes: area.value });
        done();
      } catch (exc) {
        showError(error, exc);
      }
    };
    area.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) save();
      if (e.key === "Escape") done();
    });
    box.append(h("div", { class: "notes-head" }, h("h2", {}, "Notes")), area,
      h("div", { class: "notes-actions" },
        h("button", { type: "button", class: "btn small primary", id: "notes-save", onclick: save }, "Save"),
        h("button", { type: "button", class: "btn small", onclick: done }, "Cancel"),
        h("span", { class: "muted" }, "Ctrl+Enter saves, Esc cancels"), error));
    area.focus();
  }

  // ------------------------------------------------------------------------ wiring

  /** The run as the API has it (GET /api/v1/runs/<id>); call again on every refresh. */
  function render(r) {
    current = r;
    renderName(r);
    renderStar(r);
    renderTags(r);
    renderNotes(r);
  }

  /** `changed(run)`: called with the fresh run after each saved change (run.js re-renders). */
  function init(id, changed) {
    runId = id;
    onChange = changed || onChange;
    document.getElementById("rename-run").addEventListener("click", editName);
    document.getElementById("star-run").addEventListener("click", toggleStar);
  }

  return { init, render };
})();
