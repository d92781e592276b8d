"""The scenario format, ``python -m scaling evaluate`` and the replay of recorded windows."""
