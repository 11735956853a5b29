"""`ember.sparse` (being written)."""
