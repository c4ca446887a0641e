"""Storage: where a table's bytes live (local disk, memory, S3 and any fsspec URI)."""

from lakecore.storage.base import FileInfo, Storage, join
from lakecore.storage.open import open_storage
from lakecore.storage.options import OptionsRef

__all__ = ["FileInfo", "OptionsRef", "Storage", "join", "open_storage"]
