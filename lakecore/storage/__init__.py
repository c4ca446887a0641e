"""Storage: where a table's bytes live (local disk, memory, S3 and any fsspec URI)."""

from lakecore.storage.base import FileInfo, Staged, Storage, join, remove_empty_dirs, stage
from lakecore.storage.open import open_storage
from lakecore.storage.options import OptionsRef

__all__ = ["FileInfo", "OptionsRef", "Staged", "Storage", "join", "open_storage", "remove_empty_dirs",
           "stage"]
