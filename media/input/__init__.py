"""Client input into the session: keyboard and mouse via XTest, gamepads via uinput."""
