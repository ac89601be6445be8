"""Virtual displays: policy and presets, the state machine, and the Xvfb backend."""
