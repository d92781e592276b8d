"""Plotly figures of the job page (the DAG coloured by utilization, the time-series charts) and of
the rescales page (executors over time against the recommendation, min and max).

Figures are plain Plotly JSON dicts (``{"data": [...], "layout": {...}}``) rather than
``plotly.graph_objects``: the same output without the per-property validation, which costs tens of
milliseconds per page. ``plotly.min.js`` (served locally from the plotly wheel) draws them.
"""

from __future__ import annotations

from collections import defaultdict

from scaling.planner.sizing import SKEW_REPORTED
from webapp.dashboard.reads import ChartData

#: One fixed utilization scale for every DAG: green (idle) to red (saturated), 0..1.
UTILIZATION_SCALE = [[0.0, "#16a34a"], [0.5, "#facc15"], [0.8, "#f97316"], [1.0, "#dc2626"]]
RESCALE_COLOUR = "#7c3aed"


def _layers(vertices: list[dict]) -> dict[str, int]:
    """Longest-path layer of each vertex from the sources (a layered layout, sources on top)."""
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
    """``p → p'`` when a change is proposed, else ``p``."""
    proposed = v.get("proposed")
    return f"{v['tasks']} → {proposed}" if proposed is not None and proposed != v["tasks"] else f"{v['tasks']}"


def _hex(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def utilization_colour(utilization: float) -> str:
    """The colour of ``utilization`` (0..1) on :data:`UTILIZATION_SCALE`, linearly interpolated."""
    u = min(1.0, max(0.0, utilization))
    for (u0, c0), (u1, c1) in zip(UTILIZATION_SCALE, UTILIZATION_SCALE[1:]):
        if u <= u1:
            share = (u - u0) / (u1 - u0)
            rgb = [round(a + (b - a) * share) for a, b in zip(_hex(c0), _hex(c1))]
            return "#{:02x}{:02x}{:02x}".format(*rgb)
    return UTILIZATION_SCALE[-1][1]


def _ink(background: str) -> str:
    r, g, b = _hex(background)
    return "#111827" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


#: Vertical distance between two layers of the graph, px; a node box is about 80 px high.
LAYER_PX = 150
#: Half a node box's height plus a little air, px: arrows start and stop this far from a node's centre.
NODE_HALF_PX = 46


#: A stage busy less than this share of its slots cannot set the batch's pace: its tasks' jitter
#: (x1.1-1.3 on tasks of a few ms, measured in the demo and tests/fixtures/spark-4.3.0-skew) stays in
#: the hover, out of the box.
SKEW_SHOWN_MIN_UTILIZATION = 0.05


#: What the batch overhead is, in the hover of its element in the DAG.
OVERHEAD_HOVER = ("the batch's time outside its stages' tasks: planning, commit, the Python workers' start, "
                  "scheduling; more cores do not shorten it")


def _overhead_node(overhead: dict, x: float, y: float) -> dict:
    """The DAG's element of the batch overhead (``webapp.dashboard.reads.dag_overhead``): a box coloured by
    its share of the batch on the utilization scale, at ``(x, y)``."""
    colour = utilization_colour(overhead["share"])
    text = (f"<b>batch overhead</b><br>{overhead['share']:.0%} of each batch"
            f"<br>{overhead['overhead_s']:.2f} s of {overhead['batch_s']:.2f} s")
    return {"x": x, "y": y, "xref": "x", "yref": "y", "showarrow": False, "text": text, "name": "overhead",
            "align": "center", "bgcolor": colour, "borderpad": 6, "bordercolor": "#111827", "borderwidth": 2,
            "font": {"size": 12, "color": _ink(colour)},
            "hovertext": f"<b>batch overhead</b>: {overhead['share']:.0%} of each batch<br>{OVERHEAD_HOVER}",
            "hoverlabel": {"bgcolor": "#ffffff", "font": {"color": "#111827"}}}


def dag_figure(vertices: list[dict], overhead: dict | None = None) -> dict:
    """The job DAG, sources on top. Each item of ``vertices``: id, stage (short name), name (Spark's
    operator chain), position, upstream (ids), tasks, proposed (or None), utilization (0..1),
    records_in_per_s, records_out_per_s, and when evaluated: true_processing_rate, true_output_rate
    (at the busiest task's pace when measured), true_processing_rate_mean (or None),
    target_data_rate, ideal_parallelism, selectivity, bottleneck (bool); task_skew (the busiest
    task's busy time over the mean task's, None when not measured; in the box when above
    ``scaling.planner.sizing.SKEW_REPORTED`` on a stage busy at least ``SKEW_SHOWN_MIN_UTILIZATION``).

    Each node is a box coloured by utilization on one fixed scale that carries the stage name,
    parallelism ``p → p'``, utilization and true processing rate (records per busy second); the
    whole operator chain is in its hover. Edges are arrows from box to box, labelled with the
    records per second they carry. Nodes of one layer sit side by side, one unit apart. ``overhead``
    (``webapp.dashboard.reads.dag_overhead``): when ``shown``, the batch overhead is its own box right of
    the stages, with its share of the batch, so that the batch's time outside the stages is in the graph."""
    layer = _layers(vertices)
    by_layer: dict[int, list[str]] = defaultdict(list)
    for v in sorted(vertices, key=lambda v: v["position"]):
        by_layer[layer[v["id"]]].append(v["id"])
    pos = {vid: (i - (len(ids) - 1) / 2, -y) for y, ids in by_layer.items() for i, vid in enumerate(ids)}
    by_id = {v["id"]: v for v in vertices}
    annotations: list[dict] = []
    for v in vertices:
        for u in v["upstream"]:
            if u not in pos:
                continue
            (x0, y0), (x1, y1) = pos[u], pos[v["id"]]
            annotations.append({"x": x1, "y": y1, "ax": x0, "ay": y0, "xref": "x", "yref": "y", "axref": "x",
                                "ayref": "y", "showarrow": True, "arrowhead": 2, "arrowsize": 1.2,
                                "arrowwidth": 1.6, "arrowcolor": "#64748b", "standoff": NODE_HALF_PX,
                                "startstandoff": NODE_HALF_PX, "text": "", "name": "edge"})
            rate = by_id[u].get("records_out_per_s") if len(v["upstream"]) > 1 else v.get("records_in_per_s")
            annotations.append({"x": (x0 + x1) / 2, "y": (y0 + y1) / 2, "xref": "x", "yref": "y",
                                "showarrow": False, "xanchor": "left", "xshift": 8, "name": "edge-label",
                                "text": f"{_rate(rate)} rec/s", "font": {"size": 11, "color": "#334155"}})
    for v in vertices:
        colour = utilization_colour(v["utilization"])
        lines = [f"<b>{v['stage']}</b>", f"p {parallelism_label(v)}",
                 f"utilization {v['utilization']:.0%}",
                 f"true rate {_rate(v.get('true_processing_rate'))} rec/s"]
        skew = v.get("task_skew")
        if skew is not None and skew > SKEW_REPORTED and v["utilization"] >= SKEW_SHOWN_MIN_UTILIZATION:
            lines.append(f"slowest task ×{skew:.2f} the mean")
        if v.get("bottleneck"):
            lines.append("<b>⚠ bottleneck</b>")
        hover = (f"<b>{v['stage']}</b> ({v['id']})<br>{v['name']}<br>parallelism {parallelism_label(v)}"
                 f"<br>utilization {v['utilization']:.0%}"
                 f"<br>true processing rate {_rate(v.get('true_processing_rate'))} rec/s per busy second"
                 + (f" at the busiest task's pace ({_rate(v['true_processing_rate_mean'])} at the mean task's)"
                    if v.get("true_processing_rate_mean") is not None
                    and _rate(v["true_processing_rate_mean"]) != _rate(v.get("true_processing_rate")) else "")
                 + f"<br>true output rate {_rate(v.get('true_output_rate'))} rec/s per busy second"
                 f"<br>target data rate {_rate(v.get('target_data_rate'))} rec/s"
                 f"<br>ideal parallelism {v.get('ideal_parallelism', '–')}<br>selectivity {v.get('selectivity', '–')}"
                 + (f"<br>busiest task busy ×{skew:.2f} the mean task's" if skew is not None
                    else "<br>busiest task not measured"))
        annotations.append({"x": pos[v["id"]][0], "y": pos[v["id"]][1], "xref": "x", "yref": "y",
                            "showarrow": False, "text": "<br>".join(lines), "name": f"node:{v['id']}",
                            "align": "center", "bgcolor": colour, "borderpad": 6,
                            "bordercolor": "#111827" if v.get("bottleneck") else "#cbd5e1",
                            "borderwidth": 3 if v.get("bottleneck") else 1,
                            "font": {"size": 12, "color": _ink(colour)}, "hovertext": hover,
                            "hoverlabel": {"bgcolor": "#ffffff", "font": {"color": "#111827"}}})
    # The nodes as one (invisible) scatter trace too: Plotly's copy of the numbers and the colour bar.
    data = [{"type": "scatter", "name": "vertices", "showlegend": False, "mode": "markers",
             "x": [pos[v["id"]][0] for v in vertices], "y": [pos[v["id"]][1] for v in vertices],
             "text": [v["stage"] for v in vertices], "customdata": [v["id"] for v in vertices],
             "hoverinfo": "skip",
             "marker": {"size": 2, "opacity": 0, "color": [v["utilization"] for v in vertices], "cmin": 0,
                        "cmax": 1, "colorscale": UTILIZATION_SCALE, "showscale": True,
                        "colorbar": {"title": {"text": "utilization"}, "tickformat": ".0%", "thickness": 12}}}]
    layers = max(by_layer, default=0) + 1
    widest = max((len(ids) for ids in by_layer.values()), default=1)
    half_width = max(1.5, widest / 2 + 0.1)
    if overhead is not None and overhead.get("shown"):
        x = max(1.3, widest / 2 + 0.8)
        annotations.append(_overhead_node(overhead, x, -(layers - 1) / 2))
        half_width = x + 0.7
    layout = {"height": 40 + LAYER_PX * layers, "margin": {"l": 10, "r": 10, "t": 20, "b": 20},
              "plot_bgcolor": "#ffffff", "annotations": annotations, "hovermode": "closest", "dragmode": False,
              "xaxis": {"visible": False, "fixedrange": True, "range": [-half_width, half_width]},
              "yaxis": {"visible": False, "fixedrange": True, "range": [-(layers - 1) - 0.5, 0.5]}}
    return {"data": data, "layout": layout}


#: Rows of the series figure, top to bottom: (axis title, share of the height).
SERIES_ROWS = [("records/s", 0.24), ("backlog (records)", 0.19), ("batch ratio R", 0.15),
               ("executors / cores", 0.15), ("utilization per vertex", 0.27)]


#: Plotly's default colour cycle, given to the series explicitly: the backlog is several traces
#: (:func:`_filled_runs`), which would otherwise shift every later trace's colour.
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf")
BACKLOG_COLOUR = SERIES_COLOURS[2]


#: Lines with small markers: a point between two gaps (a slow job's lone batch) has no line to draw.
POINTS = {"mode": "lines+markers", "marker": {"size": 4}}


def _filled_runs(t: list, values: list, *, name: str, yaxis: str, colour: str) -> list[dict]:
    """A series filled down to zero, as one trace per run of values between ``None`` gaps: Plotly
    fills a ``tozeroy`` trace across its gaps (the fill joins the last point before a gap to the first
    after it), which would draw data where nothing was measured. One legend entry for all runs."""
    runs: list[tuple[list, list]] = []
    for x, y in zip(t, values):
        if y is None:
            if runs and runs[-1][0]:
                runs.append(([], []))
            continue
        if not runs:
            runs.append(([], []))
        runs[-1][0].append(x)
        runs[-1][1].append(y)
    runs = [run for run in runs if run[0]] or [([], [])]
    return [{"type": "scatter", "x": xs, "y": ys, "name": name, "fill": "tozeroy", "yaxis": yaxis, **POINTS,
             "line": {"color": colour}, "legendgroup": name, "showlegend": i == 0}
            for i, (xs, ys) in enumerate(runs)]


def series_figure(chart: ChartData, rescales: list[dict]) -> dict:
    """Input (arrival) rate against the rate the batches ran at (input rows ÷ batch time; the job's
    capacity is one figure, ``scaling.forecast.job_figures.job_capacity``, in the status panel),
    backlog, batch ratio, executors and cores, and utilization per stage, on one shared time axis.
    ``None`` values are windows without data: gaps, never zeros. ``rescales``: dicts with ``at`` (ISO
    time) and ``label``, drawn as vertical lines across every row, with a hoverable marker showing the
    proposal."""
    gap = 0.03
    domains, top = [], 1.0
    for _title, share in SERIES_ROWS:
        height = share - gap
        domains.append([max(0.0, top - height), top])
        top -= share
    axes = ["y", "y2", "y3", "y4", "y5"]
    t = chart.t
    c = SERIES_COLOURS
    data = [
        {"type": "scatter", "x": t, "y": chart.arrival_rate, "name": "input (arrival) rate", "yaxis": "y",
         "line": {"color": c[0]}, **POINTS},
        {"type": "scatter", "x": t, "y": chart.capacity_rate,
         "name": "rate while batches run (input rows ÷ batch time)", "yaxis": "y", "line": {"color": c[1]}, **POINTS},
        *_filled_runs(t, chart.backlog, name="backlog", yaxis="y2", colour=BACKLOG_COLOUR),
        {"type": "scatter", "x": t, "y": chart.batch_ratio, "name": "batch ratio R", "yaxis": "y3",
         "line": {"color": c[3]}, **POINTS},
        {"type": "scatter", "x": t, "y": chart.executors, "name": "executors", "yaxis": "y4",
         "line": {"shape": "hv", "color": c[4]}},
        {"type": "scatter", "x": t, "y": chart.cores, "name": "cores", "yaxis": "y4",
         "line": {"shape": "hv", "dash": "dash", "color": c[5]}},
    ]
    for i, (name, values) in enumerate(chart.utilization.values()):
        data.append({"type": "scatter", "x": t, "y": values, "name": f"{name} utilization", "yaxis": "y5",
                     "connectgaps": False, "legendgroup": "utilization", "line": {"color": c[(6 + i) % len(c)]},
                     **POINTS})
    shapes = []
    if rescales:
        data.append({"type": "scatter", "name": "rescale", "showlegend": False, "yaxis": "y", "mode": "markers",
                     "x": [m["at"] for m in rescales], "y": [0] * len(rescales),
                     "hovertext": [m["label"] for m in rescales],
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


def executors_figure(points: dict, policy_min: int, max_cores: int, max_source: str = "policy") -> dict | None:
    """The rescales page's chart, like Dataflow's autoscaling tab: the cores the job ran with over
    time (a step line with a marker per point, so a lone batch between two gaps shows; gaps where
    nothing was measured), the cores each evaluation recommended, the policy's min and the effective
    max (``max_cores``, set by ``max_source``: policy, host, cluster, quota or knob;
    ``webapp.loop.bounds``); None when there is neither a running nor a recommended point (the
    page says "no data yet"). ``points``: ``{"t": [ISO], "cores": [int | None], "rec_t": [ISO],
    "recommended": [int]}``."""
    if all(c is None for c in points["cores"]) and not points["recommended"]:
        return None
    t = points["t"] or points["rec_t"]
    span = [t[0], t[-1]] if t else []
    data = [
        {"type": "scatter", "name": "cores running", "x": points["t"], "y": points["cores"], **POINTS,
         "line": {"shape": "hv", "width": 2.5, "color": "#2563eb"}, "connectgaps": False},
        {"type": "scatter", "name": "recommended", "x": points["rec_t"], "y": points["recommended"],
         "mode": "markers", "marker": {"symbol": "diamond", "size": 7, "color": "#d97706"}},
    ]
    if span:
        data += [
            {"type": "scatter", "name": f"min {policy_min}", "x": span, "y": [policy_min] * 2, "mode": "lines",
             "line": {"dash": "dash", "color": "#6b7280", "width": 1}},
            {"type": "scatter", "name": f"max {max_cores} ({max_source})", "x": span, "y": [max_cores] * 2,
             "mode": "lines",
             "line": {"dash": "dash", "color": "#dc2626", "width": 1}},
        ]
    layout = {"height": 320, "margin": {"l": 50, "r": 20, "t": 10, "b": 40}, "hovermode": "x unified",
              "legend": {"orientation": "h", "y": -0.2}, "xaxis": {"type": "date"},
              "yaxis": {"title": {"text": "cores"}, "rangemode": "tozero", "dtick": 1}}
    return {"data": data, "layout": layout}
