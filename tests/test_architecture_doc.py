"""docs/ARCHITECTURE.md stays true: every file it names exists."""

import re

from tests.repo import ROOT


def test_every_file_the_architecture_map_names_exists():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`((?:scaling|sparkclient|webapp|docs)/[\w/.]+\.(?:py|md))`", text))
    assert len(named) > 40
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {missing}"
