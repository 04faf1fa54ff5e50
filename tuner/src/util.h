// Small shared helpers: files, atomic writes, hashing, subprocesses, number formatting, elapsed time.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace fusetune {

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);
void make_dirs(const std::string& path);
// Writes via a temporary file in the same folder and rename, so readers never see half a file.
void write_file_atomic(const std::string& path, const std::string& text);
// Writes only when the content differs, so that builds keyed on timestamps do not redo work.
bool write_file_if_changed(const std::string& path, const std::string& text);
std::vector<std::string> list_files(const std::string& dir, const std::string& suffix);
std::string path_join(const std::string& a, const std::string& b);
std::string absolute_path(const std::string& path);
std::string dir_name(const std::string& path);
std::string base_name(const std::string& path);

std::string sha256_hex(const std::string& data);
std::string hex64(uint64_t v);  // "0x" and 16 hex digits

// Runs argv with extra environment entries, passing stdio through; returns the exit status
// (128 + signal when killed by one).
int run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
// Path of the running fusetune executable (to start worker processes from it).
std::string self_exe();

std::string format_float(double v);  // shortest text that reads back as the same float

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string c_identifier(const std::string& s);

}  // namespace fusetune
