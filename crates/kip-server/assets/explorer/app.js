// kip-nexus explorer. Plain browser JavaScript, no build step, no dependencies but
// cytoscape.js (vendored). Rule: every string from the memory goes into the page as
// text (textContent / text nodes), never as HTML; the page's CSP forbids inline
// scripts besides.
"use strict";

(function () {
  const KEY_STORE = "kip-explorer-key";
  const state = {
    config: { auth_required: false, read_only: true, writes_enabled: false },
    key: sessionStorage.getItem(KEY_STORE) || "",
    cy: null,
    graphFrom: null,
  };

  // ---- DOM helpers ---------------------------------------------------------------

  // el("tag", {class, href, ...attrs, on: {click: fn}}, children...): children that
  // are strings become text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === "on") {
          for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
        } else if (k === "class") {
          node.className = v;
        } else if (k === "text") {
          node.textContent = v;
        } else {
          node.setAttribute(k, v === true ? "" : String(v));
        }
      }
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const $ = (id) => document.getElementById(id);
  const main = () => $("main");

  function show(...nodes) {
    const m = main();
    m.replaceChildren(...nodes);
  }

  function banner(text, isError) {
    const b = $("banner");
    if (!text) { b.hidden = true; return; }
    b.hidden = false;
    b.className = isError ? "error" : "";
    b.textContent = text;
  }

  function pretty(v) {
    if (typeof v === "string") return v;
    try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); }
  }

  function short(v, n) {
    const s = typeof v === "string" ? v : JSON.stringify(v);
    if (s === undefined) return "";
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  // A number for display: float noise rounded off (0.6649999999999999 -> 0.665, from a
  // decay of 0.7 by 0.95), at most 6 significant digits; the exact value is the cell's
  // title where it differs.
  function num(v) {
    if (typeof v !== "number" || !Number.isFinite(v) || Number.isInteger(v)) return String(v);
    return String(Number(v.toPrecision(6)));
  }

  function valueCell(v) {
    if (typeof v === "number" && num(v) !== String(v)) return el("td", { title: String(v) }, num(v));
    if (v === null || typeof v !== "object") return el("td", null, v === null ? "null" : String(v));
    return el("td", null, el("pre", null, pretty(v)));
  }

  function kvTable(obj, cls) {
    const rows = Object.entries(obj || {}).map(([k, v]) => el("tr", null, el("td", null, k), valueCell(v)));
    if (!rows.length) return el("p", { class: "muted" }, "none");
    return el("table", { class: "kv " + (cls || "") }, el("tbody", null, rows));
  }

  // ---- routing -------------------------------------------------------------------

  function hashRoute() {
    const h = location.hash.replace(/^#\/?/, "");
    const [path, qs] = h.split("?");
    return { view: path || "overview", params: new URLSearchParams(qs || "") };
  }

  function go(view, params) {
    const qs = params ? new URLSearchParams(params).toString() : "";
    location.hash = "#/" + view + (qs ? "?" + qs : "");
  }

  function conceptHref(c) {
    if (!c) return "#/overview";
    const p = c.id ? { id: c.id } : { type: c.type, name: c.name };
    return "#/concept?" + new URLSearchParams(p).toString();
  }

  function conceptLink(c) {
    if (!c) return el("span", { class: "muted" }, "?");
    if (c.predicate !== undefined) {
      // A proposition at the end of a higher-order statement.
      return el("span", null, "(", c.subject || "?", " ", el("code", null, c.predicate), " ", c.object || "?", ")");
    }
    return el("span", null,
      el("a", { href: conceptHref(c), class: "concept-link" }, c.name === undefined ? c.id : c.name),
      el("span", { class: "type-tag" }, c.type || ""));
  }

  // ---- API -----------------------------------------------------------------------

  class ApiError extends Error {
    constructor(body, status) {
      super((body && body.message) || "request failed");
      this.body = body || {};
      this.status = status;
    }
  }

  async function api(path, options) {
    const opts = Object.assign({ headers: {} }, options || {});
    opts.headers = Object.assign({}, opts.headers);
    if (state.key) opts.headers["Authorization"] = "Bearer " + state.key;
    let resp;
    try {
      resp = await fetch(path, opts);
    } catch (e) {
      throw new ApiError({ code: "NETWORK", message: "the server cannot be reached: " + e.message }, 0);
    }
    let body = null;
    try { body = await resp.json(); } catch (_) { body = null; }
    if (resp.status === 401) {
      askKey(state.key ? "The key was refused. Enter the right one." : null);
      throw new ApiError((body && body.error) || { code: "UNAUTHORIZED", message: "an API key is required" }, 401);
    }
    if (!resp.ok) throw new ApiError((body && body.error) || { code: "HTTP_" + resp.status, message: resp.statusText }, resp.status);
    if (body && body.error) throw new ApiError(body.error, resp.status);
    return body;
  }

  function get(path, params) {
    const qs = params ? "?" + new URLSearchParams(params).toString() : "";
    return api(path + qs);
  }

  // A KIP call from the console or a correction: {command, parameters, write}.
  function kip(command, parameters, write) {
    return api("/explorer/api/kip", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ command, parameters: parameters || {}, write: !!write }),
    });
  }

  function errorBox(err, commandText) {
    const e = (err && err.body) || {};
    const box = el("div", { class: "error-box", role: "alert" },
      el("div", null, el("span", { class: "code" }, e.code || "ERROR"), e.message || String(err.message || err)));
    if (e.line && e.column && commandText) {
      const lines = commandText.split("\n");
      const line = lines[e.line - 1];
      if (line !== undefined) {
        const caret = " ".repeat(Math.max(0, e.column - 1)) + "^";
        box.appendChild(el("div", { class: "where-label" }, "at line " + e.line + ", column " + e.column + ":"));
        box.appendChild(el("pre", { class: "where" }, line + "\n" + caret));
      }
    }
    if (e.hint) box.appendChild(el("div", { class: "hint" }, "Hint: " + e.hint));
    return box;
  }

  // ---- API key -------------------------------------------------------------------

  function askKey(message) {
    const d = $("key-dialog");
    if (d.open) return;
    $("key-input").value = state.key;
    const p = d.querySelector("p");
    if (message) p.textContent = message;
    d.showModal();
  }

  function setupKeyDialog() {
    $("key-button").addEventListener("click", () => askKey());
    $("key-dialog").addEventListener("close", () => {
      const v = $("key-dialog").returnValue;
      if (v === "save") {
        state.key = $("key-input").value.trim();
        sessionStorage.setItem(KEY_STORE, state.key);
      } else if (v === "forget") {
        state.key = "";
        sessionStorage.removeItem(KEY_STORE);
      } else {
        return;
      }
      updateKeyButton();
      route();
    });
  }

  function updateKeyButton() {
    const b = $("key-button");
    b.hidden = !state.config.auth_required;
    b.textContent = state.key ? "API key ✓" : "API key";
  }

  function canWrite() {
    return state.config.writes_enabled && !!state.key;
  }

  function writeNote() {
    if (state.config.read_only) return "This server is read-only: the explorer cannot change the memory.";
    if (!state.config.writes_enabled) return "Corrections are off: the explorer writes only on a server started with --api-key.";
    if (!state.key) return "Enter the API key to correct the memory.";
    return null;
  }

  // Shows the command, asks for confirmation, runs it as a write. Resolves to the
  // response, or null when cancelled.
  function confirmWrite(command, parameters) {
    return new Promise((resolve, reject) => {
      if (!canWrite()) { reject(new ApiError({ code: "KIP_3004", message: writeNote() }, 403)); return; }
      const d = $("confirm-dialog");
      $("confirm-command").textContent = command;
      $("confirm-params").textContent = "parameters: " + JSON.stringify(parameters || {}, null, 2);
      const onClose = () => {
        d.removeEventListener("close", onClose);
        if (d.returnValue !== "yes") { resolve(null); return; }
        kip(command, parameters, true).then(resolve, reject);
      };
      d.returnValue = "";
      d.addEventListener("close", onClose);
      d.showModal();
    });
  }

  // ---- overview ------------------------------------------------------------------

  async function viewOverview() {
    show(el("p", { class: "muted" }, "Loading the overview…"));
    const o = await get("/explorer/api/overview");
    const primer = o.primer || {};
    const id = primer.identity || {};
    const idCard = el("div", { class: "card", id: "identity" },
      el("h2", null, "Identity: ", id.name || "$self"),
      id.identity_narrative ? el("p", null, id.identity_narrative) : null,
      el("p", { class: "muted" }, "Search modes: ", (id.search_modes || ["keyword"]).join(", ")),
      el("p", null,
        el("strong", null, String(o.totals.concepts)), " concepts, ",
        el("strong", null, String(o.totals.propositions)), " propositions"));
    const domains = (primer.domain_map || []).map((d) => el("tr", null,
      el("td", null, el("a", { href: conceptHref({ type: "Domain", name: d.name }) }, d.name)),
      el("td", { class: "num" }, String(d.member_count ?? "")),
      el("td", null, short(d.description || "", 140))));
    const typeRows = (rows, isConcept) => rows.map((t) => el("tr", null,
      el("td", null,
        isConcept
          ? el("a", { href: "#/list?" + new URLSearchParams({ type: t.name }).toString(), class: "type-list" }, t.name)
          : el("code", null, t.name),
        " ",
        el("a", {
          class: "muted definition",
          href: conceptHref({ type: isConcept ? "$ConceptType" : "$PropositionType", name: t.name }),
        }, "definition")),
      el("td", { class: "num" }, t.count === null ? "?" : String(t.count))));
    const health = el("div", { id: "health" }, el("p", { class: "muted" }, "Loading the health report…"));
    show(
      el("h1", null, "What this memory holds"),
      idCard,
      el("h2", null, "Domains"),
      el("table", { id: "domains" }, el("thead", null, el("tr", null, el("th", null, "Domain"), el("th", { class: "num" }, "Members"), el("th", null, "Description"))), el("tbody", null, domains)),
      el("div", { class: "grid" },
        el("div", null, el("h2", null, "Concept types"),
          el("table", { id: "concept-types" }, el("thead", null, el("tr", null, el("th", null, "Type"), el("th", { class: "num" }, "Concepts"))), el("tbody", null, typeRows(o.concept_types || [], true)))),
        el("div", null, el("h2", null, "Predicates"),
          el("table", { id: "proposition-types" }, el("thead", null, el("tr", null, el("th", null, "Predicate"), el("th", { class: "num" }, "Propositions"))), el("tbody", null, typeRows(o.proposition_types || [], false))))),
      el("h2", null, "Health"),
      health);
    try {
      const h = await get("/memory/health");
      health.replaceChildren(healthTable(h));
    } catch (e) {
      health.replaceChildren(errorBox(e));
    }
  }

  function healthTable(h) {
    const rows = [];
    for (const [k, v] of Object.entries(h)) {
      if (k === "domains" && Array.isArray(v)) continue;
      rows.push(el("tr", null, el("td", null, k.replace(/_/g, " ")), valueCell(v)));
    }
    return el("table", { class: "kv" }, el("tbody", null, rows));
  }

  // ---- the concepts of a type ------------------------------------------------------

  function viewList(params) {
    const type = params.get("type") || "";
    const body = el("tbody");
    const more = el("button", { type: "button", class: "secondary", id: "list-more", hidden: true }, "More");
    const status = el("p", { class: "muted", id: "list-status" });
    show(el("h1", null, "Concepts of type ", el("span", { class: "type" }, type)),
      el("table", { id: "list" }, el("thead", null, el("tr", null,
        el("th", null, "Name"), el("th", null, "Description"), el("th", null, "Provenance"))), body),
      status, more);
    pager(more, status, async (cursor) => {
      const args = { type, limit: 100 };
      if (cursor) args.cursor = cursor;
      const r = await get("/explorer/api/list", args);
      for (const c of r.items || []) {
        const desc = c.attributes && (c.attributes.description || c.attributes.content);
        body.appendChild(el("tr", null, el("td", null, conceptLink(c)),
          el("td", null, desc ? short(desc, 160) : ""), el("td", { class: "muted" }, provenance(c.metadata))));
      }
      return { next: r.next_cursor, status: body.children.length + " of " + (r.total ?? "?") + " shown." };
    });
  }

  // Loads pages into a view: `fetchPage(cursor)` appends one page and resolves to
  // {next, status}; the "more" button asks for the next page while there is one.
  function pager(more, status, fetchPage) {
    let cursor = null;
    const load = async () => {
      more.disabled = true;
      try {
        const r = await fetchPage(cursor);
        cursor = r.next;
        more.hidden = !cursor;
        status.textContent = r.status;
      } catch (e) {
        status.replaceChildren(errorBox(e));
      } finally {
        more.disabled = false;
      }
    };
    more.addEventListener("click", load);
    load();
  }

  // ---- search --------------------------------------------------------------------

  function viewSearch(params) {
    const q = params.get("q") || "";
    const form = el("form", { id: "search-form", class: "row" },
      el("input", { id: "search-q", type: "search", value: q, placeholder: "a name, a word, a meaning…", size: 40 }),
      el("select", { id: "search-kind", "aria-label": "kind" },
        el("option", { value: "concept" }, "concepts"),
        el("option", { value: "proposition" }, "propositions")),
      el("select", { id: "search-mode", "aria-label": "mode" },
        el("option", { value: "" }, "default mode"),
        el("option", { value: "keyword" }, "keyword"),
        el("option", { value: "semantic" }, "semantic"),
        el("option", { value: "hybrid" }, "hybrid")),
      el("input", { id: "search-type", type: "text", placeholder: "type (optional)", size: 14, value: params.get("type") || "" }),
      el("button", { type: "submit" }, "Search"));
    form.querySelector("#search-kind").value = params.get("kind") || "concept";
    form.querySelector("#search-mode").value = params.get("mode") || "";
    const results = el("div", { id: "search-results" });
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const p = { q: $("search-q").value, kind: $("search-kind").value };
      if ($("search-mode").value) p.mode = $("search-mode").value;
      if ($("search-type").value.trim()) p.type = $("search-type").value.trim();
      go("search", p);
    });
    show(el("h1", null, "Search"), form, results);
    if (q.trim()) runSearch(params, results);
  }

  async function runSearch(params, results) {
    results.replaceChildren(el("p", { class: "muted" }, "Searching…"));
    const args = { q: params.get("q"), kind: params.get("kind") || "concept", limit: 30 };
    if (params.get("mode")) args.mode = params.get("mode");
    if (params.get("type")) args.type = params.get("type");
    try {
      const r = await get("/explorer/api/search", args);
      const hits = r.hits || [];
      if (!hits.length) { results.replaceChildren(el("p", { class: "muted" }, "Nothing found.")); return; }
      results.replaceChildren(...hits.map((h) => {
        const score = h.metadata && typeof h.metadata._score === "number" ? h.metadata._score.toFixed(3) : "";
        if (h.predicate !== undefined) {
          return el("div", { class: "hit" },
            el("span", { class: "score" }, score), " ",
            conceptLink(h.subject_element || { id: h.subject }), " ",
            el("code", null, h.predicate), " ",
            conceptLink(h.object_element || { id: h.object }));
        }
        const desc = h.attributes && (h.attributes.description || h.attributes.content);
        return el("div", { class: "hit" },
          el("span", { class: "score" }, score), " ", conceptLink(h),
          desc ? el("div", { class: "desc" }, short(desc, 220)) : null);
      }));
    } catch (e) {
      results.replaceChildren(errorBox(e));
    }
  }

  // ---- concept page --------------------------------------------------------------

  function provenance(meta) {
    const m = meta || {};
    const parts = [];
    if (m.source !== undefined) parts.push("source: " + short(m.source, 60));
    if (m.author !== undefined) parts.push("author: " + short(m.author, 40));
    if (m.confidence !== undefined) parts.push("confidence " + num(m.confidence));
    if (m.memory_strength !== undefined) parts.push("strength " + num(m.memory_strength));
    if (m._version !== undefined) parts.push("v" + m._version);
    if (m._updated_at !== undefined) parts.push(m._updated_at);
    return parts.join(" · ");
  }

  function linkTable(items, direction, onChange) {
    if (!items.length) return el("p", { class: "muted" }, "none");
    const rows = items.map(({ link, other }) => {
      const del = canWrite()
        ? el("button", {
          class: "small danger", type: "button", title: "Delete this proposition",
          on: {
            click: async () => {
              try {
                const r = await confirmWrite("DELETE PROPOSITIONS ?link WHERE { ?link (id: :id) }", { id: link.id });
                if (r) onChange("Deleted the proposition " + link.id + ".");
              } catch (e) { onChange(null, e); }
            },
          },
        }, "Delete")
        : null;
      return el("tr", { "data-link": link.id },
        el("td", null, el("code", null, link.predicate)),
        el("td", null, conceptLink(other)),
        el("td", { class: "muted" }, provenance(link.metadata)),
        el("td", null, Object.keys(link.attributes || {}).length ? el("pre", null, pretty(link.attributes)) : ""),
        el("td", null, del));
    });
    return el("table", { class: "links " + direction },
      el("thead", null, el("tr", null,
        el("th", null, "Predicate"), el("th", null, direction === "outgoing" ? "Object" : "Subject"),
        el("th", null, "Provenance"), el("th", null, "Attributes"), el("th", null, ""))),
      el("tbody", null, rows));
  }

  async function viewConcept(params) {
    const args = {};
    for (const k of ["id", "type", "name"]) if (params.get(k) !== null) args[k] = params.get(k);
    show(el("p", { class: "muted" }, "Loading…"));
    let v;
    try {
      v = await get("/explorer/api/concept", args);
    } catch (e) {
      show(el("h1", null, "Concept"), errorBox(e));
      return;
    }
    const c = v.concept;
    const status = el("div", { id: "concept-status" });
    const onChange = (message, err) => {
      if (err) { status.replaceChildren(errorBox(err)); return; }
      viewConcept(new URLSearchParams({ id: c.id })).then(() => {
        $("concept-status").replaceChildren(el("div", { class: "ok-box", role: "status" }, message));
      });
    };
    const note = writeNote();
    const actions = el("div", { class: "row" },
      el("a", { href: "#/graph?" + new URLSearchParams({ id: c.id }).toString(), class: "button-link", id: "open-graph" }, "Show in the graph"),
      canWrite() ? el("button", {
        type: "button", class: "danger small", id: "delete-concept",
        on: {
          click: async () => {
            try {
              const r = await confirmWrite("DELETE CONCEPT ?c DETACH WHERE { ?c {id: :id} }", { id: c.id });
              if (r) { go("overview"); banner("Deleted " + c.type + " " + c.name + " and its propositions."); }
            } catch (e) { status.replaceChildren(errorBox(e)); }
          },
        },
      }, "Delete this concept") : null);
    const correct = canWrite() ? correctionForm(c, onChange) : el("p", { class: "muted" }, note);
    const about = (v.about || []).map(({ statement, other }) => el("tr", null,
      el("td", null, el("code", null, statement.subject)),
      el("td", null, el("code", null, statement.predicate)),
      el("td", null, conceptLink(other)),
      el("td", { class: "muted" }, provenance(statement.metadata))));
    const claims = (v.claims || []).map((a) => el("tr", null,
      el("td", null, el("code", null, a.end === "subject" ? a.predicate + " → " + JSON.stringify(a.other) : JSON.stringify(a.other) + " → " + a.predicate)),
      el("td", null, a.stance), el("td", null, a.mode),
      el("td", { class: "num" }, a.confidence === null ? "" : String(a.confidence)),
      el("td", null, el("code", null, a.asserted_by || "")),
      el("td", null, a.status),
      el("td", null, (a.evidence || []).map((e) => e.id + " (" + e.role + ")").join(", ")),
      el("td", null, a.belief)));
    const total = (t, n) => (t === null || t === undefined ? "" : " (" + n + " of " + t + ")");
    show(
      el("h1", { id: "concept-title" }, c.name, el("span", { class: "type" }, c.type)),
      el("p", { class: "muted" }, c.id, " · ", provenance(c.metadata)),
      actions, status,
      el("div", { class: "grid" },
        el("div", null, el("h2", null, "Attributes"), kvTable(c.attributes, "attributes")),
        el("div", null, el("h2", null, "Metadata"), kvTable(c.metadata, "metadata"),
          el("h3", null, "Domains"),
          (v.domains || []).length
            ? el("p", { id: "domains-of" }, ...v.domains.map((d) => el("a", { class: "pill", href: conceptHref({ type: "Domain", name: d }) }, d)))
            : el("p", { class: "muted" }, "none"))),
      el("h2", null, "Outgoing propositions", total(v.outgoing.total, v.outgoing.items.length)),
      linkTable(v.outgoing.items, "outgoing", onChange),
      el("h2", null, "Incoming propositions", total(v.incoming.total, v.incoming.items.length)),
      linkTable(v.incoming.items, "incoming", onChange),
      el("h2", null, "Statements about its propositions"),
      about.length
        ? el("table", { id: "about" }, el("thead", null, el("tr", null, el("th", null, "About"), el("th", null, "Predicate"), el("th", null, "Other end"), el("th", null, "Provenance"))), el("tbody", null, about))
        : el("p", { class: "muted" }, "none"),
      el("h2", null, "Claims (KIP 2.0 assertions)"),
      claims.length
        ? el("table", { id: "claims" }, el("thead", null, el("tr", null, el("th", null, "Proposition"), el("th", null, "Stance"), el("th", null, "Mode"), el("th", { class: "num" }, "Confidence"), el("th", null, "Asserted by"), el("th", null, "Status"), el("th", null, "Evidence"), el("th", null, "Belief"))), el("tbody", null, claims))
        : el("p", { class: "muted" }, "none"),
      el("h2", null, "Correct this concept"), correct);
  }

  function correctionForm(c, onChange) {
    const keys = Object.keys(c.attributes || {});
    const keyInput = el("input", { id: "fix-key", list: "fix-keys", placeholder: "attribute", size: 16 });
    const valueInput = el("textarea", { id: "fix-value", rows: 2, placeholder: "new value (JSON, or plain text)" });
    const form = el("form", { id: "fix-form" },
      el("datalist", { id: "fix-keys" }, keys.map((k) => el("option", { value: k }))),
      el("div", { class: "row" }, keyInput,
        el("button", { type: "submit", id: "fix-set" }, "Set attribute"),
        el("button", { type: "button", class: "secondary", id: "fix-remove" }, "Remove attribute")),
      valueInput);
    keyInput.addEventListener("change", () => {
      if (keys.includes(keyInput.value)) valueInput.value = pretty(c.attributes[keyInput.value]);
    });
    const keyOf = () => keyInput.value.trim();
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const key = keyOf();
      if (!key) return;
      let value = valueInput.value;
      try { value = JSON.parse(value); } catch (_) { /* plain text */ }
      const command = "UPDATE ?c SET ATTRIBUTES { " + JSON.stringify(key) + ": :value } WHERE { ?c {id: :id} }";
      try {
        const r = await confirmWrite(command, { id: c.id, value });
        if (r) onChange("Set " + key + ".");
      } catch (e) { onChange(null, e); }
    });
    form.querySelector("#fix-remove").addEventListener("click", async () => {
      const key = keyOf();
      if (!key) return;
      const command = "DELETE ATTRIBUTES {" + JSON.stringify(key) + "} FROM ?c WHERE { ?c {id: :id} }";
      try {
        const r = await confirmWrite(command, { id: c.id });
        if (r) onChange("Removed " + key + ".");
      } catch (e) { onChange(null, e); }
    });
    return form;
  }

  // ---- graph ---------------------------------------------------------------------

  const MAX_NODES = 300;
  const PER_EXPAND = 25;

  // Distinct colours, given to types in the order they appear in a graph.
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295"];

  function viewGraph(params) {
    const start = params.get("id") ? { id: params.get("id") }
      : params.get("type") ? { type: params.get("type"), name: params.get("name") || "" } : null;
    const info = el("p", { id: "graph-info", class: "muted" },
      "Click a node to expand its neighbours; double-click to open its page. At most " + MAX_NODES + " nodes are shown.");
    const legend = el("div", { class: "legend", id: "graph-legend" });
    const container = el("div", { id: "graph" });
    const startForm = el("form", { class: "row", id: "graph-start" },
      el("input", { id: "graph-type", placeholder: "type", size: 12, value: params.get("type") || "" }),
      el("input", { id: "graph-name", placeholder: "name", size: 24, value: params.get("name") || "" }),
      el("button", { type: "submit" }, "Start here"));
    startForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      go("graph", { type: $("graph-type").value.trim(), name: $("graph-name").value });
    });
    show(el("h1", null, "Neighbourhood graph"), startForm, info, legend, container);
    if (typeof window.cytoscape !== "function") {
      info.replaceChildren(errorBox({ body: { code: "ERROR", message: "the graph library did not load" } }));
      return;
    }
    const cy = window.cytoscape({
      container,
      minZoom: 0.05,
      maxZoom: 1.6,
      style: [
        { selector: "node", style: { "background-color": "data(color)", label: "data(label)", "font-size": 10, "text-valign": "bottom", "text-margin-y": 3, width: 22, height: 22 } },
        { selector: "node.proposition", style: { shape: "diamond", width: 14, height: 14 } },
        { selector: "node.start", style: { "border-width": 3, "border-color": "#1d2433" } },
        { selector: "node.expanded", style: { "border-width": 2, "border-color": "#888" } },
        { selector: "edge", style: { width: 1.4, "curve-style": "bezier", "target-arrow-shape": "triangle", label: "data(label)", "font-size": 8, color: "#555", "text-rotation": "autorotate", "line-color": "#aab", "target-arrow-color": "#aab" } },
      ],
    });
    state.cy = cy;
    // For end-to-end tests and the curious: the graph of the current view.
    window.kipExplorerGraph = cy;
    const types = new Map();
    const addNode = (e, classes) => {
      if (!e || !e.id) return false;
      if (cy.getElementById(e.id).nonempty()) return true;
      if (cy.nodes().length >= MAX_NODES) return false;
      const isProp = e.predicate !== undefined;
      const type = isProp ? "(proposition)" : e.type;
      if (!types.has(type)) {
        types.set(type, PALETTE[types.size % PALETTE.length]);
        const swatch = el("i");
        swatch.style.background = types.get(type);
        legend.appendChild(el("span", null, swatch, type));
      }
      cy.add({
        group: "nodes",
        data: { id: e.id, label: isProp ? e.predicate : short(e.name, 28), color: types.get(type), type: e.type, name: e.name },
        classes: (isProp ? "proposition " : "") + (classes || ""),
      });
      return true;
    };
    const addEdge = (link) => {
      if (cy.getElementById("e" + link.id).nonempty()) return;
      if (cy.getElementById(link.subject).empty() || cy.getElementById(link.object).empty()) return;
      cy.add({ group: "edges", data: { id: "e" + link.id, source: link.subject, target: link.object, label: link.predicate } });
    };
    const expand = async (ref, classes) => {
      let v;
      try {
        v = await get("/explorer/api/concept", Object.assign({ limit: PER_EXPAND }, ref));
      } catch (e) {
        info.replaceChildren(errorBox(e));
        return;
      }
      addNode(v.concept, classes);
      cy.getElementById(v.concept.id).addClass("expanded");
      let full = false;
      for (const { link, other } of v.outgoing.items.concat(v.incoming.items)) {
        if (!addNode(other)) { full = true; continue; }
        addEdge(link);
      }
      const shown = v.outgoing.items.length + v.incoming.items.length;
      const all = (v.outgoing.total || 0) + (v.incoming.total || 0);
      info.textContent = cy.nodes().length + " nodes, " + cy.edges().length + " edges. " +
        v.concept.name + ": " + shown + " of " + all + " propositions shown." +
        (full ? " The graph is full (" + MAX_NODES + " nodes): open a page to go on." : "");
      cy.layout({ name: "cose", animate: false, fit: true, padding: 30, randomize: false }).run();
    };
    cy.on("tap", "node", (ev) => {
      const n = ev.target;
      if (n.hasClass("proposition") || n.hasClass("expanded")) return;
      expand({ id: n.id() });
    });
    cy.on("dbltap", "node", (ev) => {
      const n = ev.target;
      if (!n.hasClass("proposition")) location.hash = conceptHref({ id: n.id() });
    });
    if (start) expand(start, "start");
    else info.textContent = "Choose a concept to start from (a type and a name), or open a concept's page and choose “Show in the graph”.";
  }

  // ---- console -------------------------------------------------------------------

  function resultView(result) {
    if (Array.isArray(result)) {
      if (!result.length) return el("p", { class: "muted" }, "no rows");
      // Columnar FIND: one array per expression.
      if (result.every(Array.isArray)) {
        const n = Math.max(...result.map((c) => c.length));
        const head = el("tr", null, result.map((_, i) => el("th", null, "column " + (i + 1))));
        const rows = [];
        for (let r = 0; r < n; r++) rows.push(el("tr", null, result.map((col) => cellOf(col[r]))));
        return el("table", { class: "result" }, el("thead", null, head), el("tbody", null, rows));
      }
      if (result.every((x) => x && typeof x === "object" && !Array.isArray(x))) {
        const cols = [];
        for (const x of result) for (const k of Object.keys(x)) if (!cols.includes(k)) cols.push(k);
        return el("table", { class: "result" },
          el("thead", null, el("tr", null, cols.map((k) => el("th", null, k)))),
          el("tbody", null, result.map((x) => el("tr", null, cols.map((k) => k === "name" && x.type ? el("td", null, conceptLink(x)) : valueCell(x[k]))))));
      }
      return el("table", { class: "result" }, el("tbody", null, result.map((x) => el("tr", null, valueCell(x)))));
    }
    if (result && typeof result === "object") return kvTable(result, "result");
    return el("pre", { class: "result" }, String(result));
  }

  function cellOf(x) {
    if (x && typeof x === "object" && x.type !== undefined && x.name !== undefined) return el("td", null, conceptLink(x));
    if (x && typeof x === "object" && x.predicate !== undefined) {
      return el("td", null, el("code", null, x.id + ": " + x.subject + " " + x.predicate + " " + x.object));
    }
    return valueCell(x === undefined ? null : x);
  }

  function viewConsole(params) {
    const command = el("textarea", { id: "console-command", rows: 8, spellcheck: "false", placeholder: "FIND(?c) WHERE { ?c {type: \"Person\"} } LIMIT 20" });
    command.value = params.get("command") || sessionStorage.getItem("kip-console") || "DESCRIBE PRIMER";
    const parameters = el("textarea", { id: "console-params", rows: 2, spellcheck: "false", placeholder: "parameters (JSON object, optional)" });
    const out = el("div", { id: "console-result" });
    const run = async (write) => {
      const text = command.value;
      sessionStorage.setItem("kip-console", text);
      let p = {};
      if (parameters.value.trim()) {
        try { p = JSON.parse(parameters.value); } catch (e) {
          out.replaceChildren(errorBox({ body: { code: "KIP_1001", message: "the parameters are not a JSON object: " + e.message } }));
          return;
        }
      }
      out.replaceChildren(el("p", { class: "muted" }, "Running…"));
      try {
        const r = write ? await confirmWrite(text, p) : await kip(text, p, false);
        if (r === null) { out.replaceChildren(el("p", { class: "muted" }, "Cancelled: nothing was changed.")); return; }
        const parts = [resultView(r.result)];
        if (r.next_cursor) parts.push(el("p", { class: "muted" }, "next_cursor: " + r.next_cursor));
        out.replaceChildren(...parts);
      } catch (e) {
        out.replaceChildren(errorBox(e, text));
      }
    };
    const note = writeNote();
    show(
      el("h1", null, "KIP console"),
      el("p", { class: "muted" }, "FIND, SEARCH, DESCRIBE and EXPORT run read-only. Calls made here are recorded in the audit log (interface “explorer”)."),
      command, parameters,
      el("div", { class: "row" },
        el("button", { type: "button", id: "console-run", on: { click: () => run(false) } }, "Run"),
        el("button", { type: "button", id: "console-write", class: "danger", disabled: !canWrite(), on: { click: () => run(true) } }, "Run as a write…"),
        note ? el("span", { class: "muted", id: "console-write-note" }, note) : null),
      out);
    command.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run(false); }
    });
  }

  // ---- audit log -----------------------------------------------------------------

  function viewLogs(params) {
    const f = {
      interface: params.get("interface") || "",
      outcome: params.get("outcome") || "",
      text: params.get("text") || "",
      writes: params.get("writes") === "1",
      day: params.get("day") || "",
      // The sleep cycle's statements (by $system) are hidden unless asked for.
      sleep: params.get("sleep") === "1",
    };
    const form = el("form", { class: "row", id: "logs-form" },
      el("label", null, "interface",
        el("select", { id: "logs-interface" }, ["", "mcp", "http", "cli", "brain", "sleep", "explorer"].map((i) => el("option", { value: i }, i || "any")))),
      el("label", null, "outcome",
        el("select", { id: "logs-outcome" }, ["", "ok", "error"].map((o) => el("option", { value: o }, o || "any")))),
      el("label", null, el("input", { type: "checkbox", id: "logs-writes", checked: f.writes }), "writes only"),
      el("label", { title: "The sleep cycle's statements, run as $system" }, el("input", { type: "checkbox", id: "logs-sleep", checked: f.sleep }), "sleep cycles"),
      el("input", { id: "logs-text", type: "search", placeholder: "text in the call", value: f.text }),
      el("label", null, "day (UTC)", el("input", { id: "logs-day", type: "date", value: f.day })),
      el("button", { type: "submit" }, "Filter"));
    form.querySelector("#logs-interface").value = f.interface;
    form.querySelector("#logs-outcome").value = f.outcome;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const p = {};
      if ($("logs-interface").value) p.interface = $("logs-interface").value;
      if ($("logs-outcome").value) p.outcome = $("logs-outcome").value;
      if ($("logs-writes").checked) p.writes = "1";
      if ($("logs-sleep").checked) p.sleep = "1";
      if ($("logs-text").value.trim()) p.text = $("logs-text").value.trim();
      if ($("logs-day").value) p.day = $("logs-day").value;
      go("logs", p);
    });
    const body = el("tbody");
    const more = el("button", { type: "button", class: "secondary", id: "logs-more", hidden: true }, "Older calls");
    const status = el("p", { class: "muted", id: "logs-status" });
    show(el("h1", null, "Audit log"),
      el("p", { class: "muted" }, "Every call made to the memory, newest first."),
      form,
      el("table", { id: "logs" }, el("thead", null, el("tr", null,
        el("th", null, "When (UTC)"), el("th", null, "Interface"), el("th", null, "Method"),
        el("th", null, "Call"), el("th", null, "Outcome"), el("th", { class: "num" }, "ms"))), body),
      status, more);
    pager(more, status, async (cursor) => {
      const args = { limit: 50 };
      if (f.interface) args.interface = f.interface;
      if (f.outcome) args.outcome = f.outcome;
      if (f.text) args.text = f.text;
      if (f.writes) args.writes = "1";
      if (!f.sleep && f.interface !== "sleep") args.hide_sleep = "1";
      if (/^\d{4}-\d{2}-\d{2}$/.test(f.day)) {
        const next = new Date(f.day + "T00:00:00Z");
        next.setUTCDate(next.getUTCDate() + 1);
        args.since = f.day;
        args.until = next.toISOString().slice(0, 10);
      }
      if (cursor) args.cursor = cursor;
      const r = await get("/explorer/api/logs", args);
      for (const rec of r.result) body.appendChild(logRow(rec));
      const shown = body.children.length;
      return {
        next: r.next_cursor,
        status: shown ? shown + " calls shown."
          : r.next_cursor ? "None of the last " + r.scanned + " calls examined matches: look further with “Older calls”."
            : "No call matches.",
      };
    });
  }

  function logRow(r) {
    const text = r.command !== undefined ? r.command
      : Array.isArray(r.commands) ? r.commands.join("\n---\n")
        : r.arguments !== undefined ? JSON.stringify(r.arguments) : "";
    const extra = [];
    if (r.parameters !== undefined) extra.push("parameters: " + JSON.stringify(r.parameters));
    if (r.dry_run) extra.push("dry run");
    const outcome = r.outcome === "ok"
      ? el("span", { class: "pill ok" }, "ok")
      : el("span", null, el("span", { class: "pill error" }, r.error_code || "error"), r.error ? short(r.error, 120) : "");
    return el("tr", { "data-id": r.id },
      el("td", null, (r.timestamp || "").replace("T", " ").replace("Z", "")),
      el("td", null, r.interface || ""),
      el("td", null, r.method || ""),
      el("td", null, el("pre", null, short(text, 600)), extra.length ? el("div", { class: "muted" }, extra.join(" · ")) : null),
      el("td", null, outcome),
      el("td", { class: "num" }, r.duration_ms === undefined ? "" : String(r.duration_ms)));
  }

  // ---- main ----------------------------------------------------------------------

  const VIEWS = {
    overview: viewOverview,
    search: viewSearch,
    concept: viewConcept,
    list: viewList,
    graph: viewGraph,
    console: viewConsole,
    logs: viewLogs,
  };

  async function route() {
    const { view, params } = hashRoute();
    for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === view);
    const fn = VIEWS[view] || viewOverview;
    if (state.config.auth_required && !state.key) {
      show(el("h1", null, "This memory is protected"),
        el("p", null, "Enter the server's API key to see it."),
        el("button", { type: "button", on: { click: () => askKey() } }, "Enter the API key"));
      askKey();
      return;
    }
    try {
      await fn(params);
    } catch (e) {
      show(errorBox(e));
    }
  }

  async function start() {
    setupKeyDialog();
    $("quick-search").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const q = $("quick-q").value.trim();
      if (q) go("search", { q });
    });
    try {
      const r = await fetch("/explorer/api/config");
      state.config = await r.json();
      $("version").textContent = state.config.version || "";
    } catch (e) {
      banner("The server cannot be reached.", true);
    }
    if (state.config.read_only) banner("Read-only server: the memory can be viewed, not changed.");
    updateKeyButton();
    window.addEventListener("hashchange", route);
    route();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
