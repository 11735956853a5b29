"""nn ops: pool (see ember.nn.functional)."""
__all__: list[str] = []
