"""nn ops: loss (see ember.nn.functional)."""
__all__: list[str] = []
