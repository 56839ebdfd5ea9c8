"""The cell table of a sweep (cells.zarr): its layout, writer and reader. No public names:
import from the modules."""

__all__: list[str] = []
