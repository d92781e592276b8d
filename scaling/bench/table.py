"""The bench's comparison table as text, one line per workload and policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scaling.bench.run import Row


def fmt(value) -> str:
    """A table cell: ``-`` for None, thousands separated, 3 decimals below 10."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if value.is_integer():
            return f"{value:,.0f}"
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_table(rows: list[Row]) -> str:
    """The comparison table, one line per workload and policy."""
    header = ("workload", "policy", "rescales", "per_day", "max_steps", "converge_s", "osc", "peak_backlog",
              "peak_lag_s", "slo300_s", "slo60_s", "longest_s", "lost", "core_h", "vs_oracle", "vs_held", "under")
    lines = []
    for r in rows:
        steps = r.max_steps_to_converge
        steps_text = ("-" if not r.extra["has_changes"] else "never" if steps is None else str(steps))
        converge = ",".join("never" if c is None else str(c) for c in r.extra["converge_s"]) or "-"
        lines.append((r.workload, r.policy, fmt(r.rescales), fmt(r.extra["rescales_per_day"]), steps_text,
                      converge, fmt(r.oscillations), fmt(r.peak_backlog), fmt(r.extra["peak_lag_s"]),
                      fmt(r.slo_violation_s), fmt(r.slo_violation_60_s), fmt(r.extra["longest_violation_s"]),
                      fmt(r.records_lost), fmt(r.core_hours), fmt(r.core_hours_vs_oracle),
                      fmt(r.core_hours_vs_held), fmt(r.underprovisioned_fraction)))
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    previous = None
    for line in lines:
        if previous is not None and line[0] != previous:
            out.append("")
        previous = line[0]
        out.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
    return "\n".join(out)
