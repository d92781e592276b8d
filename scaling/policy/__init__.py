"""The policy: every option declared once, their types, ``Policy`` and excluded periods (the bottom room)."""
