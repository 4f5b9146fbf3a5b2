"""Stage 5, ABI: the DT_NEEDED check across a stack, the image inventory model, the wheel diff."""
