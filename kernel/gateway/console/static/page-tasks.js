// Background tasks (issue 38): each task's status, progress and result (GET /agent/tasks),
// a Stop button under a running one (POST /agent/tasks/{id}/stop). Refreshed every 3 s
// while one runs.
import { api, el, failed, notify, t } from "./app.js";

const EVERY = 3000;
let view = null;

function when(text) {
  return text ? text.replace("T", " ").slice(0, 16) : "—";
}

function row(task) {
  const detail = task.status === "running" ? task.progress : task.result;
  return el(
    "tr",
    { "data-task-id": String(task.id), "data-status": task.status },
    el("td", { class: "nowrap" }, `#${task.id}`),
    el("td", {}, el("strong", {}, task.title), detail ? el("div", { class: "muted small task-detail" }, detail.slice(0, 300)) : null),
    el("td", { class: "nowrap" }, t(`web.tasks.status.${task.status}`)),
    el("td", { class: "nowrap muted" }, when(task.created_at)),
    el(
      "td",
      { class: "actions" },
      task.running ? el("button", { type: "button", "data-action": "stop", onclick: () => stop(task) }, t("web.tasks.stop")) : null,
    ),
  );
}

async function stop(task) {
  try {
    await api("POST", `/agent/tasks/${task.id}/stop`);
    notify(t("web.tasks.stopped", { id: task.id }));
  } catch (error) {
    failed(error);
  }
  await load();
}

async function load() {
  const current = view;
  if (!current) return;
  let data;
  try {
    data = await api("GET", "/agent/tasks");
  } catch (error) {
    if (current === view) failed(error);
    return;
  }
  if (current !== view) return;
  current.body.replaceChildren(...data.items.map(row));
  current.empty.hidden = data.items.length > 0;
  clearTimeout(current.poll);
  if (data.items.some((task) => task.running)) current.poll = setTimeout(load, EVERY);
}

export async function render(main) {
  leave();
  view = { poll: 0 };
  view.body = el("tbody", { id: "tasks" });
  view.empty = el("p", { id: "tasks-empty", class: "muted", hidden: true }, t("web.tasks.empty"));
  main.append(
    el("h1", {}, t("web.nav.tasks")),
    el("p", { class: "muted" }, t("web.tasks.hint")),
    el("table", {}, view.body),
    view.empty,
  );
  await load();
}

export function leave() {
  if (view) clearTimeout(view.poll);
  view = null;
}
