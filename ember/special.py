"""`ember.special` (being written)."""
