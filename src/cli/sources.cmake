add_executable(tinylm_cli
  src/cli/main.c
  src/cli/cli_util.c
  src/cli/cli_args.c
  src/cli/cmd_lesson.c
  src/cli/cmd_info.c
  src/cli/cmd_logits.c
  src/cli/cmd_tokenize.c
  src/cli/cmd_train.c
  src/cli/cmd_generate.c
  src/cli/cmd_inspect.c
  src/cli/cmd_export.c
  src/cli/cmd_sweep.c
  src/cli/cmd_report.c
  src/cli/cmd_lens.c
  src/cli/cmd_compare.c)
set_target_properties(tinylm_cli PROPERTIES OUTPUT_NAME tinylm)
target_link_libraries(tinylm_cli PRIVATE tinylm)
target_include_directories(tinylm_cli PRIVATE ${CMAKE_SOURCE_DIR}/src)
install(TARGETS tinylm_cli RUNTIME DESTINATION bin)
