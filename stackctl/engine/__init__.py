"""Stage 7, the engine edge: the Docker adapter and the registry client (the only code importing docker or
speaking the registry API)."""
