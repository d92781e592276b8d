"""The policy, at the bottom: every option declared once and its types, ``Policy``, excluded periods,
the one finiteness check and Flink's rounding."""
