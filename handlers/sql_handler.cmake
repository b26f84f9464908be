# partq::sql_handler — the sql:STATEMENT handler: one SQL statement per item,
# inside the ack transaction (sql_handler.h).
add_library(partq_sql_handler ${CMAKE_CURRENT_SOURCE_DIR}/sql_handler.cc)
add_library(partq::sql_handler ALIAS partq_sql_handler)
partq_target_defaults(partq_sql_handler)
target_link_libraries(partq_sql_handler PUBLIC partq::consumer absl::status absl::statusor
                                        absl::strings absl::time absl::span
                                        PRIVATE partq::base)
