// arctic-sql dashboard: the token for actions (and for reads when they are protected), and the
// buttons that optimize, cancel an optimize or expire a table. No library; the pages are rendered on the server.
"use strict";
(function () {
  const KEY = "arctic-token";
  const tokenInput = document.getElementById("token");
  const message = document.getElementById("message");

  function token() { return sessionStorage.getItem(KEY) || ""; }
  function say(text) { message.textContent = text; message.classList.add("shown"); }

  if (tokenInput) { tokenInput.value = token(); }
  document.getElementById("save-token").addEventListener("click", function () {
    sessionStorage.setItem(KEY, tokenInput.value);
    if (document.body.dataset.protectReads === "true") {
      // Reads accept the token from this cookie; actions never do (they need the header).
      document.cookie = "arctic_token=" + encodeURIComponent(tokenInput.value) + "; path=/; SameSite=Strict";
      location.reload();
    } else {
      say("Token kept for this tab.");
    }
  });

  async function post(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token() },
      body: JSON.stringify(body),
    });
    const answer = await response.json().catch(function () { return {}; });
    if (!response.ok) { throw new Error(answer.error || response.statusText); }
    return answer;
  }

  const actions = document.querySelector(".actions");
  if (!actions) { return; }
  const api = "/api/v1/tables/" + actions.dataset.table;

  document.getElementById("optimize").addEventListener("click", async function () {
    const mode = document.getElementById("optimize-mode").value;
    try {
      await post(api + "/optimize", { mode: mode });
      say("Optimize (" + mode + ") started; it shows in the Optimizing tab.");
      setTimeout(function () { location.href = "?tab=optimizing"; }, 800);
    } catch (e) { say("Optimize refused: " + e.message); }
  });

  document.querySelectorAll("button.cancel").forEach(function (button) {
    button.addEventListener("click", async function () {
      try {
        await post(api + "/optimizing/" + button.dataset.process + "/cancel", {});
        say("Cancelling process " + button.dataset.process + "; it ends CANCELLED, committing nothing.");
        setTimeout(function () { location.reload(); }, 1500);
      } catch (e) { say("Cancel refused: " + e.message); }
    });
  });

  document.getElementById("expire").addEventListener("click", async function () {
    try {
      const result = await post(api + "/expire-snapshots", {});
      say("Expired " + result.expired_snapshots_count + " snapshot(s).");
      setTimeout(function () { location.href = "?tab=maintenance"; }, 800);
    } catch (e) { say("Expire refused: " + e.message); }
  });
}());
