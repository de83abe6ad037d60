// Sign-in: the API key exchanged for an HttpOnly session cookie (the key is sent once
// and never kept by the page).
async function main() {
  const words = await fetch("/console/strings").then((r) => r.json());
  const t = (key) => words.strings[key] ?? key;
  document.documentElement.lang = words.language;
  document.title = t("web.title");
  const form = document.getElementById("sign-in");
  const key = document.getElementById("key");
  document.getElementById("go").textContent = t("web.sign_in");
  document.getElementById("key-label").textContent = t("web.key_label");
  document.getElementById("hint").textContent = words.api_key_required
    ? t("web.key_hint")
    : t("web.no_key_hint");
  if (!words.api_key_required) {
    key.hidden = true;
    document.getElementById("key-label").hidden = true;
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = document.getElementById("error");
    error.textContent = "";
    const response = await fetch("/console/login", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ api_key: key.value }),
      credentials: "same-origin",
    });
    key.value = "";
    if (response.ok) {
      location.assign("/console/");
      return;
    }
    const data = await response.json().catch(() => null);
    error.textContent = data?.error?.message || String(response.status);
  });
}

main();
