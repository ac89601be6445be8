"""The display models moved here from `streaming` without touching the database:
their tables keep their names (`db_table`), so this migration only tells Django's state where they
live, and relabels their content types (admin log entries and permissions follow)."""

from django.db import migrations, models


def relabel(apps, schema_editor, old="streaming", new="displays"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def unrelabel(apps, schema_editor):
    relabel(apps, schema_editor, old="displays", new="streaming")


MODELS = ('virtualdisplay', 'custompreset')


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("streaming", "0004_virtualdisplay_output_wayland"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='VirtualDisplay',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slot', models.PositiveIntegerField(unique=True)),
                        ('backend', models.CharField(default='xvfb', max_length=32)),
                        ('owned', models.BooleanField(default=True)),
                        ('width', models.PositiveIntegerField()),
                        ('height', models.PositiveIntegerField()),
                        ('refresh', models.PositiveIntegerField()),
                        ('state', models.CharField(choices=[('active', 'active'), ('lingering', 'lingering'), ('pinned', 'pinned')], db_index=True, default='active', max_length=16)),
                        ('sessions', models.PositiveIntegerField(default=0)),
                        ('client', models.CharField(blank=True, default='', max_length=128)),
                        ('identity_key', models.CharField(db_index=True, max_length=256)),
                        ('identity_slot', models.PositiveIntegerField(blank=True, null=True)),
                        ('group', models.PositiveIntegerField(default=0)),
                        ('display_index', models.PositiveIntegerField(default=0)),
                        ('x', models.IntegerField(default=0)),
                        ('y', models.IntegerField(default=0)),
                        ('topology', models.CharField(default='exclusive', max_length=16)),
                        ('policy', models.JSONField(default=dict)),
                        ('deadline', models.DateTimeField(blank=True, db_index=True, null=True)),
                        ('pid', models.PositiveIntegerField(blank=True, null=True)),
                        ('x_display', models.CharField(blank=True, default='', max_length=16)),
                        ('output', models.CharField(blank=True, default='', max_length=64)),
                        ('wayland', models.CharField(blank=True, default='', max_length=255)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        'db_table': 'streaming_virtualdisplay',
                        'ordering': ['group', 'display_index', 'slot'],
                    },
                ),
                migrations.CreateModel(
                    name='CustomPreset',
                    fields=[
                        ('id', models.CharField(editable=False, max_length=12, primary_key=True, serialize=False)),
                        ('name', models.CharField(max_length=128)),
                        ('fields', models.JSONField(default=dict)),
                        ('game_session', models.CharField(default='auto', max_length=16)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'streaming_custompreset',
                        'ordering': ['created_at', 'id'],
                    },
                ),
            ],
        ),
        migrations.RunPython(relabel, unrelabel),
    ]
