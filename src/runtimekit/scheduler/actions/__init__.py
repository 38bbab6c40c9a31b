"""Built-in scheduling actions."""
