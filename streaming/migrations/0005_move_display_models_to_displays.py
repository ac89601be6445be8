"""The display models now live in the `displays` app (same tables): state
only."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("streaming", "0004_virtualdisplay_output_wayland"),
        ("displays", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="VirtualDisplay"),
                migrations.DeleteModel(name="CustomPreset"),
            ],
            database_operations=[],
        ),
    ]
