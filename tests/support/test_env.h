// Helpers for tests that need privileges or kernel features: they skip
// loudly, with the reason, instead of passing silently.
#ifndef SANDFENCE_TESTS_SUPPORT_TEST_ENV_H_
#define SANDFENCE_TESTS_SUPPORT_TEST_ENV_H_

#include <unistd.h>

#include "gtest/gtest.h"

#define SANDFENCE_REQUIRE_ROOT()                                   \
  do {                                                             \
    if (::geteuid() != 0) {                                        \
      GTEST_SKIP() << "needs root (BPF programs, cgroups); run as " \
                      "root to execute this test";                 \
    }                                                              \
  } while (0)

#endif  // SANDFENCE_TESTS_SUPPORT_TEST_ENV_H_
