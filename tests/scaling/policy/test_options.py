"""The option table (``scaling.policy.options``): one declaration per option, one set of defaults, its bounds
enforced by ``scaling.Policy`` and by scenario parsing, and docs/POLICY.md generated from it."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from scaling.__main__ import main
from scaling.policy.option_types import Kind, Option, PolicyError, Scope
from scaling.policy.options import OPTION, OPTIONS, errors, flink_defaults, job_options, policy_options
from scaling.policy.policy import Policy, utilization_band
from scaling.scenario.format import evaluate_text
from scaling.scenario.values import ScenarioError
from scaling.words.options_doc import markdown
from tests.repo import ROOT

POLICY_MD = ROOT / "docs" / "POLICY.md"


def just_outside(option: Option) -> list:
    """A value just below the low bound and one just above the high bound."""
    low, high = option.bounds
    if option.kind == Kind.INTEGER:
        return [low - 1, high + 1]
    return [low - max(1e-6, abs(low) * 1e-9), high + max(1e-6, abs(high) * 1e-9)]


def with_switch(option: Option, value) -> dict:
    """``{option: value}``, with the switch that enables its bounds turned on."""
    return {option.name: value, **({option.enabled_by: True} if option.enabled_by else {})}


BOUNDED_POLICY = [o for o in policy_options() if o.bounds is not None]


def test_each_option_is_declared_once_and_policy_has_exactly_the_policy_options():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    assert {f.name for f in fields(Policy)} == {o.name for o in policy_options()}
    assert {o.name for o in job_options()} == {o.name for o in OPTIONS if o.scope != Scope.POLICY}


def test_policy_defaults_are_the_tables():
    policy = Policy()
    for option in policy_options():
        assert getattr(policy, option.name) == option.default, option.name


def test_each_default_is_valid_and_a_different_flink_default_says_why():
    assert errors({o.name: o.default for o in OPTIONS}) == []
    for option in OPTIONS:
        assert option.help and not option.help.startswith(option.name), option.name
        differs = option.flink_default is not None
        assert differs == bool(option.differs_because), option.name
        if differs:
            assert option.flink_key and option.flink_default != option.default, option.name
        if option.enabled_by:
            assert OPTION[option.enabled_by].kind == Kind.SWITCH, option.name
        assert (option.kind == Kind.CHOICE) == bool(option.choices), option.name


def test_flink_defaults_are_the_ones_that_differ():
    assert flink_defaults() == {"catch_up_duration_s": 1800.0, "restart_time_s": 300.0, "vertex_max_parallelism": 200,
                                "effectiveness_detection_enabled": False}
    assert Policy(**flink_defaults()).catch_up_duration_s == 1800.0


@pytest.mark.parametrize("option", BOUNDED_POLICY, ids=lambda o: o.name)
def test_policy_and_scenario_accept_exactly_the_bounds(option):
    for value in option.bounds:  # each bound alone (the rules between options are Policy's, tested elsewhere)
        assert errors(with_switch(option, value)) == []
    for value in just_outside(option):
        with pytest.raises(PolicyError, match=f"^{option.name}: must be within"):
            Policy(**with_switch(option, value))
        doc = {"format": 1, "policy": with_switch(option, value), "vertices": [{"id": "v", "source": True}],
               "steps": [{"metrics": {"v": {"records_in_per_s": 1, "busy_time_ms_per_s": 10}}}]}
        with pytest.raises(ScenarioError, match=f"^policy.{option.name}: must be within"):
            evaluate_text(json.dumps(doc))


@pytest.mark.parametrize("option", [o for o in policy_options() if o.kind == Kind.CHOICE], ids=lambda o: o.name)
def test_a_choice_outside_the_table_is_refused_with_its_name(option):
    with pytest.raises(PolicyError, match=f"^{option.name}: must be one of {', '.join(option.values)}"):
        Policy(**{option.name: "sideways"})


def test_a_switched_off_option_is_not_bounded():
    assert Policy(effectiveness_detection_enabled=False, effectiveness_threshold=7.0).effectiveness_threshold == 7.0
    with pytest.raises(PolicyError, match="when effectiveness_detection_enabled is on"):
        Policy(effectiveness_detection_enabled=True, effectiveness_threshold=7.0)


def test_policy_md_is_the_generated_one(capsys):
    assert main(["options", "--markdown"]) == 0
    generated = capsys.readouterr().out
    assert generated == markdown()
    assert POLICY_MD.read_text(encoding="utf-8") == generated, \
        "docs/POLICY.md is stale: run python -m scaling options --markdown > docs/POLICY.md"
    for option in OPTIONS:
        assert f"| `{option.name}` |" in generated


@pytest.mark.parametrize("target, band", [
    (0.7, (0.4, 1.0)),     # 0.7 - 0.3 is 0.39999999999999997 in floats
    (0.35, (0.05, 0.65)),  # 0.04999999999999999 and 0.6499999999999999
    (0.2, (0.0, 0.5)),     # clipped at 0
    (0.9, (0.6, 1.0)),     # clipped at 1
])
def test_the_default_band_lies_exactly_on_target_minus_and_plus_0_3(target, band):
    assert utilization_band(target) == band
