"""``python -m scaling evaluate FILE.json|- [--plans]``: a scenario document through the one door."""

from __future__ import annotations

import json

from scaling.scenario.format import FORMAT, parse, render, run_scenario
from scaling.scenario.values import ScenarioError

__all__ = ["evaluate_command"]


def evaluate_command(text: str, *, plans: bool = False) -> tuple[int, str]:
    """What ``python -m scaling evaluate`` does with a document: ``(0, JSON)``, the output document of
    docs/SCENARIO.md or, with ``plans``, ``{"format": 1, "plans": [...]}`` (each step's plan in its
    stored form, ``JobPlan.to_json``); or ``(2, "error: <field>: <what is wrong>")`` (one line). Only
    ``ScenarioError`` is an input error; anything else is a bug and propagates."""
    try:
        scenario = parse(text)
        results = run_scenario(scenario)
    except ScenarioError as exc:
        return 2, f"error: {exc}".replace("\n", " ")
    if plans:
        return 0, json.dumps({"format": FORMAT, "plans": [plan.to_json() for _, plan in results]}, indent=2)
    return 0, json.dumps(render(scenario, results), indent=2)
