"""Reading the catch-up figures a page states, to compare them: a duration with the origin it is
counted from, or "not caught up (yet)"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A duration as the pages word it: "171 s", "2 min 51 s", "2 min", "1 h 5 min", "1.5 s".
DURATION = re.compile(r"\b(?:(\d+) h\b\s*)?(?:(\d+) min\b\s*)?(?:(\d+(?:\.\d+)?) s\b)?")
NOT_YET = re.compile(r"not (?:yet|caught up)|^[–—-]$")
#: The origins a catch-up is counted from, as the pages word them.
ORIGINS = {"start": re.compile(r"^\s*from the start of the rescale"),
           "first batch": re.compile(r"^\s*(?:from the end of the execution|after the first batch)"),
           "approval": re.compile(r"^\s*from the approval")}


@dataclass(frozen=True)
class CatchUp:
    """A catch-up figure as read: ``caught_up`` False for "not (caught up) yet"; else seconds per
    origin ("unstated" when neither the figure nor its row's label says from when) with the
    precision the words have (60 s for "2 min", 1 s for "2 min 5 s")."""

    text: str
    caught_up: bool
    seconds: dict[str, tuple[float, float]] = field(default_factory=dict)


def _origin(words: str) -> str | None:
    return next((name for name, pattern in ORIGINS.items() if pattern.search(words)), None)


def read_catch_up(text: str, label: str = "") -> CatchUp | None:
    """A catch-up figure's text (and its row's label) as a :class:`CatchUp`; None when it states
    neither a duration nor "not yet"."""
    if NOT_YET.search(text):
        return CatchUp(text, caught_up=False)
    seconds: dict[str, tuple[float, float]] = {}
    for match in DURATION.finditer(text):
        if not match.group(0).strip():
            continue
        h, m, s = match.groups()
        origin = _origin(text[match.end():]) or _origin(label.split(",", 1)[-1]) or "unstated"
        seconds.setdefault(origin, (int(h or 0) * 3600 + int(m or 0) * 60 + float(s or 0), 1.0 if s else 60.0))
    return CatchUp(text, caught_up=True, seconds=seconds) if seconds else None


def disagree(a: CatchUp, b: CatchUp) -> bool:
    """Whether two figures of one execution contradict each other: one caught up and the other not;
    or a duration from one origin (or an unstated one) that differs by more than the words' precision."""
    if a.caught_up != b.caught_up:
        return True
    for origin_a, (sec_a, prec_a) in a.seconds.items():
        for origin_b, (sec_b, prec_b) in b.seconds.items():
            comparable = origin_a == origin_b or "unstated" in (origin_a, origin_b)
            if comparable and abs(sec_a - sec_b) >= max(prec_a, prec_b):
                return True
    return False
