// The rescales page's chart (cores over time against the recommendation, min and max).
document.addEventListener("DOMContentLoaded", function () {
  const figure = JSON.parse(document.getElementById("executors-figure").textContent);
  Plotly.newPlot("executors-chart", figure.data, figure.layout, {displayModeBar: false, responsive: true});
});
