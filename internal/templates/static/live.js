// Live updates of balde's admin pages, without reloading the page.
//
// An element with data-live-url (the page's <main>) names a URL that
// answers JSON: {"fragments": {"ID": "HTML", ...}, "at": "..."}. Every
// data-live-every seconds (10 by default) the script fetches it and puts
// each fragment, rendered and escaped by the server's templates, into the
// element of that id. It pauses while the tab is hidden, and keeps the
// page as it was when a fetch fails (the next one tries again). No
// library, no inline script: the page's Content-Security-Policy allows
// this file and fetches to the page's own origin only.
(function () {
  "use strict";
  var root = document.querySelector("[data-live-url]");
  if (!root) {
    return;
  }
  var url = root.getAttribute("data-live-url");
  var every = (Number(root.getAttribute("data-live-every")) || 10) * 1000;
  function schedule() {
    window.setTimeout(tick, every);
  }
  function tick() {
    if (document.hidden) {
      schedule();
      return;
    }
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" })
      .then(function (res) {
        if (!res.ok) {
          throw new Error("HTTP " + res.status);
        }
        return res.json();
      })
      .then(function (body) {
        var fragments = body.fragments || {};
        Object.keys(fragments).forEach(function (id) {
          var el = document.getElementById(id);
          if (el) {
            el.innerHTML = fragments[id];
          }
        });
        root.setAttribute("data-live-at", body.at || "");
        root.setAttribute("data-live-updates", String(Number(root.getAttribute("data-live-updates") || 0) + 1));
      })
      .catch(function () {
        root.setAttribute("data-live-failed", String(Number(root.getAttribute("data-live-failed") || 0) + 1));
      })
      .then(schedule);
  }
  schedule();
})();
