"""Stage 8, review: diffs of profiles, locks and images; the stale-reference scan."""
