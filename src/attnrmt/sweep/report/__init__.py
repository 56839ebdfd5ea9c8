"""Read-only views of a run for people: progress, status, provenance, failed cells and the
end summary; nothing here writes results. No public names: import from the modules."""

__all__: list[str] = []
