# The sql:STATEMENT handler on a real PostgreSQL, in process and as `partq
# worker` processes running examples/sql/handle.sql (SIGKILLed mid-run).
add_executable(sql_handler_test ${CMAKE_CURRENT_SOURCE_DIR}/sql_handler_test.cc)
partq_target_defaults(sql_handler_test)
target_link_libraries(sql_handler_test partq::sql_handler partq::consumer partq::testing
                                       GTest::gtest_main)
target_compile_definitions(sql_handler_test PRIVATE PARTQ_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
gtest_discover_tests(sql_handler_test TEST_PREFIX "sql_handler." PROPERTIES LABELS pg TIMEOUT 400
                     DISCOVERY_TIMEOUT 60)
