// Sign-in: the API key exchanged for an HttpOnly session cookie and a CSRF token (the
// key is sent once and never kept; the token lives in this tab's sessionStorage). The
// submit handler is attached before anything is awaited, so an early Enter never lets
// the browser send the form itself.
const TOKEN = "kernel.console.csrf";
const form = document.getElementById("sign-in");
const key = document.getElementById("key");
const error = document.getElementById("error");
let words = { strings: {}, api_key_required: true, language: "zh" };

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.textContent = "";
  let response;
  try {
    response = await fetch("/console/login", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ api_key: key.value }),
      credentials: "same-origin",
    });
  } catch (failure) {
    error.textContent = String(failure);
    return;
  }
  key.value = "";
  const data = await response.json().catch(() => null);
  if (response.ok && data?.csrf) {
    sessionStorage.setItem(TOKEN, data.csrf);
    location.assign("/console/");
    return;
  }
  error.textContent = data?.error?.message || String(response.status);
});

async function main() {
  words = await fetch("/console/strings").then((r) => r.json());
  const t = (name) => words.strings[name] ?? name;
  document.documentElement.lang = words.language;
  document.title = t("web.title");
  document.getElementById("go").textContent = t("web.sign_in");
  document.getElementById("key-label").textContent = t("web.key_label");
  document.getElementById("hint").textContent = words.api_key_required
    ? t("web.key_hint")
    : t("web.no_key_hint");
  if (!words.api_key_required) {
    key.hidden = true;
    document.getElementById("key-label").hidden = true;
  }
}

main();
