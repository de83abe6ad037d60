// Scheduled jobs: next run, paused or not, last outcome; pause, resume, run now; a job's
// runs with each one's outcome and reason. Refreshed every few seconds while a job runs.
import { ApiFailure, api, el, failed, notify, t } from "./app.js";

const POLL_MS = 2000;
let view = null;

function when(text) {
  return text ? text.replace("T", " ").slice(0, 16) : "—";
}

function scheduleText(schedule) {
  if (typeof schedule === "string") return schedule;
  if (!schedule) return "—";
  if (schedule.type === "cron") return schedule.cron || "";
  if (schedule.type === "interval") return t("web.jobs.every", { every: schedule.every ?? "" });
  return t("web.jobs.once", { at: when(schedule.at) });
}

function outcomeWord(outcome) {
  return outcome ? t(`web.jobs.outcome.${outcome}`) : "—";
}

function stateWord(job) {
  if (job.state.running) return t("web.jobs.running");
  if (job.state.paused) return t("web.jobs.paused");
  if (!job.enabled) return t("web.jobs.disabled");
  return t("web.jobs.active");
}

function button(action, word, onclick, disabled = false) {
  return el("button", { type: "button", "data-action": action, onclick, disabled }, word);
}

function row(job) {
  const state = job.state;
  const last = state.last_status
    ? el(
        "span",
        { class: `outcome outcome-${state.last_status}`, title: state.last_error || "" },
        outcomeWord(state.last_status),
      )
    : el("span", { class: "muted" }, "—");
  return el(
    "tr",
    { "data-job-id": job.id, class: state.paused ? "paused" : "" },
    el("td", {}, el("strong", {}, job.name), el("div", { class: "muted small" }, job.id)),
    el("td", { class: "nowrap" }, scheduleText(job.schedule)),
    el("td", { class: "nowrap next-run" }, when(state.next_run_at)),
    el("td", {}, stateWord(job)),
    el("td", {}, last, state.last_run_at ? el("div", { class: "muted small" }, when(state.last_run_at)) : null),
    el(
      "td",
      { class: "actions" },
      state.paused
        ? button("resume", t("web.jobs.resume"), () => act(job, "resume"))
        : button("pause", t("web.jobs.pause"), () => act(job, "pause")),
      button("run", t("web.jobs.run"), () => act(job, "run"), state.running),
      button("history", t("web.jobs.history"), () => history(job)),
    ),
  );
}

async function act(job, action) {
  try {
    await api("POST", `/cron/jobs/${encodeURIComponent(job.id)}/${action}`);
    notify(t(`web.jobs.done.${action}`, { name: job.name }));
  } catch (error) {
    failed(error);
  }
  await load();
  if (action === "run" && view?.runsOf === job.id) await history(job);
}

async function history(job) {
  if (!view) return;
  view.runsOf = job.id;
  let data;
  try {
    data = await api("GET", `/cron/jobs/${encodeURIComponent(job.id)}/runs`);
  } catch (error) {
    failed(error);
    return;
  }
  if (!view) return;
  const items = data.runs.map((run) =>
    el(
      "li",
      { class: "job-run", "data-outcome": run.outcome },
      el("span", { class: `outcome outcome-${run.outcome}` }, outcomeWord(run.outcome)),
      " ",
      el("span", { class: "muted" }, when(run.at)),
      run.reason ? el("div", { class: "run-reason" }, run.reason) : null,
      run.result ? el("div", { class: "run-result" }, run.result) : null,
    ),
  );
  view.runs.replaceChildren(
    el("h3", {}, t("web.jobs.runs_of", { name: job.name })),
    el("p", { class: "muted small" }, t("web.jobs.run_count", { count: data.run_count })),
    items.length ? el("ul", { class: "job-runs" }, ...items) : el("p", { class: "muted" }, t("web.jobs.no_runs")),
  );
  view.runs.hidden = false;
}

async function load() {
  const current = view;
  if (!current) return;
  let data;
  try {
    data = await api("GET", "/cron/jobs");
  } catch (error) {
    if (current !== view) return;
    if (error instanceof ApiFailure && error.code === "cron_disabled") {
      current.body.replaceChildren();
      current.empty.textContent = error.message;
      current.empty.hidden = false;
    } else failed(error);
    return;
  }
  if (current !== view) return;
  current.body.replaceChildren(...data.jobs.map(row));
  current.empty.textContent = t("web.jobs.empty");
  current.empty.hidden = data.jobs.length > 0;
  const busy = data.jobs.some((job) => job.state.running);
  clearTimeout(current.poll);
  if (busy) {
    current.poll = setTimeout(async () => {
      await load();
      const job = view && data.jobs.find((j) => j.id === view.runsOf);
      if (job) await history(job);
    }, POLL_MS);
  }
}

export async function render(main) {
  view = { poll: 0, runsOf: "" };
  view.body = el("tbody", {});
  view.empty = el("p", { class: "muted", hidden: true }, t("web.jobs.empty"));
  view.runs = el("div", { id: "job-runs", class: "card", hidden: true });
  main.append(
    el("h2", {}, t("web.nav.jobs")),
    el(
      "div",
      { class: "scroll" },
      el(
        "table",
        { id: "jobs" },
        el(
          "thead",
          {},
          el(
            "tr",
            {},
            el("th", {}, t("web.jobs.name")),
            el("th", {}, t("web.jobs.schedule")),
            el("th", {}, t("web.jobs.next")),
            el("th", {}, t("web.jobs.state")),
            el("th", {}, t("web.jobs.last")),
            el("th", {}, ""),
          ),
        ),
        view.body,
      ),
    ),
    view.empty,
    view.runs,
  );
  await load();
}

export function leave() {
  if (view) clearTimeout(view.poll);
  view = null;
}
