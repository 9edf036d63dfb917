add_executable(tlm_dump tests/model/tlm_dump.c)
target_link_libraries(tlm_dump PRIVATE tinylm)
target_include_directories(tlm_dump PRIVATE ${CMAKE_SOURCE_DIR}/src)
