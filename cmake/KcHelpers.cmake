include(GoogleTest)

# Compile options shared by every kc target: warnings (errors under KC_WARNINGS_AS_ERRORS),
# device line info for profilers, and the CUDA features the kernels use.
function(kc_set_target_options target)
  set(_cxx_warnings -Wall -Wextra -Wshadow -Wno-unknown-pragmas)
  string(REPLACE ";" "," _cxx_warnings_csv "${_cxx_warnings}")
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${_cxx_warnings}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_cxx_warnings_csv}>
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>
    $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
  if(KC_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Werror>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>
      $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>)
  endif()
  if(KC_PTXAS_VERBOSE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
  endif()
  set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
endfunction()

# kc_mark_kernel_sources(files...)
# Kernel (rung) files include argument headers only: compiled with KC_KERNEL_SOURCE defined, the
# harness headers that must stay out of them (the registry, cuBLAS wrappers) stop the build with a
# message.
function(kc_mark_kernel_sources)
  set_source_files_properties(${ARGN} PROPERTIES COMPILE_DEFINITIONS KC_KERNEL_SOURCE=1)
endfunction()

# kc_add_test(NAME name SOURCES ... LIBS ... LABELS ...)
# A GoogleTest executable whose cases become ctest tests carrying LABELS (e.g. "stage1;gpu").
# Discovery runs at test time (PRE_TEST), so building never needs a GPU.
function(kc_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  kc_set_target_options(${T_NAME})
  gtest_discover_tests(${T_NAME}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    TEST_LIST ${T_NAME}_TESTS)
  # gtest_discover_tests splits a multi-value LABELS property, so the labels are set by a script
  # that ctest includes after the discovered-test list.
  set(_labels_script "${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_labels.cmake")
  file(WRITE "${_labels_script}"
    "foreach(kc_test IN LISTS ${T_NAME}_TESTS)\n"
    "  set_tests_properties(\"\${kc_test}\" PROPERTIES LABELS \"${T_LABELS}\")\n"
    "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_labels_script}")
endfunction()
