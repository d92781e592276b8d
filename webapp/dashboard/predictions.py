"""The proposal page's table of predicted beside realized values: text rendered from the frozen
prediction (``Proposal.prediction``), the values the verification stored
(``verification_detail["realized"]``) and the execution's one catch-up (:mod:`webapp.dashboard.numbers`);
nothing here recomputes a prediction, and nothing is stated from windows without a completed batch."""

from __future__ import annotations

from scaling.words.reason_text import LOAD_NAME
from webapp.dashboard.numbers import CatchUp, CatchUpState, duration

#: What the realized column says where the verification window had no completed batch.
NO_BATCH = "no batch completed in the verification window"


def _percent(value) -> str:
    return f"{value * 100:.0f} %" if isinstance(value, (int, float)) else "–"


def _rate(value) -> str:
    return f"{value:,.0f} rec/s" if isinstance(value, (int, float)) else "–"


def _predicted_catch_up(p: dict) -> str:
    inputs = p.get("inputs") or {}
    if p.get("catch_up_s") is not None:
        return (f"{duration(p['catch_up_s'])} after the first batch on the new configuration, to drain "
                f"{p.get('restart_backlog') or 0:,} records (the backlog {inputs.get('backlog') or 0:,} plus "
                f"{duration(p.get('downtime_s'))} of arrivals during the restart)")
    if p.get("capacity_per_s") is not None:
        return (f"never: capacity {_rate(p['capacity_per_s'])} is not above the arrival rate "
                f"{_rate(inputs.get('arrival_per_s'))}")
    return "not predictable: no metrics"


def _realized_catch_up(catch_up: CatchUp) -> str:
    """The execution's catch-up, counted from the first batch on the new configuration as the prediction."""
    if catch_up.state == CatchUpState.MEASURED:
        return (f"{duration(catch_up.after_first_batch_s)} after the first batch on the new configuration "
                f"({duration(catch_up.from_start_s)} from the start of the rescale)")
    return catch_up.text


def _downtime(p: dict) -> str:
    samples = p.get("downtime_samples") or 0
    if p.get("downtime_s") is None:
        return "–"
    if p.get("downtime_source") == "measured":
        return (f"{duration(p['downtime_s'])} (median of {samples} measured restart{'s' if samples != 1 else ''} "
                f"of this job)")
    return f"{duration(p['downtime_s'])} (configured; no restart measured yet)"


def _utilization(p: dict) -> str:
    """Utilization is the busy share of the cores at the target rate, now and on the new cores (one
    formula, ``scaling.planner.sizing.busy_share``); the needed utilization the band compares adds the
    backlog's catch-up."""
    load = (p.get("inputs") or {}).get("load")
    with_catch_up = (f"; the {LOAD_NAME} the band compares, with the backlog's catch-up, is {load:.2f} now"
                     if isinstance(load, (int, float)) else "")
    cores = f" on {p['cores_new']} core{'s' if p['cores_new'] != 1 else ''}" if p.get("cores_new") else ""
    return (f"{_percent(p.get('utilization_now'))} now → {_percent(p.get('utilization'))}{cores}, at the target "
            f"rate{with_catch_up}")


def prediction_rows(prediction: dict, realized: dict | None, *, catch_up: CatchUp,
                    batches: int | None = None) -> list[dict]:
    """Predicted (frozen when proposed) beside realized (stored by the verification): one row per
    quantity, ``{key, label, predicted, realized}`` as text. ``catch_up``: the execution's one catch-up;
    ``batches``: the batches the verification window completed (0: nothing realized is stated)."""
    p, r = prediction or {}, realized or {}
    no_batch = r and (batches == 0 or r.get("batches") == 0)
    measured = (lambda text: NO_BATCH) if no_batch else (lambda text: text)
    return [
        {"key": "capacity", "label": "Capacity", "predicted": _rate(p.get("capacity_per_s")),
         "realized": measured(_rate(r.get("capacity_per_s")))},
        {"key": "utilization", "label": "Utilization", "predicted": _utilization(p),
         "realized": measured(_realized_utilization(r))},
        {"key": "batch-ratio", "label": "Batch ratio R",
         "predicted": (f"{p['batch_ratio_now']:.2f} now → {p['batch_ratio']:.2f} predicted"
                       if p.get("batch_ratio_now") is not None and p.get("batch_ratio") is not None else "–"),
         "realized": measured(f"{r['batch_ratio']:.2f}" if r.get("batch_ratio") is not None else "–")},
        {"key": "catch-up", "label": "Catch-up after the restart", "predicted": _predicted_catch_up(p),
         "realized": _realized_catch_up(catch_up)},
        {"key": "downtime", "label": "Expected downtime", "predicted": _downtime(p),
         "realized": duration(r["downtime_s"]) if r.get("downtime_s") is not None else "–"},
    ]


def _realized_utilization(r: dict) -> str:
    """The realized utilization at the arrival rate (comparable with the prediction), and the measured
    busy share beside it when it differs (a catch-up still running raises it; batches that took fewer
    records than arrived lower it)."""
    at_arrival, measured = r.get("utilization"), r.get("busy_share")
    if at_arrival is None or measured is None or round(at_arrival * 100) == round(measured * 100):
        return _percent(at_arrival if at_arrival is not None else measured)
    return f"{_percent(at_arrival)} at the arrival rate (measured busy share {_percent(measured)})"
