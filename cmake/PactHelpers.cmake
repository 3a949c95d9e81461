# Helpers shared by every module: one way to add a library, a test binary, a fuzz harness.

# pact_add_module(NAME SOURCES... DEPS ...) -> target pact_<NAME>, alias pact::<NAME>; installed and exported as
# Pact::pact_<NAME> (cmake/PactInstall.cmake)
function(pact_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(pact_${name} STATIC ${ARG_SOURCES})
  add_library(pact::${name} ALIAS pact_${name})
  target_include_directories(pact_${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_property(GLOBAL APPEND PROPERTY PACT_MODULES pact_${name})  # what cmake --install exports, in layer order
  target_link_libraries(pact_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# pact_add_test(NAME SOURCES... DEPS ... LABEL unit|slow|gpu) -> one GoogleTest binary whose cases
# are registered with ctest one by one and carry the label.
function(pact_add_test name)
  cmake_parse_arguments(ARG "" "LABEL" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${name}
    PROPERTIES LABELS ${ARG_LABEL}
    DISCOVERY_TIMEOUT 60
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()

# pact_add_fuzzer(NAME SOURCE DEPS ... CORPUS dir [RUNS n]) -> a harness defining
# LLVMFuzzerTestOneInput, plus its short smoke test (label: fuzz).
# With PACT_FUZZ (clang preset) it is a real libFuzzer binary and the smoke test runs libFuzzer for
# a bounded number of runs over the seed corpus. Otherwise it links fuzz/standalone_driver.cpp, which
# replays every corpus file and a fixed number of deterministic mutations of each, so the harness is
# exercised in the ordinary release build too.
function(pact_add_fuzzer name)
  cmake_parse_arguments(ARG "" "SOURCE;CORPUS;RUNS" "DEPS" ${ARGN})
  if(NOT ARG_RUNS)
    set(ARG_RUNS 20000)
  endif()
  add_executable(${name} ${ARG_SOURCE})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  if(PACT_FUZZ)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    # libFuzzer writes new inputs into its first corpus directory: give it one in the build tree so the
    # checked-in seed corpus stays as committed.
    set(scratch ${CMAKE_CURRENT_BINARY_DIR}/${name}_corpus)
    file(MAKE_DIRECTORY ${scratch})
    add_test(NAME ${name}.smoke
      COMMAND ${name} -runs=${ARG_RUNS} -max_total_time=60 -seed=1 ${scratch} ${ARG_CORPUS})
  else()
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/fuzz/standalone_driver.cpp)
    add_test(NAME ${name}.smoke COMMAND ${name} ${ARG_CORPUS} --mutations=${ARG_RUNS})
  endif()
  set_tests_properties(${name}.smoke PROPERTIES LABELS fuzz TIMEOUT 300)
endfunction()
