# HttpClient against real servers on loopback: in-process civetweb for http,
# https_test_server.py (python3) for https, certificates made by the openssl
# command at test time. No database: unit.
find_package(civetweb REQUIRED)
find_package(nlohmann_json REQUIRED)
add_executable(http_client_test ${CMAKE_CURRENT_SOURCE_DIR}/http_client_test.cc)
target_link_libraries(http_client_test partq::http_client civetweb::civetweb
                                       nlohmann_json::nlohmann_json absl::strings absl::synchronization
                                       partq::testing GTest::gmock GTest::gtest_main)
target_compile_definitions(http_client_test PRIVATE
                           HTTPS_TEST_SERVER="${CMAKE_CURRENT_SOURCE_DIR}/https_test_server.py")
partq_target_defaults(http_client_test)
gtest_discover_tests(http_client_test TEST_PREFIX http_client. PROPERTIES LABELS unit TIMEOUT 120 DISCOVERY_TIMEOUT 60)
