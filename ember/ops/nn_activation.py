"""nn ops: activation (see ember.nn.functional)."""
__all__: list[str] = []
