"""`ember.linalg` (being written)."""
