# Reports: self-contained HTML pages (html_report.c) with the page's stylesheet and script
# embedded at build time from report.css / report.js (embed.cmake writes report_assets.c).
set(TLM_REPORT_ASSETS_C ${CMAKE_BINARY_DIR}/generated/report_assets.c)
add_custom_command(
  OUTPUT ${TLM_REPORT_ASSETS_C}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/generated
  COMMAND ${CMAKE_COMMAND} -DOUT=${TLM_REPORT_ASSETS_C} -DCSS=${CMAKE_CURRENT_SOURCE_DIR}/src/report/report.css
          -DJS=${CMAKE_CURRENT_SOURCE_DIR}/src/report/report.js -P ${CMAKE_CURRENT_SOURCE_DIR}/src/report/embed.cmake
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/report/report.css ${CMAKE_CURRENT_SOURCE_DIR}/src/report/report.js
          ${CMAKE_CURRENT_SOURCE_DIR}/src/report/embed.cmake
  COMMENT "Embedding the report's CSS and JS"
  VERBATIM)
# one target generates the file; every library built from these sources depends on it, so
# parallel builds never run the command twice at once (CMake's rule for a shared output)
add_custom_target(tlm_report_assets DEPENDS ${TLM_REPORT_ASSETS_C})
add_dependencies(tinylm_objects tlm_report_assets)
target_sources(tinylm_objects PRIVATE src/report/html_report.c ${TLM_REPORT_ASSETS_C})
