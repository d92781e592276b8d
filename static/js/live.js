// Live updates without a full reload (a small fetch loop in place of htmx polling):
// - any element with data-live-url gets its inner HTML replaced by that URL's fragment every
//   data-live-every ms (default 5000), unless the user is typing in a field inside it or has unfolded a
//   <details> inside it;
// - the job page (#dag with data-job-live-url) redraws its Plotly figures, stale badge and status panel;
// - a form with data-confirm="question" asks in the page's <dialog id="confirm-dialog"> before it is
//   sent (also for forms that a live refresh inserts later): Cancel sends nothing. A ticked checkbox of
//   the form with its own data-confirm asks its question instead (e.g. approve with the heap change).
(function () {
  const plotConfig = {displayModeBar: false, responsive: true};

  function busy(el) {
    const dialog = document.getElementById("confirm-dialog");
    if (dialog && dialog.open) return true;  // a question is open: keep the form it belongs to in place
    if (el.querySelector("details[open]")) return true;  // someone reads what they unfolded: keep it open
    const active = document.activeElement;
    if (active && el.contains(active) && (active.tagName === "INPUT" || active.tagName === "TEXTAREA")) return true;
    return Array.from(el.querySelectorAll("input[type=text], input:not([type]), textarea")).some((i) => i.value);
  }

  async function get(url, accept) {
    const response = await fetch(url, {credentials: "same-origin", headers: {"Accept": accept, "X-Requested-With": "fetch"}});
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    return accept === "application/json" ? response.json() : response.text();
  }

  function poll(el) {
    const every = parseInt(el.dataset.liveEvery || "5000", 10);
    async function tick() {
      try {
        if (!busy(el)) {
          const html = await get(el.dataset.liveUrl, "text/html");
          // asked again: a question may have opened while the fragment was on its way
          if (html !== el.dataset.liveLast && !busy(el)) {
            el.innerHTML = html;
            el.dataset.liveLast = html;
          }
        }
      } catch (err) {
        console.warn("live update failed", err);
      }
      setTimeout(tick, every);
    }
    setTimeout(tick, every);
  }

  function draw(id, figure) {
    if (!figure || !window.Plotly) return;
    const el = document.getElementById(id);
    const empty = el.querySelector(".muted");
    if (empty) empty.remove();
    Plotly.react(el, figure.data, figure.layout, plotConfig);
  }

  function jobPage(dag) {
    const initial = (id) => {
      const node = document.getElementById(id);
      return node ? JSON.parse(node.textContent) : null;
    };
    draw("dag", initial("dag-figure"));
    draw("series", initial("series-figure"));
    async function refresh() {
      try {
        const data = await get(dag.dataset.jobLiveUrl, "application/json");
        draw("dag", data.dag);
        draw("series", data.series);
        const stale = document.getElementById("dag-stale");
        if (stale) stale.innerHTML = data.stale;
        dag.classList.toggle("is-stale", Boolean(data.stale && data.stale.trim()));
        const panel = document.getElementById("panel");
        if (!busy(panel)) panel.innerHTML = data.panel;
      } catch (err) {
        console.warn("live update failed", err);
      }
    }
    setInterval(refresh, 5000);
  }

  // Confirmation: one listener on the document (capture phase), so forms replaced by a live refresh
  // are covered too. The submitter (e.g. the approve button's name=action value=approve) is kept.
  function confirmForms() {
    const dialog = document.getElementById("confirm-dialog");
    if (!dialog) return;
    document.addEventListener("submit", function (event) {
      const form = event.target;
      if (!(form instanceof HTMLFormElement) || !form.dataset.confirm || form.dataset.confirmed === "yes") return;
      event.preventDefault();
      const submitter = event.submitter || null;
      const box = form.querySelector("input[type=checkbox][data-confirm]:checked");
      document.getElementById("confirm-text").textContent = box ? box.dataset.confirm : form.dataset.confirm;
      dialog.returnValue = "";
      dialog.addEventListener("close", function onClose() {
        dialog.removeEventListener("close", onClose);
        if (dialog.returnValue !== "ok") return;
        form.dataset.confirmed = "yes";
        form.requestSubmit(submitter && form.contains(submitter) ? submitter : undefined);
      });
      dialog.showModal();
      document.getElementById("confirm-cancel").focus();
    }, true);
  }

  document.addEventListener("DOMContentLoaded", function () {
    confirmForms();
    document.querySelectorAll("[data-live-url]").forEach(poll);
    const dag = document.querySelector("[data-job-live-url]");
    if (dag) jobPage(dag);
  });
})();
