"""Names of the bundled PyTorch models (importable without torch, for the command line)."""

MODELS = ("gcn", "graphsage", "autoencoder", "decoder")
