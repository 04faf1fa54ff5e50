// The search journal (see journal.h).
#include "journal.h"

#include <cstdio>

#include "error.h"
#include "util.h"

namespace fusetune {

Journal::Journal(std::string path) : path_(std::move(path)) {
  if (!file_exists(path_)) return;
  const std::string text = read_file(path_);
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // cut short by an interruption
    try {
      json j = json::parse(text.substr(start, end - start));
      entries_[j.at("key").get<std::string>()] = j.at("result");
    } catch (const json::exception&) {
    }
    start = end + 1;
  }
}

const json* Journal::find(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void Journal::append(const std::string& key, const json& result) {
  entries_[key] = result;
  std::FILE* f = std::fopen(path_.c_str(), "a");
  if (!f) FT_THROW("cannot append to " + path_);
  std::fprintf(f, "%s\n", json{{"key", key}, {"result", result}}.dump().c_str());
  std::fclose(f);
}

}  // namespace fusetune
