// The console's API keys view: create a key (shown once, with a Copy button), list the caller's
// keys and revoke them. Uses `api`, `el`, `$`, `act` and `confirmDialog` of console.js.
"use strict";

const keyDate = (t) => (t === null || t === undefined ? "never" : new Date(t * 1000).toISOString().slice(0, 10));

async function loadKeys() {
  const { keys } = await api("GET", "/v1/keys");
  $("keys-summary").textContent = keys.length ? keys.length + (keys.length === 1 ? " key" : " keys") : "No keys yet.";
  $("key-list").replaceChildren(...keys.map((k) => {
    const revoke = el("button", { type: "button", className: "danger", textContent: "Revoke" });
    revoke.addEventListener("click", () => act(async () => {
      if (!(await confirmDialog(`Revoke the key "${k.name}"? Whatever uses it stops working at once.`, "Revoke"))) return;
      await api("DELETE", "/v1/keys/" + encodeURIComponent(k.id));
      await loadKeys();
    }));
    return el("li", {},
      el("p", { className: "note-text" }, el("strong", { textContent: k.name }), " ", el("code", { textContent: k.prefix + "…" })),
      el("div", { className: "meta" },
        el("span", { textContent: "created " + keyDate(k.created_at) }),
        el("span", { textContent: "last used " + (k.last_used_at ? keyDate(k.last_used_at) : "never") }),
        el("span", { textContent: "expires " + keyDate(k.expires_at) })),
      el("div", { className: "row" }, revoke));
  }));
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    act(async () => {
      const days = $("key-days").value.trim();
      const body = { name: $("key-name").value.trim() };
      if (days) body.expires_in_days = Number(days);
      const created = await api("POST", "/v1/keys", body);
      $("key-value").textContent = created.key;
      $("key-new").hidden = false;
      $("key-name").value = "";
      $("key-days").value = "";
      await loadKeys();
    });
  });
  $("key-copy").addEventListener("click", () => act(async () => {
    await navigator.clipboard.writeText($("key-value").textContent);
    $("key-copy").textContent = "Copied";
  }));
  $("key-done").addEventListener("click", () => {
    // The key leaves the page: it is not kept anywhere.
    $("key-value").textContent = "";
    $("key-new").hidden = true;
    $("key-copy").textContent = "Copy";
  });
});
