"""nn ops: norm (see ember.nn.functional)."""
__all__: list[str] = []
