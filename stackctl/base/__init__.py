"""Small pieces every stage shares: atomic files and hashes, JSON for dataclasses, bounded concurrency, git."""
