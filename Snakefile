# attnrmt sweep pipeline in a checkout: the workflow is workflow/ (Snakemake catalog
# layout: workflow/Snakefile, workflow/rules/*.smk, workflow/schemas/, workflow/profiles/;
# `profiles` here links to workflow/profiles). Including it by path runs this checkout's
# own rules whatever attnrmt is installed (editable or not).
#
#   snakemake [TARGET] --cores 2 [--configfile my.yaml]   (targets before --configfile)
#
# From any other directory: attnrmt run my.yaml (results under ./results/).


include: "workflow/Snakefile"


# An included file's `default_target` does not carry over to the including Snakefile:
# name the workflow's `rule all` as this one's default target.
workflow.default_target = "all"
