/* What the live admin (admin_live.js) and the dashboard (admin_dashboard.js) share: a page
 * that fetches itself again through the admin's own view, one fetch at a time, and at most
 * one fetch for every burst of changes. Load it (deferred) before either script.
 */
"use strict";
/**
 * @param {HTMLElement} config the page's config element; data-refreshes counts the refreshes
 * @param {object} options
 * @param {(next: Document) => boolean} options.apply swap in what changed; true: it counts
 * @param {() => boolean} [options.skip] true: not now (the next change or round tries again)
 * @param {number} options.atMostEvery milliseconds between refreshes at the least
 * @param {number} options.pause the shortest wait before a refresh, in milliseconds
 * @param {number} [options.lastRun] when the page was last fetched (Date.now())
 */
window.mcpTasksRefresher = function (config, options) {
  const skip = options.skip || (() => false);
  let lastRun = options.lastRun || 0;
  let timer = null;
  let inflight = false;
  let again = false;

  async function refresh() {
    if (inflight) {
      again = true;
      return;
    }
    if (skip()) {
      return;
    }
    inflight = true;
    lastRun = Date.now();
    try {
      const response = await fetch(window.location.href, { credentials: "same-origin" });
      if (response.ok && !response.redirected) {
        const next = new DOMParser().parseFromString(await response.text(), "text/html");
        if (options.apply(next)) {
          config.dataset.refreshes = String(Number(config.dataset.refreshes || 0) + 1);
        }
      }
    } catch (error) {
      // Offline for a moment: the next change or round tries again.
    } finally {
      inflight = false;
      if (again) {
        again = false;
        soon();
      }
    }
  }

  function soon() {
    // One refresh for every burst of changes, at most one per atMostEvery.
    if (timer) {
      return;
    }
    const wait = Math.max(options.pause, options.atMostEvery - (Date.now() - lastRun));
    timer = setTimeout(() => {
      timer = null;
      refresh();
    }, wait);
  }

  return { refresh, soon, sinceLastRun: () => Date.now() - lastRun };
};
