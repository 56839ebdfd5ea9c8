# Placeholder: the analysis engineer replaces this file (report stage).
