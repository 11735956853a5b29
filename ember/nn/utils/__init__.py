"""nn utilities."""
