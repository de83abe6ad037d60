// Pending: the questions and approvals running turns wait on (GET /agent/asks), answered
// here as in Telegram (POST /agent/asks/{id}/answer). Refreshed every 3 s while shown.
import { api, el, failed, t } from "./app.js";
import { askBox } from "./page-chat.js";

const EVERY = 3000;
let timer = null;
let list = null;
let shown = null;
let loading = false;

export async function render(main) {
  leave();
  shown = null;
  list = el("div", { id: "asks" });
  main.append(el("h1", {}, t("web.nav.asks")), el("p", { class: "muted" }, t("web.asks.hint")), list);
  // The interval first: a page left while its first answer loads stops it in leave().
  timer = setInterval(refresh, EVERY);
  await refresh();
}

export function leave() {
  clearInterval(timer);
  timer = null;
  list = null;
}

async function refresh() {
  if (loading || !list) return;
  loading = true;
  const target = list;
  try {
    const data = await api("GET", "/agent/asks");
    if (target !== list) return; // the page was left (or shown again) meanwhile
    const key = data.asks.map((ask) => ask.id).join(" ");
    if (key === shown) return; // the same questions: keep the buttons where they are
    shown = key;
    if (!data.asks.length) {
      list.replaceChildren(el("p", { id: "asks-empty", class: "muted" }, t("web.asks.empty")));
      return;
    }
    list.replaceChildren(
      ...data.asks.map((ask) => {
        const box = askBox(ask);
        if (ask.conversation) box.append(el("p", { class: "muted ask-where" }, t("web.asks.where", { where: ask.conversation })));
        return box;
      }),
    );
  } catch (error) {
    if (timer) failed(error);
  } finally {
    loading = false;
  }
}
