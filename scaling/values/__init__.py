"""The values passed around: topology, metric windows, reasons, readiness, state, findings, the plan and its codec."""
