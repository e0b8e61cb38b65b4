# Installing pejit: libraries, public headers, tools, templates and a CMake
# package, so that another project can
#   find_package(pejit CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE pejit::runtime)
# (tests/install builds such a consumer against a temporary prefix).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Headers go under include/pejit/, and a consumer includes them with the
# prefix: #include "pejit/runtime/Pejit.h".
set(PEJIT_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
set(PEJIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/pejit)
set(PEJIT_INSTALL_TEMPLATEDIR ${CMAKE_INSTALL_DATADIR}/pejit/templates)

# Exported name (pejit::NAME) of each library.
set(PEJIT_EXPORTED_LIBRARIES
  PejitCore:core PejitReference:reference PejitNpy:npy PejitCuda:cuda
  PejitPE:pe PejitAttn:attn PejitCompiler:compiler PejitX86Backend:x86_backend
  PejitNvidiaBackend:nvidia_backend PejitInterpreter:interpreter
  PejitRuntime:runtime)
set(targets)
foreach(entry ${PEJIT_EXPORTED_LIBRARIES})
  string(REPLACE ":" ";" pair ${entry})
  list(GET pair 0 target)
  list(GET pair 1 name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${PEJIT_INSTALL_INCLUDEDIR}>)
  list(APPEND targets ${target})
endforeach()

install(TARGETS ${targets} EXPORT pejitTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS pejit pejit-opt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers keep their source paths under pejit/ (#include "pejit/runtime/Pejit.h"),
# and the generated ones (dialect .h.inc, pejit/runtime/Version.h) sit beside them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/pejit DESTINATION ${PEJIT_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_BINARY_DIR}/pejit DESTINATION ${PEJIT_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.h.inc" PATTERN "CMakeFiles" EXCLUDE)
# The kernels embed their templates; these are for reading and for
# PEJIT_TEMPLATE_DIR experiments.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/templates/ DESTINATION ${PEJIT_INSTALL_TEMPLATEDIR}
        FILES_MATCHING PATTERN "*.mlir")
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
              ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_BINARY_DIR}/docs/dialects DESTINATION ${CMAKE_INSTALL_DOCDIR})

install(EXPORT pejitTargets NAMESPACE pejit:: DESTINATION ${PEJIT_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pejitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pejitConfig.cmake
  INSTALL_DESTINATION ${PEJIT_INSTALL_CMAKEDIR}
  PATH_VARS PEJIT_INSTALL_TEMPLATEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pejitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pejitConfig.cmake
              ${PROJECT_BINARY_DIR}/pejitConfigVersion.cmake
        DESTINATION ${PEJIT_INSTALL_CMAKEDIR})
