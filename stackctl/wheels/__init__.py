"""Stage 3, wheels: a wheel read in place (locally or by range requests), its members scanned, ELF via pyelftools."""
