// Live updates of the job page: fetch the numbers every few seconds, redraw without a reload.
(function () {
  const dag = document.getElementById("dag");
  if (!dag) return;
  const url = dag.dataset.liveUrl;
  const config = {displayModeBar: false, responsive: true};
  async function refresh() {
    try {
      const response = await fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}});
      if (!response.ok) return;
      const data = await response.json();
      if (data.dag) {
        const empty = document.getElementById("dag-empty");
        if (empty) empty.remove();
        Plotly.react(dag, data.dag.data, data.dag.layout, config);
      }
      if (data.series) Plotly.react("series", data.series.data, data.series.layout, config);
      const panel = document.getElementById("panel");
      const focused = panel.contains(document.activeElement) && document.activeElement.tagName === "INPUT";
      if (!focused) panel.innerHTML = data.panel;
    } catch (err) {
      console.warn("live update failed", err);
    }
  }
  refresh();
  setInterval(refresh, 3000);
})();
