"""The proposal page's table of predicted beside realized values (issue 13 item 5): text rendered
from the frozen prediction (``Proposal.prediction``) and the values the verification stored
(``verification_detail["realized"]``); nothing here recomputes a prediction."""

from __future__ import annotations


def _duration(seconds) -> str:
    if not isinstance(seconds, (int, float)):
        return "–"
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min {seconds % 60} s"


def _percent(value) -> str:
    return f"{value * 100:.0f} %" if isinstance(value, (int, float)) else "–"


def prediction_rows(prediction: dict, realized: dict | None) -> list[dict]:
    """Predicted (frozen when proposed) beside realized (stored by the verification): one row per
    quantity, ``{key, label, predicted, realized}`` as text. Nothing here recomputes a prediction."""
    p, r = prediction or {}, realized or {}
    inputs = p.get("inputs") or {}

    def rate(value) -> str:
        return f"{value:,.0f} rec/s" if isinstance(value, (int, float)) else "–"

    if p.get("catch_up_s") is not None:
        catch_up = (f"{_duration(p['catch_up_s'])} for {p.get('restart_backlog') or 0:,} records (the backlog "
                    f"{inputs.get('backlog') or 0:,} plus {_duration(p.get('downtime_s'))} of arrivals during "
                    f"the restart)")
    elif p.get("capacity_per_s") is not None:
        catch_up = (f"never: capacity {rate(p['capacity_per_s'])} is not above the arrival rate "
                    f"{rate(inputs.get('arrival_per_s'))}")
    else:
        catch_up = "not predictable: no metrics"
    samples = p.get("downtime_samples") or 0
    if p.get("downtime_s") is None:
        downtime = "–"
    elif p.get("downtime_source") == "measured":
        downtime = (f"{p['downtime_s']:.1f} s (median of {samples} measured restart{'s' if samples != 1 else ''} "
                    f"of this job)")
    else:
        downtime = f"{p['downtime_s']:.1f} s (configured; no restart measured yet)"
    realized_catch_up = (_duration(r["catch_up_s"]) if r.get("catch_up_s") is not None
                         else ("not caught up within the verification window" if r else "–"))
    return [
        {"key": "capacity", "label": "Capacity", "predicted": rate(p.get("capacity_per_s")),
         "realized": rate(r.get("capacity_per_s"))},
        {"key": "utilization", "label": "Utilization",
         "predicted": f"{_percent(p.get('utilization_now'))} now → {_percent(p.get('utilization'))} predicted at the "
                      f"target rate", "realized": _realized_utilization(r)},
        {"key": "batch-ratio", "label": "Batch ratio R",
         "predicted": (f"{p['batch_ratio_now']:.2f} now → {p['batch_ratio']:.2f} predicted"
                       if p.get("batch_ratio_now") is not None and p.get("batch_ratio") is not None else "–"),
         "realized": f"{r['batch_ratio']:.2f}" if r.get("batch_ratio") is not None else "–"},
        {"key": "catch-up", "label": "Catch-up after the restart", "predicted": catch_up,
         "realized": realized_catch_up},
        {"key": "downtime", "label": "Expected downtime", "predicted": downtime,
         "realized": f"{r['downtime_s']:.1f} s" if r.get("downtime_s") is not None else "–"},
    ]


def _realized_utilization(r: dict) -> str:
    """The realized utilization at the arrival rate (comparable with the prediction), and the measured
    busy share beside it when it differs (a catch-up still running raises it; batches that took fewer
    records than arrived lower it)."""
    at_arrival, measured = r.get("utilization"), r.get("busy_share")
    if at_arrival is None or measured is None or round(at_arrival * 100) == round(measured * 100):
        return _percent(at_arrival if at_arrival is not None else measured)
    return f"{_percent(at_arrival)} at the arrival rate (measured busy share {_percent(measured)})"
