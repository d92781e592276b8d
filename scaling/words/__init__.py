"""Words for people: reasons and options rendered as text, in one place."""
