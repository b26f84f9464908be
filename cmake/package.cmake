# What `cmake --install` puts in place besides the libraries and their headers
# (partq_install_library in the root CMakeLists): partq::partq with the umbrella
# headers, the CMake package (find_package(partq CONFIG)) and the pkg-config
# files partq.pc and partq-bridge.pc. tests/install builds a project against it.
include(CMakePackageConfigHelpers)

# partq::partq: producer, consumer and admin on PostgreSQL, with the umbrella
# headers "partq/producer.h", "partq/consumer.h" and "partq/admin.h".
add_library(partq_partq INTERFACE)
add_library(partq::partq ALIAS partq_partq)
set_target_properties(partq_partq PROPERTIES EXPORT_NAME partq)
target_include_directories(partq_partq INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
target_link_libraries(partq_partq INTERFACE partq::consumer partq::producer partq::pg)
install(TARGETS partq_partq EXPORT partqTargets)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(PARTQ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/partq)
install(EXPORT partqTargets NAMESPACE partq:: DESTINATION ${PARTQ_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/partqConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/partqConfig.cmake
                              INSTALL_DESTINATION ${PARTQ_CMAKE_DIR})
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/partqConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/partqConfig.cmake ${PROJECT_BINARY_DIR}/partqConfigVersion.cmake
        DESTINATION ${PARTQ_CMAKE_DIR})

# Writes NAME.pc for LIBRARIES (given dependencies first, as the root adds
# them). Its Requires are the REQUIRES given plus the pkg-config modules of the
# libraries' link dependencies, read from the targets, so a dependency added
# to a library's CMakeLists reaches the .pc file or stops the configure here.
function(partq_write_pc name description)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "LIBRARIES;REQUIRES")
  set(requires ${arg_REQUIRES})
  set(libs)
  set(threads)
  foreach(target IN LISTS arg_LIBRARIES)
    # Static archives: a library before the ones it uses.
    list(PREPEND libs -l${target})
    get_target_property(deps ${target} INTERFACE_LINK_LIBRARIES)
    foreach(dep IN LISTS deps)
      # A static library's private dependencies are link-only ones.
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
      if(dep MATCHES "^absl::(.+)$")
        list(APPEND requires absl_${CMAKE_MATCH_1})
      elseif(dep MATCHES "^prometheus-cpp::(.+)$")
        list(APPEND requires prometheus-cpp-${CMAKE_MATCH_1})
      elseif(dep MATCHES "^PkgConfig::(.+)$")
        list(APPEND requires ${${CMAKE_MATCH_1}_MODULE_NAME})
      elseif(dep STREQUAL "Threads::Threads")
        set(threads -pthread)
      elseif(NOT dep MATCHES "^partq::" AND NOT dep MATCHES "^\\$<BUILD_INTERFACE:")
        message(FATAL_ERROR "${name}.pc: no pkg-config module known for ${target}'s dependency ${dep}")
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES requires)
  list(SORT requires)
  list(JOIN requires ", " PC_REQUIRES)
  list(JOIN libs " " PC_LIBS)
  string(STRIP "${PC_LIBS} ${threads}" PC_LIBS)
  set(PC_NAME ${name})
  set(PC_DESCRIPTION ${description})
  # Relocatable: the prefix is found from the .pc file's own directory.
  file(RELATIVE_PATH PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  string(REGEX REPLACE "/$" "" PC_PREFIX ${PC_PREFIX})
  configure_file(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/partq.pc.in ${PROJECT_BINARY_DIR}/${name}.pc
                 @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${name}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

partq_write_pc(partq "Partitioned work queue on PostgreSQL: producer, consumer, admin"
               LIBRARIES partq_base partq_partitioner partq_schedule partq_store partq_pg
                         partq_coordinator partq_producer partq_consumer)
partq_write_pc(partq-bridge "partq's Kafka bridge" LIBRARIES partq_bridge REQUIRES partq)
