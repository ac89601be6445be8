"""The native plane: a browser tab plays over WebRTC, paired by operator approval."""
