// The project's JSON type: nlohmann's ordered variant, so that files keep their declared order
// (a config's parameter order is part of its name).
#pragma once
#include <nlohmann/json.hpp>

namespace fusetune {
using json = nlohmann::ordered_json;
}
