// Sessions: every channel's chats (GET /chats), opened with their messages
// (GET /chats/{id}; cut ones marked; where branches fork, ‹ n/m › switches between
// them: POST /chats/{id}/branches/{branch}), renamed (PATCH /chats/{id}), deleted
// (DELETE /chats/{id}, after confirm()) and resumed in Telegram
// (POST /chats/{id}/resume {"channel": "telegram"}).
import { api, el, failed, localTime, notify, t } from "./app.js";

const PAGE = 100;
let rows = [];
let total = 0;

export async function render(main) {
  rows = [];
  total = 0;
  const body = el("tbody");
  const more = el("button", { type: "button", class: "quiet", hidden: true }, t("web.sessions.more"));
  const count = el("p", { class: "muted" });
  const table = el(
    "table",
    { id: "sessions" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ...["title", "channel", "updated", "messages", "actions"].map((name) => el("th", {}, t(`web.sessions.${name}`))),
      ),
    ),
    body,
  );
  const viewer = el("div", { id: "session-view" });
  main.append(
    el("h1", {}, t("web.nav.sessions")),
    count,
    el("div", { class: "scroll" }, table),
    more,
    viewer,
  );
  const load = async () => {
    try {
      const data = await api("GET", `/chats?limit=${PAGE}&offset=${rows.length}`);
      total = data.total;
      for (const chat of data.chats) {
        rows.push(chat);
        body.append(row(chat, viewer));
      }
    } catch (error) {
      failed(error);
    }
    count.textContent = t("web.sessions.count", { shown: rows.length, total });
    more.hidden = rows.length >= total;
  };
  more.addEventListener("click", load);
  await load();
}

function title(chat) {
  if (chat.name) return chat.name;
  return chat.id === "chat-default" ? t("web.chat.default") : t("web.sessions.untitled");
}

// A session's work mode (plan, read_only) beside its channel; act is not shown.
function withMode(text, chat) {
  return chat.mode && chat.mode !== "act" ? `${text} · ${chat.mode}` : text;
}

function when(iso) {
  return localTime(iso);
}

function row(chat, viewer) {
  const name = el("td", { class: "session-title" }, title(chat));
  const tr = el(
    "tr",
    { "data-chat-id": chat.id },
    name,
    el("td", {}, withMode(chat.channel, chat)),
    el("td", {}, when(chat.updated_at)),
    el("td", {}, String(chat.message_count ?? "")),
  );
  const action = (kind, text, handler, extra = {}) =>
    el("button", { type: "button", "data-action": kind, onclick: handler, ...extra }, text);
  tr.append(
    el(
      "td",
      { class: "row actions" },
      action("open", t("web.sessions.open"), () => open(chat, viewer)),
      action("rename", t("web.sessions.rename"), () => rename(chat, name)),
      action("delete", t("web.sessions.delete"), () => remove(chat, tr, viewer), {
        class: "danger",
        disabled: chat.id === "chat-default",
        title: chat.id === "chat-default" ? t("web.sessions.protected") : undefined,
      }),
      action("resume-telegram", t("web.sessions.resume"), () => resume(chat)),
    ),
  );
  return tr;
}

async function open(chat, viewer) {
  try {
    const data = await api("GET", `/chats/${encodeURIComponent(chat.id)}?rounds=100`);
    viewer.dataset.chatId = chat.id;
    const shown = data.messages?.length ? transcript(data.messages, true) : [el("p", { class: "muted" }, t("web.sessions.empty"))];
    viewer.replaceChildren(
      el("h2", {}, title(data)),
      el("p", { class: "muted" }, `${withMode(data.channel, data)} · ${data.session_id} · ${when(data.updated_at)}`),
      ...withBranches(shown, data, () => open(chat, viewer)),
    );
    viewer.scrollIntoView({ block: "start" });
  } catch (error) {
    failed(error);
  }
}

// The siblings at each fork on the live path (seed 002's siblingNav): the live
// continuation and the branches forking there, in the order they were written. A nav
// ‹ n/m › goes after the fork's message; its arrows make the neighbour live.
function withBranches(nodes, data, reopen) {
  const live = (data.messages || []).filter((m) => !m.cut);
  const onPath = new Set(live.map((m) => m.sequence));
  const forks = new Map();
  for (const branch of data.branches || []) {
    if (branch.fork_sequence && !onPath.has(branch.fork_sequence)) continue; // inside a branch
    const siblings = forks.get(branch.fork_sequence) || [];
    siblings.push({ id: branch.id, first: branch.first_sequence });
    forks.set(branch.fork_sequence, siblings);
  }
  const out = [...nodes];
  for (const [fork, siblings] of forks) {
    const next = live.find((m) => m.sequence > fork);
    siblings.push({ id: null, first: next ? next.sequence : Infinity });
    siblings.sort((a, b) => a.first - b.first);
    const here = siblings.findIndex((s) => s.id === null);
    const go = (index) => async () => {
      try {
        await api("POST", `/chats/${encodeURIComponent(data.id)}/branches/${siblings[index].id}`);
        notify(t("web.sessions.switched", { branch: siblings[index].id }));
        await reopen();
      } catch (error) {
        failed(error);
      }
    };
    const arrow = (text, index, action) =>
      el("button", { type: "button", class: "quiet", "data-action": action, disabled: index < 0 || index >= siblings.length, onclick: go(index) }, text);
    const nav = el(
      "div",
      { class: "branch-nav", "data-fork": fork, title: t("web.sessions.branches_here") },
      arrow("‹", here - 1, "branch-prev"),
      el("span", {}, `${here + 1}/${siblings.length}`),
      arrow("›", here + 1, "branch-next"),
    );
    const at = out.findIndex((node) => node.dataset && Number(node.dataset.sequence) === fork);
    out.splice(at + 1, 0, nav);
  }
  return out;
}

function rename(chat, cell) {
  if (cell.querySelector("input")) return;
  const input = el("input", { type: "text", maxlength: 200, value: chat.name || "", "aria-label": t("web.sessions.rename") });
  const restore = () => cell.replaceChildren(title(chat));
  const save = async () => {
    try {
      const renamed = await api("PATCH", `/chats/${encodeURIComponent(chat.id)}`, { name: input.value });
      chat.name = renamed.name;
      restore();
      notify(t("web.sessions.renamed"));
    } catch (error) {
      failed(error);
      input.focus();
    }
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) save();
    else if (event.key === "Escape") restore();
  });
  cell.replaceChildren(
    el(
      "span",
      { class: "row" },
      input,
      el("button", { type: "button", "data-action": "save", class: "primary", onclick: save }, t("web.sessions.save")),
      el("button", { type: "button", class: "quiet", onclick: restore }, t("web.sessions.keep")),
    ),
  );
  input.focus();
}

async function remove(chat, tr, viewer) {
  if (!confirm(t("web.sessions.confirm_delete", { title: title(chat) }))) return;
  try {
    await api("DELETE", `/chats/${encodeURIComponent(chat.id)}`);
    tr.remove();
    rows = rows.filter((r) => r.id !== chat.id);
    total -= 1;
    if (viewer.dataset.chatId === chat.id) viewer.replaceChildren();
    notify(t("web.sessions.deleted", { title: title(chat) }));
  } catch (error) {
    failed(error);
  }
}

async function resume(chat) {
  try {
    await api("POST", `/chats/${encodeURIComponent(chat.id)}/resume`, { channel: "telegram" });
    notify(t("web.sessions.resumed", { title: title(chat) }));
  } catch (error) {
    failed(error);
  }
}

function blocks(message) {
  return Array.isArray(message.content) ? message.content : [{ type: "text", text: String(message.content ?? "") }];
}

// A chat's stored messages as bubbles (text only: no HTML is ever parsed). With
// ``marks``, a message cut by /undo, /rewind or /retry (or refused by the provider) is
// shown marked; without, those are left out (the chat page shows what the model sees).
export function transcript(messages, marks) {
  const nodes = [];
  for (const message of messages) {
    const hidden = message.cut || message.failed;
    if (hidden && !marks) continue;
    const parts = blocks(message);
    const text = parts
      .filter((b) => b.type === "text")
      .map((b) => b.text)
      .join("\n");
    const tools = parts.filter((b) => b.type === "tool_use").map((b) => b.name);
    const images = parts.filter((b) => b.type === "image").length;
    const role = message.role === "user" ? "owner" : "assistant";
    if (text || images) {
      const node = el("div", { class: `bubble ${role}${hidden ? " cut" : ""}`, "data-sequence": message.sequence });
      if (message.cut) node.append(el("span", { class: "mark" }, t("web.sessions.cut")));
      if (message.failed) node.append(el("span", { class: "mark" }, t("web.sessions.failed")));
      if (images) node.append(el("span", { class: "muted" }, t("web.sessions.images", { count: images })));
      if (text) node.append(text);
      nodes.push(node);
    }
    for (const name of tools) nodes.push(el("div", { class: "muted history-tool" }, t("web.sessions.tool", { name })));
  }
  return nodes;
}
