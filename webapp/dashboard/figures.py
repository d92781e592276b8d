"""Plotly figures of the job page: the DAG coloured by utilization, and the time-series charts.

Figures are plain Plotly JSON dicts (``{"data": [...], "layout": {...}}``) rather than
``plotly.graph_objects``: the same output without the per-property validation, which costs tens of
milliseconds per page. ``plotly.min.js`` (served locally from the plotly wheel) draws them.
"""

from __future__ import annotations

from collections import defaultdict

from webapp.jobs.selectors import ChartData

#: One fixed utilization scale for every DAG: green (idle) to red (saturated), 0..1.
UTILIZATION_SCALE = [[0.0, "#16a34a"], [0.5, "#facc15"], [0.8, "#f97316"], [1.0, "#dc2626"]]
RESCALE_COLOUR = "#7c3aed"


def _layers(vertices: list[dict]) -> dict[str, int]:
    """Longest-path layer of each vertex from the sources (a layered layout, sources left)."""
    layer: dict[str, int] = {}
    for v in sorted(vertices, key=lambda v: v["position"]):
        layer[v["id"]] = max((layer.get(u, 0) + 1 for u in v["upstream"] if u in layer), default=0)
    return layer


def _rate(value) -> str:
    if value == "inf" or value is None:
        return "∞" if value == "inf" else "–"
    if isinstance(value, str):
        return value
    return f"{value:,.0f}"


def parallelism_label(v: dict) -> str:
    """``p → p'`` when a change is proposed, else ``p → p`` (no change)."""
    proposed = v.get("proposed")
    return f"{v['tasks']} → {proposed if proposed is not None else v['tasks']}"


#: Operators that say what a stage does, in the order they are preferred for its short label.
_DEFINING_OPERATORS = ("Scan", "MicroBatchScan", "MapInPandas", "MapInArrow", "BatchEvalPython", "ArrowEvalPython",
                       "FlatMapGroupsInPandas", "StreamingSymmetricHashJoin", "StateStoreSave", "SessionWindowStateStoreSave",
                       "FlatMapGroupsWithState", "TransformWithState", "Window", "Sort", "SortMergeJoin",
                       "BroadcastHashJoin", "HashAggregate", "Generate", "Expand")


def short_label(name: str, most: int = 2) -> str:
    """A node label short enough not to collide with its neighbours: the stage's defining operators
    (scan, Python UDF, stateful operator, join, aggregation), at most ``most`` of them, in plan
    order; the full operator chain stays in the hover text.

    >>> short_label("HashAggregate → StateStoreRestore → HashAggregate → StateStoreSave → Scan ExistingRDD")
    'HashAggregate → StateStoreSave'
    """
    operators = [op.strip() for op in name.split("→") if op.strip()]
    if len(operators) <= most:
        return " → ".join(operators) or name
    defining = []
    for op in operators:
        head = op.split()[0]
        if head in _DEFINING_OPERATORS and head not in defining and not op.startswith("Scan ExistingRDD"):
            defining.append(head)
    picked = defining[:most] or operators[:1]
    return " → ".join(picked) + (" …" if len(picked) < len(operators) else "")


def dag_figure(vertices: list[dict]) -> dict:
    """The job DAG. Each item of ``vertices``: id, name, position, upstream (ids), tasks,
    proposed (or None), utilization (0..1), records_in_per_s, records_out_per_s, and when evaluated:
    true_processing_rate, true_output_rate, target_data_rate, ideal_parallelism, selectivity,
    bottleneck (bool). Node colour = utilization on one fixed scale; size = parallelism; each edge
    is labelled with the records per second it carries."""
    layer = _layers(vertices)
    by_layer: dict[int, list[str]] = defaultdict(list)
    for v in sorted(vertices, key=lambda v: v["position"]):
        by_layer[layer[v["id"]]].append(v["id"])
    pos = {vid: (x, (len(ids) - 1) / 2 - i) for x, ids in by_layer.items() for i, vid in enumerate(ids)}
    by_id = {v["id"]: v for v in vertices}
    data: list[dict] = []
    annotations: list[dict] = []
    edge_x: list = []
    edge_y: list = []
    for v in vertices:
        for u in v["upstream"]:
            if u not in pos:
                continue
            (x0, y0), (x1, y1) = pos[u], pos[v["id"]]
            edge_x += [x0, x1, None]
            edge_y += [y0, y1, None]
            rate = by_id[u].get("records_out_per_s") if len(v["upstream"]) > 1 else v.get("records_in_per_s")
            annotations.append({"x": (x0 + x1) / 2, "y": (y0 + y1) / 2 + 0.1, "showarrow": False,
                                "text": f"{_rate(rate)} rec/s", "font": {"size": 11, "color": "#334155"}})
            annotations.append({"x": x1 - 0.12, "y": y1 + (y0 - y1) * 0.12, "ax": x0 + 0.12,
                                "ay": y0 + (y1 - y0) * 0.12, "xref": "x", "yref": "y", "axref": "x", "ayref": "y",
                                "showarrow": True, "arrowhead": 2, "arrowcolor": "#94a3b8", "text": ""})
    data.append({"type": "scatter", "x": edge_x, "y": edge_y, "mode": "lines", "hoverinfo": "skip",
                 "line": {"color": "#94a3b8", "width": 2}, "showlegend": False, "name": "edges"})
    labels, hovers = [], []
    for v in vertices:
        arrow = parallelism_label(v)
        mark = "<br><b>⚠ bottleneck</b>" if v.get("bottleneck") else ""
        labels.append(f"<b>{short_label(v['name'])}</b><br>{arrow}{mark}")
        hovers.append(
            f"<b>{v['name']}</b> ({v['id']})<br>parallelism {arrow}<br>utilization {v['utilization']:.0%}"
            f"<br>true processing rate {_rate(v.get('true_processing_rate'))} rec/s per core"
            f"<br>true output rate {_rate(v.get('true_output_rate'))} rec/s per core"
            f"<br>target data rate {_rate(v.get('target_data_rate'))} rec/s"
            f"<br>ideal parallelism {v.get('ideal_parallelism', '–')}"
            f"<br>selectivity {v.get('selectivity', '–')}"
            + ("<br><b>bottleneck</b>" if v.get("bottleneck") else ""))
    data.append({
        "type": "scatter", "name": "vertices", "showlegend": False,
        "x": [pos[v["id"]][0] for v in vertices], "y": [pos[v["id"]][1] for v in vertices],
        "mode": "markers+text", "text": labels, "textposition": "bottom center",
        "hovertext": hovers, "hoverinfo": "text", "customdata": [v["id"] for v in vertices],
        "marker": {"size": [26 + 5 * min(v["tasks"], 14) for v in vertices],
                   "color": [v["utilization"] for v in vertices], "cmin": 0, "cmax": 1,
                   "colorscale": UTILIZATION_SCALE, "showscale": True,
                   "colorbar": {"title": {"text": "utilization"}, "tickformat": ".0%", "thickness": 12},
                   "line": {"color": ["#111827" if v.get("bottleneck") else "#ffffff" for v in vertices],
                            "width": [4 if v.get("bottleneck") else 1 for v in vertices]},
                   "symbol": ["diamond" if v.get("bottleneck") else "circle" for v in vertices]}})
    rows = max((len(ids) for ids in by_layer.values()), default=1)
    layout = {"height": 340 + 60 * max(0, rows - 2), "margin": {"l": 20, "r": 20, "t": 20, "b": 20},
              "plot_bgcolor": "#ffffff", "annotations": annotations, "hovermode": "closest",
              "xaxis": {"visible": False, "range": [-0.5, max(layer.values(), default=0) + 0.5]},
              "yaxis": {"visible": False, "range": [-(rows - 1) / 2 - 0.8, (rows - 1) / 2 + 0.5]}}
    return {"data": data, "layout": layout}


#: Rows of the series figure, top to bottom: (axis title, share of the height).
SERIES_ROWS = [("records/s", 0.24), ("backlog (records)", 0.19), ("batch ratio R", 0.15),
               ("executors / cores", 0.15), ("utilization per vertex", 0.27)]


def series_figure(chart: ChartData, rescales: list[dict]) -> dict:
    """Input rate against processing rate, backlog, batch ratio, executors and cores, and utilization
    per vertex, on one shared time axis. ``rescales``: dicts with ``at`` (ISO time) and ``label``,
    drawn as vertical lines across every row, with a hoverable marker showing the proposal."""
    gap = 0.03
    domains, top = [], 1.0
    for _title, share in SERIES_ROWS:
        height = share - gap
        domains.append([max(0.0, top - height), top])
        top -= share
    axes = ["y", "y2", "y3", "y4", "y5"]
    t = chart.t
    data = [
        {"type": "scatter", "x": t, "y": chart.arrival_rate, "name": "input (arrival) rate", "yaxis": "y"},
        {"type": "scatter", "x": t, "y": chart.processed_rate, "name": "processing rate", "yaxis": "y"},
        {"type": "scatter", "x": t, "y": chart.backlog, "name": "backlog", "fill": "tozeroy", "yaxis": "y2"},
        {"type": "scatter", "x": t, "y": chart.batch_ratio, "name": "batch ratio R", "yaxis": "y3"},
        {"type": "scatter", "x": t, "y": chart.executors, "name": "executors", "yaxis": "y4",
         "line": {"shape": "hv"}},
        {"type": "scatter", "x": t, "y": chart.cores, "name": "cores", "yaxis": "y4", "line": {"shape": "hv", "dash": "dash"}},
    ]
    for name, values in chart.utilization.values():
        data.append({"type": "scatter", "x": t, "y": values, "name": f"{name} utilization", "yaxis": "y5",
                     "connectgaps": False, "legendgroup": "utilization"})
    shapes = []
    if rescales:
        data.append({"type": "scatter", "name": "rescale", "showlegend": False, "yaxis": "y", "mode": "markers",
                     "x": [m["at"] for m in rescales], "y": [0] * len(rescales), "hovertext": [m["label"] for m in rescales],
                     "hoverinfo": "text", "marker": {"symbol": "triangle-up", "size": 13, "color": RESCALE_COLOUR}})
        shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": m["at"], "x1": m["at"], "y0": 0, "y1": 1,
                   "line": {"color": RESCALE_COLOUR, "dash": "dot", "width": 1.5}} for m in rescales]
    layout: dict = {"height": 760, "margin": {"l": 60, "r": 20, "t": 20, "b": 40}, "shapes": shapes,
                    "legend": {"orientation": "h", "y": -0.06}, "hovermode": "x unified",
                    "xaxis": {"type": "date", "anchor": axes[-1]}}
    for i, ((title, _share), domain) in enumerate(zip(SERIES_ROWS, domains)):
        key = "yaxis" if i == 0 else f"yaxis{i + 1}"
        layout[key] = {"domain": domain, "title": {"text": title, "font": {"size": 11}}, "rangemode": "tozero"}
    layout["yaxis5"]["range"] = [0, 1.05]
    layout["yaxis5"]["tickformat"] = ".0%"
    return {"data": data, "layout": layout}
