# Placeholder: the analysis engineer replaces this file (analyze stage).
