"""Stage 6, the image: gate spec and runner, render, build context, labels, build result, fingerprint, publish."""
