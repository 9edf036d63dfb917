# Probes: named intermediate tensors of a pass (probe.c) and the analyses, reports and
# figures of `tinylm inspect` (inspect*.c); two runs compared point by point (compare.c).
target_sources(tinylm_objects PRIVATE
  src/probes/probe.c
  src/probes/inspect.c
  src/probes/inspect_out.c
  src/probes/inspect_svg.c
  src/probes/inspect_html.c
  src/probes/lens.c
  src/probes/compare.c
  src/probes/compare_out.c)
