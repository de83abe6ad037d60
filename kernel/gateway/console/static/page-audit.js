// Audit: the chosen session's audit events in words (GET /agent/trajectory/events), or
// every chain's (scope=global), with a badge saying whether its chain verifies
// (GET /agent/trajectory/verify[/{chat id}]). "#audit/chat-5" opens that session.
import { api, el, failed, t } from "./app.js";

const PAGE = 100;
let shown = 0; // a choice whose answer arrives after a newer choice is never drawn

export async function render(main) {
  const picker = el("select", { id: "audit-session", "aria-label": t("web.audit.session") });
  picker.append(el("option", { value: "" }, t("web.audit.global")));
  const badge = el("span", { id: "audit-verdict", class: "badge", role: "status" });
  const body = el("tbody");
  const more = el("button", { type: "button", class: "quiet", id: "audit-more", hidden: true }, t("web.audit.more"));
  const table = el(
    "table",
    { id: "audit-events" },
    el("thead", {}, el("tr", {}, ...["number", "event", "actor"].map((name) => el("th", {}, t(`web.audit.${name}`))))),
    body,
  );
  const empty = el("p", { class: "muted", id: "audit-empty", hidden: true }, t("web.audit.empty"));
  main.append(
    el("h1", {}, t("web.nav.audit")),
    el("p", { class: "muted" }, t("web.audit.hint")),
    el("div", { class: "row" }, picker, badge),
    el("div", { class: "scroll" }, table),
    empty,
    more,
  );
  const wanted = location.hash.slice(1).split("/")[1] || "";
  try {
    const data = await api("GET", "/chats?limit=100");
    for (const chat of data.chats) {
      const label = chat.name || (chat.id === "chat-default" ? t("web.chat.default") : t("web.sessions.untitled"));
      picker.append(el("option", { value: chat.id }, `${label} · ${chat.channel} · ${chat.id}`));
    }
  } catch (error) {
    failed(error);
  }
  if (wanted && [...picker.options].some((o) => o.value === wanted)) picker.value = wanted;
  let before = null;
  const load = async (fresh) => {
    const mine = fresh ? ++shown : shown;
    const chat = picker.value;
    const params = new URLSearchParams(chat ? { session_id: chat } : { scope: "global" });
    params.set("limit", String(PAGE));
    if (!fresh && before) params.set("before", String(before));
    try {
      const [events, verdict] = await Promise.all([
        api("GET", `/agent/trajectory/events?${params}`),
        fresh ? api("GET", chat ? `/agent/trajectory/verify/${encodeURIComponent(chat)}` : "/agent/trajectory/verify") : null,
      ]);
      if (mine !== shown) return;
      if (verdict) {
        badge.textContent = verdict.text;
        badge.className = verdict.ok ? "badge ok" : "badge broken";
        badge.dataset.ok = String(verdict.ok);
      }
      const rows = events.items.map((item) => row(item, !chat));
      if (fresh) body.replaceChildren(...rows.reverse());
      else body.append(...rows.reverse());
      before = events.next_before;
      more.hidden = !before;
      empty.hidden = body.children.length > 0;
    } catch (error) {
      if (mine === shown) failed(error);
    }
  };
  picker.addEventListener("change", () => load(true));
  more.addEventListener("click", () => load(false));
  await load(true);
}

// Newest first; a row emptied with its deleted history is shown dimmed.
function row(item, global) {
  const number = global || item.seq === null ? item.id : item.seq;
  return el(
    "tr",
    { "data-seq": number, "data-kind": item.kind, class: item.pruned ? "pruned" : undefined },
    el("td", { class: "num" }, `#${number}`),
    el("td", { class: "audit-text" }, item.text),
    el("td", { class: "muted small" }, item.actor),
  );
}
