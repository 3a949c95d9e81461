# cmake --install: headers, the module libraries, the pact CLI, a CMake package (find_package(Pact) gives
# Pact::pact, every module, and each module as Pact::pact_<name>) and a pkg-config file (pact.pc).
# examples/consumer is the project that uses it; the test install.consumer builds it against an install.
include(CMakePackageConfigHelpers)

get_property(pact_modules GLOBAL PROPERTY PACT_MODULES)
add_library(pact_all INTERFACE)
target_link_libraries(pact_all INTERFACE ${pact_modules})
set_target_properties(pact_all PROPERTIES EXPORT_NAME pact)
add_library(Pact::pact ALIAS pact_all)

set(PACT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Pact)
install(TARGETS ${pact_modules} pact_all EXPORT PactTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT PactTargets NAMESPACE Pact:: DESTINATION ${PACT_CMAKE_DIR})
install(TARGETS pact RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/pact/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pact
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.inc")

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/PactConfig.cmake.in ${PROJECT_BINARY_DIR}/PactConfig.cmake
                              INSTALL_DESTINATION ${PACT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/PactConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/PactConfig.cmake ${PROJECT_BINARY_DIR}/PactConfigVersion.cmake
        DESTINATION ${PACT_CMAKE_DIR})

# pkg-config: static libraries, so dependents come before what they use (the reverse of the layer order),
# and the system libraries they need after them.
set(pact_libs "")
foreach(module ${pact_modules})
  string(PREPEND pact_libs "-l${module} ")
endforeach()
set(PACT_PC_LIBS "${pact_libs}")
get_target_property(pact_core_defs pact_core INTERFACE_COMPILE_DEFINITIONS)
set(PACT_PC_CFLAGS "")
foreach(def ${pact_core_defs})
  string(APPEND PACT_PC_CFLAGS " -D${def}")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/pact.pc.in ${PROJECT_BINARY_DIR}/pact.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pact.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
