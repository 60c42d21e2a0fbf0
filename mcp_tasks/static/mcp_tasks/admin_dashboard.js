/* The admin's task dashboard refreshes its figures by itself.
 *
 * With the live admin's WebSocket (MCP_TASKS["ADMIN_LIVE_PATH"]; see admin_live.js) every
 * task event — a new task, a status change, a question asked or answered — makes the page
 * fetch itself again through the admin's own view and swap in #mcp-dashboard: at most one
 * refresh every data-at-most-every seconds, however many events arrive. Whether or not the
 * socket is there, the page also refreshes every data-at-least-every seconds, as the window
 * slides on. The element #mcp-dashboard-live says which (data-state "live" or "polling")
 * and counts the refreshes (data-refreshes).
 */
"use strict";
(function () {
  const config = document.getElementById("mcp-dashboard-live");
  if (!config || !document.getElementById("mcp-dashboard")) {
    return;
  }
  const wsPath = config.dataset.wsPath || "";
  const atMostEvery = Number(config.dataset.atMostEvery || 5) * 1000;
  const atLeastEvery = Number(config.dataset.atLeastEvery || 60) * 1000;
  const { refresh, soon, sinceLastRun } = window.mcpTasksRefresher(config, {
    apply(next) {
      const fresh = next.getElementById("mcp-dashboard");
      const shown = document.getElementById("mcp-dashboard");
      if (!fresh || !shown) {
        return false;
      }
      shown.replaceWith(document.importNode(fresh, true));
      return true;
    },
    atMostEvery,
    pause: 250,
    lastRun: Date.now(),
  });

  function connect() {
    config.dataset.state = "polling";
    if (!wsPath || !("WebSocket" in window)) {
      return;
    }
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    let socket;
    try {
      socket = new WebSocket(`${scheme}//${window.location.host}${wsPath}`);
    } catch (error) {
      return;
    }
    let opened = false;
    socket.onopen = () => {
      opened = true;
      config.dataset.state = "live";
    };
    socket.onmessage = (message) => {
      const data = JSON.parse(message.data);
      // Log lines and the watch list change no figure; "ready": every process now tells
      // this page, so fetch what changed before.
      if (data.event !== "watching" && data.event !== "task_logged") {
        soon();
      }
    };
    socket.onclose = () => {
      config.dataset.state = "polling";
      if (opened) {
        setTimeout(connect, 5000); // the server restarted: try again
      }
    };
  }

  setInterval(() => {
    if (sinceLastRun() >= atLeastEvery - 250) {
      refresh();
    }
  }, Math.min(atLeastEvery, 10000));
  connect();
})();
