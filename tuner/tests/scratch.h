// Test helper: scratch folders for tests that write files (compile caches, captured models,
// built extensions). They lie under one folder per test process, removed when the process's tests
// end, unless a test failed or FUSETUNE_KEEP_TEST_DIRS is set: then it is kept and its path printed.
#pragma once
#include <string>

namespace fusetune {

// A new empty folder whose name starts with `tag`.
std::string scratch_dir(const std::string& tag);

}  // namespace fusetune
