# cmake --install: the header, the library (shared or static per BUILD_SHARED_LIBS), the CMake
# package (cvfuseConfig.cmake, its version file, the cvfuse::cvfuse target) and cvfuse.pc.
include(CMakePackageConfigHelpers)

set(CVF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/cvfuse CACHE STRING
  "Where cvfuseConfig.cmake is installed (relative to the prefix)")
mark_as_advanced(CVF_INSTALL_CMAKEDIR)

install(TARGETS cvfuse EXPORT cvfuseTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/cvfuse.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT cvfuseTargets NAMESPACE cvfuse:: DESTINATION ${CVF_INSTALL_CMAKEDIR})

# cvfuseConfig.cmake: finds what a static libcvfuse's consumers must link (threads; the CUDA
# toolkit's targets in CUDA builds), then the exported target.
get_target_property(CVF_LIBRARY_TYPE cvfuse TYPE)
if(CVF_LIBRARY_TYPE STREQUAL "SHARED_LIBRARY")
  set(CVF_CONFIG_SHARED ON)
else()
  set(CVF_CONFIG_SHARED OFF)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/cvfuseConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cvfuseConfig.cmake INSTALL_DESTINATION ${CVF_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same MAJOR.MINOR is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cvfuseConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cvfuseConfig.cmake ${PROJECT_BINARY_DIR}/cvfuseConfigVersion.cmake
  DESTINATION ${CVF_INSTALL_CMAKEDIR})

# cvfuse.pc: relocatable (paths relative to ${pcfiledir}, so `cmake --install --prefix DIR` works
# wherever DIR is). Libs.private is what the static library needs (pkg-config --static).
set(CVF_PC_LIBS_PRIVATE "-lm -lpthread")
set(CVF_PC_CUDA_NOTE "")
if(CVF_HAVE_CUDA)
  set(CVF_PC_CUDA_NOTE " and CUDA")
  list(JOIN CVF_CUDA_PC_LIBS " " CVF_PC_CUDA_LIBS)
  string(APPEND CVF_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} ${CVF_PC_CUDA_LIBS} -lstdc++")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CVF_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH CVF_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" CVF_PC_UP "${CVF_PC_UP}")
  set(CVF_PC_PREFIX "\${pcfiledir}/${CVF_PC_UP}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(CVF_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(CVF_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CVF_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(CVF_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/cvfuse.pc.in ${PROJECT_BINARY_DIR}/cvfuse.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cvfuse.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
