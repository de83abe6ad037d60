// Chat: the console's chats (GET /chats?channel=console), a turn streamed from
// POST /agent/process (stream=true, SSE), one line per tool call, questions answered
// inline (POST /agent/asks/{id}/answer), cancel through POST /agent/turns/{id}/cancel
// (the turn's id is the stream's X-Turn-Id header, there before the first event).
// The plan (todo_write's "plan" events) is one list per turn, replaced in place.
// The page's elements outlive a visit to another page: a reply keeps streaming into them.
import { api, el, events, failed, request, t } from "./app.js";
import { transcript } from "./page-sessions.js";

const DEFAULT_CHAT = "chat-default";
const PLAN_TOOL = "todo_write";
const PLAN_MARKS = { pending: "☐", in_progress: "▶", completed: "☑" };
let view = null;

export async function render(main) {
  if (!view) view = build();
  main.append(view.root);
  await loadSessions();
  // Back from another page: the chat as stored now (unless a reply is still streaming in).
  if (!view.busy) await openChat(view.chatId);
  view.input.focus();
}

function build() {
  const v = { chatId: DEFAULT_CHAT, chats: new Map(), busy: false, turnId: "" };
  v.select = el("select", { id: "chat-session", "aria-label": t("web.chat.session"), onchange: pick });
  v.log = el("div", { id: "chat-log", "aria-live": "polite" });
  v.input = el("textarea", {
    id: "chat-input",
    rows: 3,
    placeholder: t("web.chat.placeholder"),
    "aria-label": t("web.chat.placeholder"),
    onkeydown: (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        send();
      }
    },
  });
  v.send = el("button", { id: "chat-send", type: "button", class: "primary", onclick: send }, t("web.chat.send"));
  v.cancel = el("button", { id: "chat-cancel", type: "button", disabled: true, onclick: cancel }, t("web.chat.cancel"));
  v.root = el(
    "section",
    { class: "chat" },
    el("div", { class: "row" }, el("label", { for: "chat-session" }, t("web.chat.session")), v.select),
    v.log,
    el("div", { class: "chat-compose" }, v.input, el("div", { class: "row" }, v.send, v.cancel, el("span", { class: "muted" }, t("web.chat.hint")))),
  );
  return v;
}

function label(chat) {
  if (chat.id === DEFAULT_CHAT && !chat.name) return t("web.chat.default");
  return chat.name || chat.session_id;
}

async function loadSessions() {
  try {
    const data = await api("GET", "/chats?channel=console&limit=100");
    view.chats = new Map(data.chats.map((chat) => [chat.id, chat]));
  } catch (error) {
    failed(error);
  }
  if (!view.chats.has(view.chatId)) view.chatId = DEFAULT_CHAT;
  const options = [...view.chats.values()].map((chat) => el("option", { value: chat.id }, label(chat)));
  if (!view.chats.has(DEFAULT_CHAT)) options.unshift(el("option", { value: DEFAULT_CHAT }, t("web.chat.default")));
  options.push(el("option", { value: "new" }, t("web.chat.new")));
  view.select.replaceChildren(...options);
  view.select.value = view.chatId;
}

async function pick() {
  if (view.busy) {
    view.select.value = view.chatId;
    return;
  }
  if (view.select.value === "new") {
    try {
      const chat = await api("POST", "/chats", { channel: "console" });
      view.chatId = chat.id;
    } catch (error) {
      failed(error);
    }
    await loadSessions();
  } else {
    view.chatId = view.select.value;
  }
  await openChat(view.chatId);
}

async function openChat(chatId) {
  let nodes = [];
  try {
    const chat = await api("GET", `/chats/${encodeURIComponent(chatId)}?rounds=20`);
    nodes = transcript(chat.messages || [], false);
  } catch (error) {
    if (error.status !== 404) failed(error);
  }
  if (view.busy || view.chatId !== chatId) return; // a turn began (or another chat was picked)
  view.log.replaceChildren(...nodes);
  scrolled();
}

function setBusy(busy) {
  view.busy = busy;
  view.send.disabled = busy;
  view.select.disabled = busy;
  view.cancel.disabled = !busy || !view.turnId;
}

function scrolled() {
  view.log.scrollTop = view.log.scrollHeight;
}

async function send() {
  const text = view.input.value;
  if (view.busy || !text.trim()) return;
  view.input.value = "";
  view.turnId = "";
  setBusy(true);
  view.log.append(el("div", { class: "bubble owner" }, text));
  const turn = { bubble: null, lines: new Map(), log: view.log };
  scrolled();
  const chat = view.chats.get(view.chatId);
  const body = {
    input: [{ role: "user", type: "message", content: [{ type: "text", text }] }],
    stream: true,
    channel: "console",
    user_id: chat?.user_id,
    session_id: chat?.session_id ?? "session-default",
  };
  try {
    const response = await request("POST", "/agent/process", body);
    if (!response.ok) {
      const data = await response.json().catch(() => null);
      showError(turn, data?.error?.message || String(response.status));
      return;
    }
    view.turnId = response.headers.get("X-Turn-Id") || "";
    setBusy(true);
    for await (const { data } of events(response)) {
      if (data === "[DONE]") break;
      show(turn, data);
      scrolled();
    }
  } catch (error) {
    showError(turn, error.message || String(error));
  } finally {
    view.turnId = "";
    setBusy(false);
    scrolled();
  }
  loadSessions(); // a new chat's title, counts
}

function bubble(turn) {
  if (!turn.bubble) {
    turn.bubble = el("div", { class: "bubble assistant" });
    turn.log.append(turn.bubble);
  }
  return turn.bubble;
}

function show(turn, event) {
  switch (event.type) {
    case "assistant_delta":
      bubble(turn).append(event.delta || "");
      break;
    case "tool_call": {
      const call = event.tool_call || {};
      if (call.name === PLAN_TOOL) break; // its plan event shows what it did
      const line = el("div", { class: "tool-line running" }, t("web.chat.tool_running", { name: call.name }));
      turn.lines.set(call.id, line);
      turn.log.append(line);
      turn.bubble = null; // text after a tool call is a new bubble
      break;
    }
    case "tool_progress": {
      const line = turn.lines.get(event.tool_progress?.id);
      if (line) line.textContent = t("web.chat.tool_progress", { name: event.tool_progress.name, text: event.tool_progress.text || "" });
      break;
    }
    case "tool_result": {
      const result = event.tool_result || {};
      if (result.name === PLAN_TOOL && result.ok) break;
      let line = turn.lines.get(result.id);
      if (!line) {
        line = el("div", { class: "tool-line" });
        turn.log.append(line);
      }
      line.className = `tool-line ${result.ok ? "ok" : "failed"}`;
      line.textContent = t(result.ok ? "web.chat.tool_ok" : "web.chat.tool_failed", { name: result.name });
      if (result.summary) line.title = result.summary;
      break;
    }
    case "ask_user":
      turn.log.append(askBox(event.ask));
      turn.bubble = null;
      break;
    case "plan":
      showPlan(turn, event.plan?.items || []);
      break;
    case "model_switch":
      turn.log.append(el("div", { class: "muted chat-note" }, t("web.chat.switched", { to: event.switch?.to || "" })));
      break;
    case "completed": {
      const reply = event.reply || "";
      // The reply is the last step's text: what streamed since the last tool call.
      if (reply && bubble(turn).textContent !== reply) turn.bubble.textContent = reply;
      if (event.cancelled) turn.log.append(el("div", { class: "muted chat-note" }, t("web.chat.cancelled")));
      break;
    }
    case "error":
      showError(turn, event.meta?.message || event.meta?.code || "error");
      break;
    default:
      break;
  }
}

// The turn's plan: drawn where it first came, each update replacing the list.
function showPlan(turn, items) {
  if (!turn.plan) {
    turn.plan = el("div", { class: "chat-plan card", "aria-live": "polite" });
    turn.log.append(turn.plan);
    turn.bubble = null; // text after the plan is a new bubble
  }
  const done = items.filter((item) => item.status === "completed").length;
  const title = items.length ? t("web.chat.plan_title", { done, total: items.length }) : t("web.chat.plan_empty");
  const rows = items.map((item) =>
    el("li", { class: `plan-item ${PLAN_MARKS[item.status] ? item.status : "pending"}` }, `${PLAN_MARKS[item.status] || PLAN_MARKS.pending} ${item.content || ""}`),
  );
  turn.plan.replaceChildren(el("p", { class: "plan-title muted" }, title), el("ol", { class: "plan-items" }, rows));
}

function showError(turn, message) {
  turn.log.append(el("div", { class: "chat-error error", role: "alert" }, message));
}

// A question or approval from the turn, answered here as in Telegram.
export function askBox(ask) {
  const box = el("div", { class: "ask card", "data-ask-id": ask.id });
  const status = el("p", { class: "muted" });
  const buttons = ask.options.map((option, index) =>
    el(
      "button",
      {
        type: "button",
        "data-option": index,
        onclick: async () => {
          for (const button of buttons) button.disabled = true;
          try {
            const done = await api("POST", `/agent/asks/${encodeURIComponent(ask.id)}/answer`, { choice: index });
            status.textContent = t("web.asks.answered", { option: done.option });
            box.classList.add("answered");
          } catch (error) {
            status.textContent = error.message;
            status.className = "error";
            // Not answered: it can be answered again (unless it has ended meanwhile).
            if (error.status !== 404 && error.status !== 409) {
              for (const button of buttons) button.disabled = false;
            }
          }
        },
      },
      option,
    ),
  );
  box.append(
    el("p", { class: "ask-kind muted" }, t(`web.asks.kind.${ask.kind || "question"}`)),
    el("p", { class: "ask-question" }, ask.question),
    // An approval's full arguments, one click away.
    ask.details
      ? el("details", { class: "ask-details" }, el("summary", {}, t("web.asks.details")), el("pre", {}, ask.details))
      : null,
    el("div", { class: "row" }, buttons),
    status,
  );
  return box;
}

async function cancel() {
  const turnId = view.turnId;
  if (!turnId) return;
  view.cancel.disabled = true;
  try {
    await api("POST", `/agent/turns/${encodeURIComponent(turnId)}/cancel`);
  } catch (error) {
    failed(error);
    if (view.turnId === turnId) view.cancel.disabled = false;
  }
}
