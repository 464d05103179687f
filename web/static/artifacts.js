/* The run page's Artifacts tab: the run's files as a tree (folders open on demand, so a run
 * with thousands of media files stays quick), size, short sha256 (copyable) and a download
 * link per file, and a preview of the one selected: text, JSON (pretty), CSV/TSV as a table
 * (first PREVIEW_ROWS rows), images inline, PDFs as a link; anything else is download only.
 *
 * API: GET /api/v1/runs/<id>/artifacts (list), GET .../artifacts/<path> (the bytes).
 * File contents and names are inserted as text (textContent, text nodes), never as HTML. */
"use strict";

const RunArtifacts = (() => {
  const { h, api, clear } = T;
  const PREVIEW_BYTES = 1024 * 1024; // larger text files are download only
  const PREVIEW_ROWS = 100;
  const OPEN_LIMIT = 30; // folders with more entries start closed
  const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
  const TEXT_EXT = /\.(txt|log|md|rst|yaml|yml|toml|ini|cfg|py|sh|out|err)$/i;

  const url = (runId, path) => RunMedia.artifactUrl(runId, path);
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

  /** What preview a file gets: image, json, csv, tsv, text, pdf or none. */
  function previewKind(a) {
    const type = String(a.media_type || "").split(";")[0].trim().toLowerCase();
    const path = a.path.toLowerCase();
    if (IMAGE_TYPES.has(type) || /\.(png|jpe?g|gif|webp)$/.test(path)) return "image";
    if (type === "application/pdf" || path.endsWith(".pdf")) return "pdf";
    if (type === "application/json" || path.endsWith(".json")) return "json";
    if (type === "text/csv" || path.endsWith(".csv")) return "csv";
    if (type === "text/tab-separated-values" || path.endsWith(".tsv")) return "tsv";
    if (type.startsWith("text/") || TEXT_EXT.test(path)) return "text";
    return "none";
  }

  /** Nested folders from the flat list: {dirs: Map(name -> node), files: [artifact], size, count}. */
  function tree(artifacts) {
    const root = { dirs: new Map(), files: [], size: 0, count: 0 };
    for (const a of artifacts) {
      const parts = a.path.split("/");
      let node = root;
      node.size += a.size;
      node.count += 1;
      for (const part of parts.slice(0, -1)) {
        if (!node.dirs.has(part)) node.dirs.set(part, { dirs: new Map(), files: [], size: 0, count: 0 });
        node = node.dirs.get(part);
        node.size += a.size;
        node.count += 1;
      }
      node.files.push(a);
    }
    return root;
  }

  /** Copy text to the clipboard (navigator.clipboard needs a secure context: fall back). */
  async function copy(text) {
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(text);
        return true;
      }
    } catch (_exc) { /* fall through */ }
    const area = h("textarea", { class: "copy-buffer", readonly: true });
    area.value = text;
    document.body.append(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch (_exc) { ok = false; }
    area.remove();
    return ok;
  }

  function shaCell(sha) {
    const short = h("code", { class: "sha", title: sha }, String(sha || "").slice(0, 12));
    const button = h("button", { type: "button", class: "btn small ghost copy-sha", title: "copy the full sha256", dataset: { sha } }, "copy");
    button.addEventListener("click", async (ev) => {
      ev.stopPropagation();
      const ok = await copy(sha);
      T.toast(ok ? `sha256 copied: ${sha}` : `sha256: ${sha}`, "ok");
    });
    return h("span", { class: "sha-cell" }, short, button);
  }

  let listing = null;
  /** The run's artifacts, fetched once for the tab and its count. */
  function list(runId) {
    if (!listing) {
      listing = api(`/api/v1/runs/${runId}/artifacts`).then((doc) => doc.artifacts || []);
      listing.catch(() => { listing = null; });
    }
    return listing;
  }

  class Tab {
    constructor(runId) {
      this.runId = runId;
      this.root = document.getElementById("artifacts-tree");
      this.preview = document.getElementById("artifact-preview");
      this.selected = null;
      this.loaded = false;
      this.request = 0;
    }

    async open() {
      if (this.loaded) return;
      this.loaded = true;
      let rows;
      try {
        rows = await list(this.runId);
      } catch (exc) {
        this.loaded = false;
        clear(this.root).append(h("p", { class: "query-error" }, exc.message));
        return;
      }
      const artifacts = rows.slice().sort((a, b) => a.path.localeCompare(b.path));
      document.getElementById("artifact-count").textContent = artifacts.length || "";
      const top = tree(artifacts);
      clear(this.root);
      if (!artifacts.length) {
        this.root.append(h("p", { class: "empty" }, "This run has no artifacts."));
        this.preview.hidden = true;
        return;
      }
      const reload = h("button", { type: "button", class: "btn small", id: "artifacts-reload", title: "list the files again (a live run adds more)" }, "Reload");
      reload.addEventListener("click", () => { listing = null; this.loaded = false; this.open(); });
      this.root.append(h("div", { class: "artifact-total" },
        h("span", { class: "muted small" }, `${plural(artifacts.length, "file")}, ${T.fmtBytes(top.size)}`), reload));
      this.root.append(this.children(top, 0));
      const again = this.selected && artifacts.find((a) => a.path === this.selected.path);
      this.select(again || artifacts.find((a) => !a.path.startsWith("media/")) || artifacts[0]);
    }

    /** A folder's contents: subfolders first (built when first opened), then files. */
    children(node, depth) {
      const list = h("ul", { class: "artifact-list", role: depth ? "group" : "tree" });
      for (const [name, sub] of [...node.dirs.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
        const details = h("details", { class: "artifact-dir", dataset: { dir: name } },
          h("summary", {}, h("span", { class: "artifact-name" }, `${name}/`),
            h("span", { class: "muted small" }, ` ${plural(sub.count, "file")} · ${T.fmtBytes(sub.size)}`)));
        let built = false;
        const build = () => {
          if (built) return;
          built = true;
          details.append(this.children(sub, depth + 1));
        };
        details.addEventListener("toggle", () => { if (details.open) build(); });
        if (sub.count <= OPEN_LIMIT && depth < 3) { details.open = true; build(); }
        list.append(h("li", { role: "treeitem" }, details));
      }
      for (const a of node.files) list.append(this.fileRow(a));
      return list;
    }

    fileRow(a) {
      const name = a.path.slice(a.path.lastIndexOf("/") + 1);
      const button = h("button", { type: "button", class: "artifact-file", title: a.path }, name);
      button.addEventListener("click", () => this.select(a));
      const row = h("li", { role: "treeitem", class: "artifact-row", dataset: { path: a.path } },
        button,
        h("span", { class: "num muted small artifact-size" }, T.fmtBytes(a.size)),
        shaCell(a.sha256),
        h("a", { class: "btn small artifact-download", href: url(this.runId, a.path), download: name }, "Download"));
      a.row = row;
      return row;
    }

    async select(a) {
      if (this.selected && this.selected.row) this.selected.row.classList.remove("selected");
      this.selected = a;
      if (a.row) a.row.classList.add("selected");
      const request = ++this.request;
      const kind = previewKind(a);
      const body = h("div", { class: "preview-body", dataset: { kind } });
      const href = url(this.runId, a.path);
      clear(this.preview).append(
        h("div", { class: "preview-head" },
          h("h3", {}, h("code", {}, a.path)),
          h("a", { class: "btn small", href, download: a.path.slice(a.path.lastIndexOf("/") + 1) }, "Download")),
        h("dl", { class: "preview-facts" },
          h("dt", {}, "Size"), h("dd", {}, `${T.fmtBytes(a.size)} (${a.size} bytes)`),
          h("dt", {}, "Type"), h("dd", {}, a.media_type || "unknown"),
          h("dt", {}, "sha256"), h("dd", {}, shaCell(a.sha256)),
          a.step === null || a.step === undefined ? null : [h("dt", {}, "Step"), h("dd", {}, String(a.step))],
          h("dt", {}, "Logged"), h("dd", {}, T.fmtTime(a.created_at))),
        body);
      this.preview.hidden = false;
      this.preview.dataset.path = a.path;
      this.preview.dataset.kind = kind;
      // "loading" until the body holds what it will show (a text file's preview is fetched).
      this.preview.dataset.state = "loading";
      const done = () => { if (request === this.request) this.preview.dataset.state = "ready"; };
      if (kind === "image") {
        body.append(h("img", { class: "preview-image", src: href, alt: a.path }));
      } else if (kind === "pdf") {
        body.append(h("p", {}, h("a", { href, target: "_blank", rel: "noopener noreferrer", class: "pdf-link" }, "Open the PDF"),
          h("span", { class: "muted" }, " (in a new tab, or downloaded, as your browser does)")));
      } else if (kind === "none") {
        body.append(h("p", { class: "empty" }, "No preview for this type of file: download it."));
      } else if (a.size > PREVIEW_BYTES) {
        body.append(h("p", { class: "empty" }, `Too large to preview (${T.fmtBytes(a.size)}, over ${T.fmtBytes(PREVIEW_BYTES)}): download it.`));
      } else {
        body.append(h("p", { class: "muted" }, "loading…"));
        let text;
        try {
          const response = await fetch(href, { credentials: "same-origin" });
          if (!response.ok) throw new Error(`HTTP ${response.status}`);
          text = await response.text();
        } catch (exc) {
          if (request === this.request) clear(body).append(h("p", { class: "query-error" }, `cannot load ${a.path}: ${exc.message}`));
          done();
          return;
        }
        if (request !== this.request) return;
        clear(body).append(render(kind, text));
      }
      done();
    }
  }

  /** The preview of a text file of the given kind. */
  function render(kind, text) {
    if (kind === "json") {
      try {
        return h("pre", { class: "preview-text json" }, JSON.stringify(JSON.parse(text), null, 2));
      } catch (exc) {
        return h("div", {}, h("p", { class: "query-error" }, `not valid JSON (${exc.message}): shown as text`),
          h("pre", { class: "preview-text" }, text));
      }
    }
    if (kind === "csv" || kind === "tsv") return table(parseDelimited(text, kind === "tsv" ? "\t" : ",", PREVIEW_ROWS + 1));
    return h("pre", { class: "preview-text" }, text);
  }

  /** Rows of a CSV/TSV text (RFC 4180 quoting), at most `limit` rows; `more` when cut. */
  function parseDelimited(text, sep, limit) {
    const rows = [];
    let row = [];
    let field = "";
    let quoted = false;
    let i = 0;
    for (; i < text.length && rows.length < limit; i += 1) {
      const ch = text[i];
      if (quoted) {
        if (ch === '"' && text[i + 1] === '"') { field += '"'; i += 1; } else if (ch === '"') quoted = false;
        else field += ch;
      } else if (ch === '"' && field === "") quoted = true;
      else if (ch === sep) { row.push(field); field = ""; } else if (ch === "\n" || ch === "\r") {
        if (ch === "\r" && text[i + 1] === "\n") i += 1;
        row.push(field);
        rows.push(row);
        row = [];
        field = "";
      } else field += ch;
    }
    if (rows.length < limit && (field !== "" || row.length)) { row.push(field); rows.push(row); }
    const more = i < text.length && text.slice(i).trim() !== "";
    return { rows, more };
  }

  function table({ rows, more }) {
    if (!rows.length) return h("p", { class: "empty" }, "Empty file.");
    const [head, ...body] = rows;
    const shown = body.slice(0, PREVIEW_ROWS);
    return h("div", { class: "table-wrap preview-table-wrap" },
      h("table", { class: "data-table compact preview-table" },
        h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))),
        h("tbody", {}, shown.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))))),
      more || body.length > PREVIEW_ROWS
        ? h("p", { class: "muted small preview-more" }, `first ${shown.length} rows shown: download the file for all of them`)
        : null);
  }

  let tab = null;
  function open(runId) {
    if (!tab) tab = new Tab(runId);
    return tab.open();
  }

  return { open, list, previewKind, parseDelimited, tree };
})();
