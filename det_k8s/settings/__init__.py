"""Settings: what the user wrote, merged like helm merges values, validated with key paths."""

from .loader import Document, LoadedSettings, load_settings, redact
from .model import CheckpointStorage, Settings, TaskDefaults

__all__ = ["CheckpointStorage", "Document", "LoadedSettings", "Settings", "TaskDefaults", "load_settings", "redact"]
