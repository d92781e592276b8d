"""Plotly figures of the job page: the DAG coloured by utilization, and the time-series charts."""

from __future__ import annotations

from collections import defaultdict

import plotly.graph_objects as go

from webapp.jobs.selectors import Series

#: One fixed utilization scale for every DAG: green (idle) to red (saturated).
UTILIZATION_SCALE = [[0.0, "#16a34a"], [0.5, "#facc15"], [0.8, "#f97316"], [1.0, "#dc2626"]]


def _layers(vertices: list[dict]) -> dict[str, int]:
    """Longest-path layer of each vertex from the sources (a layered layout, sources left)."""
    layer: dict[str, int] = {}
    for v in sorted(vertices, key=lambda v: v["position"]):
        layer[v["id"]] = max((layer.get(u, 0) + 1 for u in v["upstream"]), default=0)
    return layer


def _rate(value) -> str:
    if value == "inf" or value is None:
        return "∞" if value == "inf" else "–"
    return f"{value:,.0f}"


def dag_figure(vertices: list[dict]) -> go.Figure:
    """The job DAG. Each item of ``vertices``: id, name, position, upstream (ids), tasks,
    proposed (or None), utilization (0..1), and when evaluated: true_processing_rate,
    true_output_rate, target_data_rate, ideal_parallelism, selectivity, bottleneck (bool),
    records_in_per_s. Node colour = utilization on one fixed scale; size = parallelism."""
    layer = _layers(vertices)
    by_layer: dict[int, list[str]] = defaultdict(list)
    for v in sorted(vertices, key=lambda v: v["position"]):
        by_layer[layer[v["id"]]].append(v["id"])
    pos = {vid: (x, (len(ids) - 1) / 2 - i) for x, ids in by_layer.items() for i, vid in enumerate(ids)}
    fig = go.Figure()
    for v in vertices:
        for u in v["upstream"]:
            (x0, y0), (x1, y1) = pos[u], pos[v["id"]]
            fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", hoverinfo="skip",
                                     line={"color": "#94a3b8", "width": 2}, showlegend=False))
            fig.add_annotation(x=(x0 + x1) / 2, y=(y0 + y1) / 2 + 0.08, showarrow=False,
                               text=f"{_rate(v.get('records_in_per_s'))} rec/s", font={"size": 11})
    labels, hovers = [], []
    for v in vertices:
        arrow = f"{v['tasks']} → {v['proposed']}" if v.get("proposed") not in (None, v["tasks"]) else f"p={v['tasks']}"
        mark = " ⚠ bottleneck" if v.get("bottleneck") else ""
        labels.append(f"<b>{v['name']}</b><br>{arrow}{mark}<br>TPR {_rate(v.get('true_processing_rate'))} rec/s")
        hovers.append(
            f"<b>{v['name']}</b> ({v['id']})<br>parallelism {arrow}<br>utilization {v['utilization']:.0%}"
            f"<br>true processing rate {_rate(v.get('true_processing_rate'))} rec/s per core"
            f"<br>true output rate {_rate(v.get('true_output_rate'))} rec/s per core"
            f"<br>target data rate {_rate(v.get('target_data_rate'))} rec/s"
            f"<br>ideal parallelism {v.get('ideal_parallelism', '–')}"
            f"<br>selectivity {v.get('selectivity', '–')}")
    fig.add_trace(go.Scatter(
        x=[pos[v["id"]][0] for v in vertices], y=[pos[v["id"]][1] for v in vertices],
        mode="markers+text", text=labels, textposition="bottom center", hovertext=hovers, hoverinfo="text",
        customdata=[v["id"] for v in vertices], name="vertices", showlegend=False,
        marker={"size": [28 + 6 * min(v["tasks"], 12) for v in vertices],
                "color": [v["utilization"] for v in vertices], "cmin": 0, "cmax": 1,
                "colorscale": UTILIZATION_SCALE, "showscale": True,
                "colorbar": {"title": {"text": "utilization"}, "tickformat": ".0%"},
                "line": {"color": ["#111827" if v.get("bottleneck") else "#ffffff" for v in vertices],
                         "width": [4 if v.get("bottleneck") else 1 for v in vertices]}}))
    fig.update_layout(height=360, margin={"l": 20, "r": 20, "t": 20, "b": 20}, plot_bgcolor="#ffffff",
                      xaxis={"visible": False, "range": [-0.5, max(layer.values(), default=0) + 0.5]},
                      yaxis={"visible": False, "range": [-1.6, 1.2]})
    return fig


def series_figure(series: Series, rescales: list[dict]) -> go.Figure:
    """Input rate against processing rate, backlog, batch ratio and cores, on one time axis.
    ``rescales``: dicts with ``at`` (ISO time) and ``label`` drawn as vertical markers."""
    from plotly.subplots import make_subplots  # noqa: PLC0415

    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("records/s", "backlog (records)", "batch ratio R and cores"))
    fig.add_trace(go.Scatter(x=series.t, y=series.arrival_rate, name="input (arrival) rate"), row=1, col=1)
    fig.add_trace(go.Scatter(x=series.t, y=series.processed_rate, name="processing rate"), row=1, col=1)
    fig.add_trace(go.Scatter(x=series.t, y=series.backlog, name="backlog", fill="tozeroy"), row=2, col=1)
    fig.add_trace(go.Scatter(x=series.t, y=series.batch_ratio, name="batch ratio R"), row=3, col=1)
    fig.add_trace(go.Scatter(x=series.t, y=series.cores, name="cores", line={"shape": "hv"}), row=3, col=1)
    for marker in rescales:
        fig.add_vline(x=marker["at"], line={"color": "#7c3aed", "dash": "dot"})
        fig.add_trace(go.Scatter(x=[marker["at"]], y=[0], mode="markers", marker={"symbol": "triangle-up",
                                 "size": 12, "color": "#7c3aed"}, name="rescale", hovertext=marker["label"],
                                 hoverinfo="text", showlegend=False), row=1, col=1)
    fig.update_layout(height=520, margin={"l": 40, "r": 20, "t": 30, "b": 30}, legend={"orientation": "h"})
    return fig
