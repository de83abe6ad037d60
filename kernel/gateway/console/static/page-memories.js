// Memories: search (the memory tools' search), filter by category and scope, add, edit
// in place or move to another scope (PATCH, the text before kept as a version), show a
// memory's earlier versions, delete with an undo for 10 s (re-created through the API).
import { api, el, failed, localTime, notify, t } from "./app.js";

const CATEGORIES = ["user", "feedback", "project", "reference"];
const PAGE = 50;
const UNDO_MS = 10000;

let view = null;

function categoryWord(category) {
  return category ? t(`web.memories.category.${category}`) : "—";
}

function scopeWord(scope) {
  if (scope === "global") return t("web.memories.scope.global");
  const [kind, ...rest] = scope.split(":");
  const name = rest.join(":");
  return kind === "project" || kind === "persona" ? t(`web.memories.scope.${kind}`, { name }) : scope;
}

function categorySelect(attrs, chosen, blankWord) {
  return el(
    "select",
    attrs,
    el("option", { value: "" }, blankWord),
    ...CATEGORIES.map((c) => el("option", { value: c, selected: c === chosen }, categoryWord(c))),
  );
}

function query(offset) {
  const params = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
  const q = view.search.value.trim();
  if (q) params.set("q", q);
  if (view.category.value) params.set("category", view.category.value);
  if (view.scope.value) params.set("scope", view.scope.value);
  return `/memories?${params}`;
}

function learnScopes(rows) {
  let added = false;
  for (const row of rows) {
    if (!view.scopes.has(row.scope)) {
      view.scopes.add(row.scope);
      added = true;
    }
  }
  if (!added) return;
  const chosen = view.scope.value;
  const sorted = [...view.scopes].sort((a, b) => (a === "global" ? -1 : b === "global" ? 1 : a.localeCompare(b)));
  view.scope.replaceChildren(
    el("option", { value: "" }, t("web.memories.all_scopes")),
    ...sorted.map((s) => el("option", { value: s, selected: s === chosen }, scopeWord(s))),
  );
  view.scopeList.replaceChildren(...sorted.map((s) => el("option", { value: s })));
}

async function load(more = false) {
  const current = view;
  if (!current) return;
  const ticket = ++current.ticket;
  const offset = more ? view.shown : 0;
  let data;
  try {
    data = await api("GET", query(offset));
  } catch (error) {
    if (current === view && ticket === current.ticket) failed(error);
    return;
  }
  if (current !== view || ticket !== current.ticket) return; // left, or a newer search answered
  if (!more) view.body.replaceChildren();
  learnScopes(data.memories);
  for (const memory of data.memories) view.body.append(row(memory));
  view.shown = offset + data.memories.length;
  view.more.hidden = !data.more;
  view.empty.hidden = view.body.children.length > 0;
}

function cells(memory) {
  return [
    el("td", { class: "memory-text" }, memory.text),
    el("td", {}, categoryWord(memory.category)),
    el("td", {}, scopeWord(memory.scope)),
    el("td", { class: "muted nowrap" }, localTime(memory.created_at, true)),
    el(
      "td",
      { class: "actions" },
      el("button", { type: "button", "data-action": "edit", onclick: () => edit(memory) }, t("web.memories.edit")),
      el("button", { type: "button", "data-action": "history", onclick: () => history(memory) }, t("web.memories.history")),
      el(
        "button",
        { type: "button", class: "danger", "data-action": "delete", onclick: () => remove(memory) },
        t("web.memories.delete"),
      ),
    ),
  ];
}

function row(memory) {
  return el("tr", { "data-memory-id": memory.id }, ...cells(memory));
}

function rowOf(id) {
  return view.body.querySelector(`tr[data-memory-id="${id}"]`);
}

async function history(memory) {
  const tr = rowOf(memory.id);
  if (!tr) return;
  let data;
  try {
    data = await api("GET", `/memories/${memory.id}/versions`);
  } catch (error) {
    failed(error);
    return;
  }
  const cell = tr.querySelector(".memory-text");
  if (!cell) return;
  cell.querySelector(".memory-versions")?.remove();
  const lines = data.versions.length
    ? data.versions.map((v) =>
        el("li", {}, t("web.memories.version", { date: localTime(v.replaced_at, true), text: v.text, how: t(`web.memories.how.${v.how}`) })),
      )
    : [el("li", { class: "muted" }, t("web.memories.no_versions"))];
  cell.append(el("ul", { class: "memory-versions muted" }, ...lines));
}

function edit(memory) {
  const tr = rowOf(memory.id);
  if (!tr) return;
  const text = el("textarea", { class: "memory-edit", "aria-label": t("web.memories.text") }, memory.text);
  const category = categorySelect({ "aria-label": t("web.memories.category") }, memory.category, "—");
  const scope = el("input", {
    class: "memory-scope",
    list: "memory-scopes",
    value: memory.scope,
    "aria-label": t("web.memories.scope"),
    title: t("web.memories.scope_hint"),
    maxlength: 200,
  });
  const save = async () => {
    const change = {};
    if (text.value.trim() !== memory.text) change.text = text.value;
    if (category.value && category.value !== (memory.category || "")) change.category = category.value;
    if (scope.value.trim() && scope.value.trim() !== memory.scope) change.scope = scope.value.trim();
    if (!Object.keys(change).length) return tr.replaceChildren(...cells(memory));
    saveButton.disabled = true;
    try {
      const saved = await api("PATCH", `/memories/${memory.id}`, change);
      tr.replaceChildren(...cells(saved));
      notify(t("web.memories.saved"));
    } catch (error) {
      saveButton.disabled = false;
      failed(error);
    }
  };
  const saveButton = el("button", { type: "button", class: "primary", "data-action": "save", onclick: save }, t("web.memories.save"));
  tr.replaceChildren(
    el("td", { colspan: 2 }, text, category),
    el("td", {}, scope),
    el("td", { class: "muted nowrap" }, localTime(memory.created_at, true)),
    el(
      "td",
      { class: "actions" },
      saveButton,
      el("button", { type: "button", "data-action": "cancel", onclick: () => tr.replaceChildren(...cells(memory)) }, t("web.memories.cancel")),
    ),
  );
  text.focus();
}

async function remove(memory) {
  try {
    await api("DELETE", `/memories/${memory.id}`);
  } catch (error) {
    failed(error);
    return;
  }
  if (!view) return;
  const row = rowOf(memory.id);
  if (row) {
    row.remove();
    view.shown = Math.max(0, view.shown - 1); // "More" goes on from the right place
  }
  view.empty.hidden = view.body.children.length > 0;
  offerUndo(memory);
}

function offerUndo(memory) {
  clearTimeout(view.undoTimer);
  view.undone = memory;
  view.undoText.textContent = t("web.memories.deleted", { text: memory.text.slice(0, 60) });
  view.undoBar.hidden = false;
  view.undo.disabled = false;
  view.undoTimer = setTimeout(() => {
    view.undoBar.hidden = true;
    view.undone = null;
  }, UNDO_MS);
}

async function undo() {
  const memory = view.undone;
  if (!memory) return;
  view.undo.disabled = true;
  clearTimeout(view.undoTimer);
  const body = { text: memory.text, scope: memory.scope };
  if (memory.category) body.category = memory.category;
  try {
    await api("POST", "/memories", body);
  } catch (error) {
    if (view) view.undo.disabled = false;
    failed(error);
    return;
  }
  if (!view) return;
  view.undone = null;
  view.undoBar.hidden = true;
  notify(t("web.memories.restored"));
  await load();
}

async function add() {
  const text = view.newText.value;
  if (!text.trim()) {
    notify(t("web.memories.text_needed"), true);
    view.newText.focus();
    return;
  }
  const body = { text, scope: view.newScope.value.trim() || "global" };
  if (view.newCategory.value) body.category = view.newCategory.value;
  view.addButton.disabled = true;
  try {
    const saved = await api("POST", "/memories", body);
    if (!view) return;
    view.newText.value = "";
    const word = saved.created ? t("web.memories.added") : saved.updated ? t("web.memories.updated", { id: saved.id }) : t("web.memories.known", { id: saved.id });
    notify(word);
    await load();
  } catch (error) {
    failed(error);
  } finally {
    if (view) view.addButton.disabled = false;
  }
}

export async function render(main) {
  view = { ticket: 0, shown: 0, scopes: new Set(["global"]), undone: null, undoTimer: 0, searchTimer: 0 };
  view.search = el("input", {
    id: "memory-search",
    type: "search",
    placeholder: t("web.memories.search"),
    "aria-label": t("web.memories.search"),
    maxlength: 500,
    oninput: () => {
      clearTimeout(view.searchTimer);
      view.searchTimer = setTimeout(() => load(), 250);
    },
  });
  view.category = categorySelect(
    { id: "memory-category", "aria-label": t("web.memories.category"), onchange: () => load() },
    "",
    t("web.memories.all_categories"),
  );
  view.scope = el(
    "select",
    { id: "memory-scope", "aria-label": t("web.memories.scope"), onchange: () => load() },
    el("option", { value: "" }, t("web.memories.all_scopes")),
    el("option", { value: "global" }, scopeWord("global")),
  );
  view.scopeList = el("datalist", { id: "memory-scopes" }, el("option", { value: "global" }));
  view.newText = el("textarea", { id: "memory-new-text", placeholder: t("web.memories.new_text"), "aria-label": t("web.memories.new_text"), maxlength: 4000 });
  view.newCategory = categorySelect({ id: "memory-new-category", "aria-label": t("web.memories.category") }, "", "—");
  view.newScope = el("input", {
    id: "memory-new-scope",
    list: "memory-scopes",
    value: "global",
    "aria-label": t("web.memories.scope"),
    title: t("web.memories.scope_hint"),
    maxlength: 200,
  });
  view.addButton = el("button", { id: "memory-add", type: "button", class: "primary", onclick: add }, t("web.memories.add"));
  view.undoText = el("span", {});
  view.undo = el("button", { id: "memory-undo", type: "button", onclick: undo }, t("web.memories.undo"));
  view.undoBar = el("div", { class: "undo-bar", role: "status", hidden: true }, view.undoText, view.undo);
  view.body = el("tbody", {});
  view.empty = el("p", { class: "muted", hidden: true }, t("web.memories.empty"));
  view.more = el("button", { type: "button", class: "quiet", hidden: true, onclick: () => load(true) }, t("web.memories.more"));
  main.append(
    el("h2", {}, t("web.nav.memories")),
    el("div", { class: "row" }, view.search, view.category, view.scope),
    el(
      "div",
      { class: "card memory-new" },
      view.newText,
      el("div", { class: "row" }, view.newCategory, view.newScope, view.scopeList, view.addButton),
    ),
    view.undoBar,
    el(
      "div",
      { class: "scroll" },
      el(
        "table",
        { id: "memories" },
        el(
          "thead",
          {},
          el(
            "tr",
            {},
            el("th", {}, t("web.memories.text")),
            el("th", {}, t("web.memories.category")),
            el("th", {}, t("web.memories.scope")),
            el("th", {}, t("web.memories.created")),
            el("th", {}, ""),
          ),
        ),
        view.body,
      ),
    ),
    view.empty,
    view.more,
  );
  await load();
}

export function leave() {
  if (!view) return;
  clearTimeout(view.undoTimer);
  clearTimeout(view.searchTimer);
  view.ticket++;
  view = null;
}
