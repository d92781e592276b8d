"""``docs/POLICY.md``, rendered from the option table (``python -m scaling options --markdown``), as
Flink renders its autoscaler configuration page from ``AutoScalerOptions``."""

from __future__ import annotations

from scaling.policy.option_types import Kind, Option, Scope, number_text
from scaling.policy.options import OPTIONS

HEADER = """# Policy options

Generated from `scaling/policy/options.py` by `python -m scaling options --markdown > docs/POLICY.md`;
do not edit by hand (`tests/scaling/policy/test_options.py` checks that this file is the generated one).

Each option is declared once. **Where** says where it is set: *policy and job* options are
`scaling.Policy` options (a scenario's `policy`, SCENARIO.md) and fields of a job's policy in the web
app (admin and API); *policy* options exist in scenarios only; *job* options in the web app only.
Bounds are inclusive; an option switched by another is checked only while that one is on (Flink's
`AutoscalerValidator.validateNumberIfEnabled`). Where our default differs from Flink's, the last
section says why.
"""


def _value(value: object) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[]" if not value else str(list(value))
    if isinstance(value, float):
        return number_text(value)
    return str(value)


def _bounds(option: Option) -> str:
    if option.kind == Kind.CHOICE:
        return ", ".join(f"`{value}`" for value in option.values)
    if option.bounds is None:
        return ""
    low, high = option.bounds
    text = f"[{number_text(low)}, {number_text(high)}]"
    return f"{text} when `{option.enabled_by}` is on" if option.enabled_by else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(option: Option) -> str:
    key = f"`{option.flink_key}`" if option.flink_key else ""
    cells = [f"`{option.name}`", str(option.kind), option.unit, f"`{_value(option.default)}`", _bounds(option),
             key, str(option.scope), option.help]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def markdown() -> str:
    """The whole of ``docs/POLICY.md``: the table of options (scaling's first, then the web app's),
    then each default that differs from Flink's with Flink's value and why."""
    lines = [HEADER, "## Options", "",
             "| Option | Kind | Unit | Default | Bounds | Flink key | Where | Meaning |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    ordered = [o for o in OPTIONS if o.scope != Scope.WEB] + [o for o in OPTIONS if o.scope == Scope.WEB]
    lines += [_row(o) for o in ordered]
    lines += ["", "## Defaults that differ from Flink's", ""]
    for option in ordered:
        if option.differs_because:
            lines.append(f"- `{option.name}`: `{_value(option.default)}` (Flink's `{option.flink_key}`: "
                         f"`{_value(option.flink_default)}`). {option.differs_because}")
    return "\n".join(lines) + "\n"
