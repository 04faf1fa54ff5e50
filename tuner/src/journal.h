// The search journal: one JSON line per measured candidate, appended as results arrive, so that
// an interrupted search resumes without measuring a candidate twice. A line cut short by an
// interruption is ignored.
#pragma once
#include <map>
#include <string>

#include "json.h"

namespace fusetune {

class Journal {
 public:
  explicit Journal(std::string path);
  const json* find(const std::string& key) const;
  void append(const std::string& key, const json& result);

 private:
  std::string path_;
  std::map<std::string, json> entries_;
};

}  // namespace fusetune
