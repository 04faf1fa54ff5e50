#include "scratch.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace fusetune {
namespace {

std::string& root() {
  static std::string r;
  return r;
}

std::string make_dir(const std::string& pattern) {
  std::string tmpl = pattern + "_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("cannot create a scratch folder " + tmpl + ": " + std::strerror(errno));
  return tmpl;
}

class RemoveScratch : public ::testing::Environment {
 public:
  void TearDown() override {
    if (root().empty()) return;
    if (std::getenv("FUSETUNE_KEEP_TEST_DIRS") != nullptr || ::testing::UnitTest::GetInstance()->Failed()) {
      std::fprintf(stderr, "test folders kept in %s\n", root().c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(root(), ec);
    if (ec) std::fprintf(stderr, "could not remove the test folders in %s: %s\n", root().c_str(), ec.message().c_str());
  }
};

// gtest_main's RUN_ALL_TESTS runs the environments registered before main.
::testing::Environment* const remove_scratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

}  // namespace

std::string scratch_dir(const std::string& tag) {
  if (root().empty()) {
    const char* tmp = std::getenv("TMPDIR");
    root() = make_dir(std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/fusetune_tests");
  }
  return make_dir(root() + "/" + tag);
}

}  // namespace fusetune
