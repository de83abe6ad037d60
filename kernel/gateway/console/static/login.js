// Sign-in: the API key, or the one-time token of kernel console's link (#signin=…),
// exchanged for an HttpOnly session cookie and a CSRF token (neither is kept; the CSRF
// token lives in this tab's sessionStorage). The link's token leaves the address bar
// before anything is sent. The submit handler is attached before anything is awaited,
// so an early Enter never lets the browser send the form itself.
const TOKEN = "kernel.console.csrf";
const form = document.getElementById("sign-in");
const key = document.getElementById("key");
const error = document.getElementById("error");
let words = { strings: {}, api_key_required: true, language: "zh" };

async function signIn(body) {
  error.textContent = "";
  let response;
  try {
    response = await fetch("/console/login", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
  } catch (failure) {
    error.textContent = String(failure);
    return;
  }
  const data = await response.json().catch(() => null);
  if (response.ok && data?.csrf) {
    sessionStorage.setItem(TOKEN, data.csrf);
    location.assign("/console/");
    return;
  }
  error.textContent = data?.error?.message || String(response.status);
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const given = key.value;
  key.value = "";
  await signIn({ api_key: given });
});

// kernel console's link: out of the address bar (and history) at once, then spent.
const link = location.hash.startsWith("#signin=") ? location.hash.slice(8) : "";
if (link) {
  history.replaceState(null, "", location.pathname + location.search);
  signIn({ link: decodeURIComponent(link) });
}

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
