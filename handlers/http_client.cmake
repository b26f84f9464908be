# partq::http_client — the HTTP transport of the http: handler (libcurl):
# POSTs a body, returns a classified response.
find_package(CURL REQUIRED)
add_library(partq_http_client ${CMAKE_CURRENT_SOURCE_DIR}/http_client.cc)
add_library(partq::http_client ALIAS partq_http_client)
partq_target_defaults(partq_http_client)
target_compile_definitions(partq_http_client PRIVATE PARTQ_VERSION="${PROJECT_VERSION}")
target_link_libraries(partq_http_client PUBLIC absl::status absl::statusor absl::time
                                        PRIVATE CURL::libcurl absl::strings absl::str_format)
