"""Stage 4, resolve: targets, the pick per target, newest in line, trains, the closure, the lock, exports,
the wheelhouse."""
