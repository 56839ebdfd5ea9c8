# attnrmt sweep pipeline in a checkout: the workflow ships inside the package
# (src/attnrmt/workflow/Snakefile, with its rules, report captions and profiles; `profiles`
# here links to them). Including it through the imported package keeps the workflow and
# the library that runs it from the same source.
#
#   snakemake [TARGET] --cores 2 [--configfile my.yaml]   (targets before --configfile)
#
# From any other directory: attnrmt run my.yaml (results under ./results/).
from attnrmt.workflow import SNAKEFILE


include: str(SNAKEFILE)

# An included file's `default_target` does not carry over to the including Snakefile:
# name the workflow's `rule all` as this one's default target.
workflow.default_target = "all"
