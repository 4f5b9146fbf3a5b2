"""Stage 1, the profile: the model, the validating loader, TOML positions, sources (path, PATH@GITREV), the tag."""
