// The rescales page's chart (cores over time against the recommendation, min and max).
document.addEventListener("DOMContentLoaded", function () {
  const figure = JSON.parse(document.getElementById("executors-figure").textContent);
  if (!figure) return;  // no point to draw: the page says "no data yet" instead of an empty axis
  Plotly.newPlot("executors-chart", figure.data, figure.layout, {displayModeBar: false, responsive: true});
});
