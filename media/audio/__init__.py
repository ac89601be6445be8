"""Session audio: the capture from a per-session virtual sink, the processing chain, Opus."""
