// Test entry point: registers the built-in and test-only impls once.
#include <gtest/gtest.h>

#include "core/registry.hpp"
#include "test_impls.hpp"

int main(int argc, char** argv) {
  kv::register_builtin();
  kvtest::register_test_impls();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
