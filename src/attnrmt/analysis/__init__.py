"""Analysis of sweep results: bulk fit, thresholds, comparisons, figures (spec §6)."""
