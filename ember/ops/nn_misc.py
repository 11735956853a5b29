"""nn ops: misc (see ember.nn.functional)."""
__all__: list[str] = []
