from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("streaming", "0003_virtualdisplay_owned"),
    ]

    operations = [
        migrations.AddField(
            model_name="virtualdisplay",
            name="output",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="virtualdisplay",
            name="wayland",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
    ]
