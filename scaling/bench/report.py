"""``bench-report.html``: one Plotly panel per workload with the load, each policy's capacity and
backlog over time, and the comparison table. Plotly's JavaScript is inlined from the installed
plotly package, so the report opens with no network access."""

from __future__ import annotations

import html
from pathlib import Path

from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from scaling.bench.run import DS2_OPTIONS, ROW_KEYS, BenchResult, Run

MAX_POINTS = 400
COLOURS = {"ds2": "#1f77b4", "batch-ratio": "#ff7f0e", "dhalion": "#2ca02c", "uniform": "#d62728",
           "static-peak": "#9467bd", "oracle": "#7f7f7f"}


def _thin(values: list[float], every: int) -> list[float]:
    return values[::every]


def _panel(workload: str, runs: list[Run]) -> str:
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    first = runs[0].result
    every = max(1, len(first.t_s) // MAX_POINTS)
    hours = [t / 3600.0 for t in _thin(first.t_s, every)]
    fig.add_scatter(x=hours, y=_thin(first.load_per_s, every), name="load", line={"color": "black", "width": 2},
                    legendgroup="load")
    for run in runs:
        colour = COLOURS.get(run.policy, None)
        fig.add_scatter(x=hours, y=_thin(run.result.capacity_per_s, every), name=f"{run.policy} capacity",
                        line={"color": colour, "width": 1, "shape": "hv"}, legendgroup=run.policy)
        fig.add_scatter(x=hours, y=_thin(run.result.backlog, every), name=f"{run.policy} backlog",
                        line={"color": colour, "width": 1, "dash": "dot"}, legendgroup=run.policy,
                        secondary_y=True)
    fig.update_layout(title=workload, height=420, margin={"l": 60, "r": 60, "t": 50, "b": 40},
                      legend={"font": {"size": 10}})
    fig.update_xaxes(title_text="hours")
    fig.update_yaxes(title_text="records/s", secondary_y=False)
    fig.update_yaxes(title_text="backlog (records)", secondary_y=True)
    div_id = "panel-" + "".join(c if c.isalnum() else "-" for c in workload)
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"responsive": True})


def _table(result: BenchResult) -> str:
    head = "".join(f"<th>{html.escape(k)}</th>" for k in (*ROW_KEYS, "step_up_steps"))
    body = []
    for row in result.rows:
        cells = "".join(f"<td>{html.escape('-' if v is None else str(v))}</td>" for v in row.as_json().values())
        body.append(f"<tr>{cells}</tr>")
    return f"<table id='bench-table'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def write_report(result: BenchResult, path: str | Path, *, notes: list[str] = ()) -> Path:
    """Write the HTML report to ``path`` and return it."""
    by_workload: dict[str, list[Run]] = {}
    for run in result.runs:
        by_workload.setdefault(run.workload.name, []).append(run)
    panels = "\n".join(f"<section class='panel' data-workload='{html.escape(name)}'>{_panel(name, runs)}</section>"
                       for name, runs in by_workload.items())
    policy = result.policy
    notes_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes) or "<li>every target met</li>"
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sparkscaler policy benchmark</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}} section.panel{{margin:1em 0}}</style>
<script type="text/javascript">{get_plotlyjs()}</script></head>
<body><h1>Policy benchmark ({'quick' if result.quick else 'full'}, seed {result.seed})</h1>
<p>Every policy runs on the same seeded load, noise and downtimes. Policy options shared by all:
utilization target {policy.utilization_target}, band {list(policy.band)}, catch-up {policy.catch_up_duration_s:g} s,
restart time {policy.restart_time_s:g} s (tracked), scale-down delay {policy.scale_down_interval_s:g} s.
ds2 only: {html.escape(", ".join(f"{k} {v}" for k, v in DS2_OPTIONS.items()))} (DS2's activation time,
Kalavri et al., OSDI 2018).
The oracle is hindsight no policy can beat: the cheapest configuration that keeps up with each interval's
load, rescaling at no cost; vs_held compares with it holding each scale-down for the scale-down interval.
SLO violation: seconds of lag above 300 s and above 60 s. Setting: {html.escape(result.setting)}.</p>
<h2>Targets (ds2)</h2><ul id="notes">{notes_html}</ul>
{_table(result)}
{panels}
</body></html>
"""
    out = Path(path)
    out.write_text(page, encoding="utf-8")
    return out
