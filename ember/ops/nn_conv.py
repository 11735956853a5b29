"""nn ops: conv (see ember.nn.functional)."""
__all__: list[str] = []
