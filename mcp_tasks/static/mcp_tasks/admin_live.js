/* The live admin: the task list, a task's page and the waiting questions update by themselves.
 *
 * A WebSocket (MCP_TASKS["ADMIN_LIVE_PATH"]) says when something the page shows changed; the
 * page then fetches itself again through the admin's own views (so the user's permissions
 * apply) and swaps in the parts that changed. Without the WebSocket (not routed, refused, or
 * closed) the page does the same every ADMIN_REFRESH_INTERVAL seconds. Nothing is swapped
 * while the operator is selecting rows for an action, or over an answer being typed.
 */
"use strict";
(function () {
  const config = document.getElementById("mcp-live");
  if (!config) {
    return;
  }
  const wsPath = config.dataset.wsPath || "";
  const interval = Number(config.dataset.interval || 0) * 1000;
  const pageTask = config.dataset.task || "";
  let socket = null;
  let connected = false;
  let pollTimer = null;
  let typed = false; // the operator typed into the answer form on this page

  document.addEventListener("input", (event) => {
    if (event.target.closest && event.target.closest("#mcp-operator")) {
      typed = true;
    }
  });

  function selecting() {
    if (document.querySelector("#result_list input.action-select:checked")) {
      return true;
    }
    const action = document.querySelector('#changelist-form select[name="action"]');
    return Boolean(action && action.value);
  }

  function shownTasks() {
    if (pageTask) {
      return [pageTask];
    }
    const ids = new Set();
    document.querySelectorAll("#result_list [data-task-id]").forEach((element) => {
      ids.add(element.dataset.taskId);
    });
    return Array.from(ids);
  }

  function watch() {
    if (connected) {
      socket.send(JSON.stringify({ watch: shownTasks() }));
    }
  }

  function normal(html) {
    // CSRF tokens are masked anew in every response, and an opened section is the
    // operator's doing: neither is a change.
    return html
      .replace(/name="csrfmiddlewaretoken" value="[^"]*"/g, "")
      .replace(/<details open="">/g, "<details>");
  }

  function replaced(old, fresh) {
    // Swap in ``fresh`` unless it shows the same; true when it did.
    if (!old || !fresh || normal(old.outerHTML) === normal(fresh.outerHTML)) {
      return false;
    }
    old.replaceWith(document.importNode(fresh, true));
    return true;
  }

  function identity(row) {
    const link = row.querySelector("a.button[href]");
    const task = row.querySelector("[data-task-id]");
    return (link && link.getAttribute("href")) || (task && task.dataset.taskId) || "";
  }

  function swapList(next) {
    // The same rows in the same order: change only the cells that changed, so that the
    // rows' checkboxes (and the admin's actions script on them) stay as they are.
    const form = document.getElementById("changelist-form");
    const freshForm = next.getElementById("changelist-form");
    if (!form || !freshForm) {
      return;
    }
    const rows = Array.from(form.querySelectorAll("#result_list tbody > tr"));
    const freshRows = Array.from(freshForm.querySelectorAll("#result_list tbody > tr"));
    const same =
      rows.length > 0 &&
      rows.length === freshRows.length &&
      rows.every((row, index) => identity(row) === identity(freshRows[index]));
    if (!same) {
      if (replaced(form, freshForm)) {
        const boxes = document.querySelectorAll("tr input.action-select");
        if (boxes.length && window.Actions) {
          window.Actions(boxes);
        }
      }
      return;
    }
    rows.forEach((row, index) => {
      const freshCells = freshRows[index].children;
      Array.from(row.children).forEach((cell, column) => {
        const fresh = freshCells[column];
        if (fresh && !cell.querySelector("input.action-select") && cell.innerHTML !== fresh.innerHTML) {
          cell.innerHTML = fresh.innerHTML;
        }
      });
    });
    replaced(form.querySelector(".paginator"), freshForm.querySelector(".paginator"));
  }

  function swap(next) {
    const open = Array.from(document.querySelectorAll("#task_form details")).map((d) => d.open);
    swapList(next);
    for (const selector of ["#changelist-filter", ".object-tools", "#task_form", ".mcp-waiting-count"]) {
      replaced(document.querySelector(selector), next.querySelector(selector));
    }
    document.querySelectorAll("#task_form details").forEach((details, index) => {
      if (index < open.length) {
        details.open = open[index];
      }
    });
    const operator = document.getElementById("mcp-operator");
    const freshOperator = next.getElementById("mcp-operator");
    if (operator && freshOperator) {
      const same = operator.dataset.question === freshOperator.dataset.question;
      if (!(same && typed) && replaced(operator, freshOperator)) {
        typed = false;
      }
    }
  }

  // At most one refresh a second, however many changes arrive; none while selecting.
  const { refresh, soon: nudge } = window.mcpTasksRefresher(config, {
    apply(next) {
      swap(next);
      watch();
      return true;
    },
    skip: selecting,
    atMostEvery: 1000,
    pause: 150,
  });

  function poll(on) {
    if (on && !pollTimer && interval > 0) {
      pollTimer = setInterval(refresh, interval);
    } else if (!on && pollTimer) {
      clearInterval(pollTimer);
      pollTimer = null;
    }
    config.dataset.state = connected ? "live" : "polling";
  }

  function connect() {
    if (!wsPath || !("WebSocket" in window)) {
      poll(true);
      return;
    }
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    let opened = false;
    try {
      socket = new WebSocket(`${scheme}//${window.location.host}${wsPath}`);
    } catch (error) {
      poll(true);
      return;
    }
    socket.onopen = () => {
      opened = true;
      connected = true;
      poll(false);
      watch();
      nudge(); // whatever changed between the page's render and now
    };
    socket.onmessage = (message) => {
      const data = JSON.parse(message.data);
      // A new log line shows on its task's page only; lists have no log.
      const forPage = pageTask ? data.task_id === pageTask : data.event !== "task_logged";
      // "ready": every process now tells this page of changes; fetch what came before.
      if (data.event === "ready" || (data.event !== "watching" && forPage)) {
        nudge();
      }
    };
    socket.onclose = () => {
      connected = false;
      poll(true);
      if (opened) {
        setTimeout(connect, 5000); // the server restarted: try again, polling meanwhile
      }
    };
  }

  connect();
})();
