"""Storage: where a table's bytes live (local disk, memory, S3 and any fsspec URI)."""

from lakecore.storage.base import FileInfo, Storage, join
from lakecore.storage.open import open_storage

__all__ = ["FileInfo", "Storage", "join", "open_storage"]
