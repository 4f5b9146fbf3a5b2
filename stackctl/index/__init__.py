"""Stage 2, package indexes: where they are for this run (`config`), how pages parse (`pages`), the HTTP client
(`client`), its on-disk cache (`cache`) and remote files read by range (`rangeio`, `rangefile`)."""
